//! Who each plugin acts as, and whether the cluster lets it.
//!
//! With `--plugin-identity=serviceaccount` (the default) every plugin acts as its own
//! ServiceAccount, `kubewasm-plugin-<name>` in the identity namespace: the host impersonates it
//! for every request it makes for the plugin (its writes, its finalizer patches, its Events,
//! reads the cache cannot serve), so the API server authorizes each one as the plugin, and RBAC
//! — not the plugin's manifest — has the last word. Impersonation rather than a token per plugin
//! (TokenRequest): the host needs no secrets and no token rotation, and its own right to act as
//! a plugin is one RBAC rule naming exactly those ServiceAccounts (`impersonate` with
//! `resourceNames`); the audit log records both the host and the plugin on every request.
//!
//! Admission: before a plugin (or a new version of it) starts, the host asks the API server,
//! as the plugin, whether it may do everything its manifest declares and everything the host
//! will do for it (SelfSubjectAccessReview, one per verb, namespace and name); anything missing
//! refuses it, naming the missing rules. With `--plugin-identity=host` plugins act as the host
//! itself, as before 0.1.1: quick for local use, no admission.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};

use crate::discovery::Discovery;
use crate::manifest::{Manifest, Rule, Verb};
use crate::resource::Scope;

/// How plugins act toward the API server (`--plugin-identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityMode {
    /// Each plugin as its own ServiceAccount.
    ServiceAccount,
    /// Every plugin as the host.
    Host,
}

impl std::str::FromStr for IdentityMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "serviceaccount" => Ok(IdentityMode::ServiceAccount),
            "host" => Ok(IdentityMode::Host),
            _ => Err(format!("{text:?}: use serviceaccount (each plugin as its own ServiceAccount) or host")),
        }
    }
}

/// Asks whether the client's identity may make one request; `Some` when it may not.
async fn review(api: Api<SelfSubjectAccessReview>, (check, why): (Check, String), timeout: Duration) -> Result<Option<(Check, String)>, String> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(check.group.clone()),
                resource: Some(check.resource.clone()),
                subresource: check.subresource.clone(),
                verb: Some(check.verb.as_str().into()),
                namespace: check.namespace.clone(),
                name: check.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = tokio::time::timeout(timeout, api.create(&PostParams::default(), &review))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    let allowed = answer.status.is_some_and(|s| s.allowed);
    Ok((!allowed).then_some((check, why)))
}

/// The ServiceAccount a plugin acts as.
pub fn service_account(plugin: &str) -> String {
    format!("kubewasm-plugin-{plugin}")
}

/// The user name of a plugin's ServiceAccount, as the API server sees it.
pub fn user_name(namespace: &str, plugin: &str) -> String {
    format!("system:serviceaccount:{namespace}:{}", service_account(plugin))
}

/// Why a plugin may not start as its identity.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error(
        "its identity {user} lacks {} RBAC rule(s) it needs: {}. `kubewasm rbac --plugin {plugin}` prints Roles that grant them",
        missing.len(),
        missing.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Missing { plugin: String, user: String, missing: Vec<MissingRule> },
    #[error("cannot ask the API server what {user} may do: {reason}")]
    Review { user: String, reason: String },
    #[error("cannot act as {user}: {reason}")]
    Impersonate { user: String, reason: String },
}

impl AdmissionError {
    /// What a `Ready=False` or rejection says: `Forbidden` for a missing rule, else the API
    /// server could not answer.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, AdmissionError::Missing { .. })
    }
}

/// One permission an identity lacks, written as an admin pastes it into a Role: the rule, and
/// the namespace (or cluster-wide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRule {
    pub group: String,
    /// Plural, with the subresource: `deployments`, `foos/status`.
    pub resource: String,
    pub verb: Verb,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub why: String,
}

impl std::fmt::Display for MissingRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{apiGroups: [\"{}\"], resources: [\"{}\"], verbs: [\"{}\"]", self.group, self.resource, self.verb)?;
        if let Some(name) = &self.name {
            write!(f, ", resourceNames: [\"{name}\"]")?;
        }
        write!(f, "}}")?;
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}")?,
            None => write!(f, " cluster-wide")?,
        }
        write!(f, " ({})", self.why)
    }
}

/// Requests a plugin's identity needs to make: a verb on a resource in a namespace (or all).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Check {
    group: String,
    resource: String,
    subresource: Option<String>,
    verb: Verb,
    namespace: Option<String>,
    name: Option<String>,
}

/// Who plugins act as, for one host.
#[derive(Clone)]
pub struct Identities {
    mode: IdentityMode,
    /// Where the plugins' ServiceAccounts live.
    namespace: String,
    host: kube::Client,
    discovery: Arc<Discovery>,
    /// Namespaces served; empty for all.
    served: Arc<[String]>,
    timeout: Duration,
}

impl Identities {
    pub fn new(mode: IdentityMode, namespace: String, host: kube::Client, discovery: Arc<Discovery>, served: Arc<[String]>, timeout: Duration) -> Self {
        Identities { mode, namespace, host, discovery, served, timeout }
    }

    pub fn mode(&self) -> IdentityMode {
        self.mode
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The user a plugin acts as: its ServiceAccount, or `None` for the host itself.
    pub fn user(&self, plugin: &str) -> Option<String> {
        (self.mode == IdentityMode::ServiceAccount).then(|| user_name(&self.namespace, plugin))
    }

    /// A client acting as the plugin, over the host's connections.
    pub fn client_for(&self, plugin: &str) -> kube::Client {
        match self.user(plugin) {
            // A plugin name is a DNS label: always a valid header value.
            Some(user) => crate::client::acting_as(&self.host, &user).expect("plugin names are header-safe"),
            None => self.host.clone(),
        }
    }

    /// Asks the API server, as the plugin, whether it may do everything `manifest` needs.
    pub async fn admit(&self, manifest: &Manifest) -> Result<(), AdmissionError> {
        let Some(user) = self.user(&manifest.name) else { return Ok(()) };
        let client = self.client_for(&manifest.name);
        let mut checks: Vec<(Check, String)> = Vec::new();
        for rule in manifest.rules() {
            for check in self.expand(&rule).await {
                checks.push((check, rule.why.to_string()));
            }
        }
        checks.sort();
        checks.dedup_by(|a, b| a.0 == b.0);
        let api: Api<SelfSubjectAccessReview> = Api::all(client);
        let timeout = self.timeout;
        let answers: Vec<Option<(Check, String)>> =
            futures::stream::iter(checks).map(|item| review(api.clone(), item, timeout)).buffer_unordered(8).try_collect().await.map_err(|reason| {
                if reason.contains("impersonate") {
                    AdmissionError::Impersonate { user: user.clone(), reason }
                } else {
                    AdmissionError::Review { user: user.clone(), reason }
                }
            })?;
        let mut missing: Vec<MissingRule> = answers
            .into_iter()
            .flatten()
            .map(|(c, why)| MissingRule {
                group: c.group,
                resource: match c.subresource {
                    Some(sub) => format!("{}/{sub}", c.resource),
                    None => c.resource,
                },
                verb: c.verb,
                namespace: c.namespace,
                name: c.name,
                why,
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_by(|a, b| (&a.namespace, &a.group, &a.resource, a.verb).cmp(&(&b.namespace, &b.group, &b.resource, b.verb)));
        Err(AdmissionError::Missing { plugin: manifest.name.clone(), user, missing })
    }

    /// The single requests a rule stands for, in the namespaces it covers.
    async fn expand(&self, rule: &Rule) -> Vec<Check> {
        let (plural, scope) = match self.discovery.resolve(&rule.resource).await {
            Ok(resolved) => (resolved.api.plural, resolved.scope),
            // Not served yet (its CRD may come later): RBAC does not need it to exist.
            Err(_) => (crate::resource::plural(&rule.resource), crate::resource::builtin_scope(&rule.resource)),
        };
        let namespaces: Vec<Option<String>> = match (&rule.namespaces, scope) {
            (_, Scope::Cluster) => vec![None],
            (Some(set), Scope::Namespaced) => set.iter().cloned().map(Some).collect(),
            (None, Scope::Namespaced) if self.served.is_empty() => vec![None],
            (None, Scope::Namespaced) => self.served.iter().cloned().map(Some).collect(),
        };
        let names: Vec<Option<String>> = if rule.names.is_empty() { vec![None] } else { rule.names.iter().cloned().map(Some).collect() };
        let mut checks = BTreeSet::new();
        for verb in &rule.verbs {
            for namespace in &namespaces {
                for name in &names {
                    checks.insert(Check {
                        group: rule.resource.group.clone(),
                        resource: plural.clone(),
                        subresource: rule.subresource.clone(),
                        verb: *verb,
                        namespace: namespace.clone(),
                        name: name.clone(),
                    });
                }
            }
        }
        checks.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_rules_read_like_role_rules() {
        let rule = MissingRule {
            group: "apps".into(),
            resource: "deployments".into(),
            verb: Verb::Create,
            namespace: Some("team-a".into()),
            name: None,
            why: "declared in its manifest".into(),
        };
        assert_eq!(rule.to_string(), r#"{apiGroups: ["apps"], resources: ["deployments"], verbs: ["create"]} in namespace team-a (declared in its manifest)"#);
        let named = MissingRule {
            name: Some("edit".into()),
            namespace: None,
            group: "rbac.authorization.k8s.io".into(),
            resource: "clusterroles".into(),
            verb: Verb::Bind,
            why: "declared".into(),
        };
        assert!(named.to_string().contains(r#"resourceNames: ["edit"]} cluster-wide"#), "{named}");
        assert_eq!(user_name("kubewasm", "sample"), "system:serviceaccount:kubewasm:kubewasm-plugin-sample");
        assert_eq!("host".parse::<IdentityMode>(), Ok(IdentityMode::Host));
        assert!("token".parse::<IdentityMode>().is_err());
    }
}
