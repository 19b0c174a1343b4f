//! Who each plugin acts as, and whether the cluster and the host let it.
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
//! The identity follows from the plugin's name, and RBAC cannot limit `create` to a name: who
//! may create Plugin resources could name one after any identity the host may act as. So a
//! host serving Plugin resources relies on a ValidatingAdmissionPolicy (the chart ships it) that
//! lets a user create or change Plugin `NAME` only if RBAC lets them `use` the resource
//! `identities.kubewasm.io` named `NAME` ([`POLICY_EXPRESSION`]), and it checks that the policy
//! and its binding are in force before admitting any plugin ([`Identities::with_policy`]).
//!
//! Admission: before a plugin (or a new version of it) starts, the host counts what it asks of
//! the host — watches (one per resource and namespace, at most `--max-plugin-watches`) and
//! access reviews (one per verb, namespace and name, at most `--max-admission-reviews`), from
//! the numbers alone, before any review is built — and then asks the API server, as the plugin,
//! whether it may do everything its manifest declares and everything the host will do for it
//! (one SelfSubjectRulesReview per namespace first, then a SelfSubjectAccessReview for each
//! request those rules do not show allowed, all under a rate limit shared by all admissions);
//! anything missing refuses it, naming the missing rules. With `--plugin-identity=host` plugins
//! act as the host itself, as before 0.1.1: quick for local use, no reviews (watches are still
//! counted).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, ResourceRule, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::client::SharedBucket;
use crate::discovery::{Discovery, Resolved};
use crate::excerpt::excerpt;
use crate::manifest::{Manifest, Rule, Verb};
use crate::resource::{Gvk, Scope};

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

/// What the host admits of one plugin besides what RBAC allows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdmissionLimits {
    /// Access reviews one admission may need (`--max-admission-reviews`).
    pub max_reviews: usize,
    /// Watches (informers: one per resource and namespace) one plugin may open
    /// (`--max-plugin-watches`).
    pub max_watches: usize,
    /// Access and rules reviews per second, all admissions together (`--admission-qps`); twice
    /// as many at once.
    pub qps: f64,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits { max_reviews: 2000, max_watches: 500, qps: 50.0 }
    }
}

impl AdmissionLimits {
    fn bucket(&self) -> SharedBucket {
        let burst = (2.0 * self.qps).ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
        crate::client::ClientLimits { qps: self.qps, burst }.bucket()
    }
}

/// The most of an access review's error kept in an admission error.
const REASON_BYTES: usize = 2048;

/// The API group of the virtual resource whose `use` RBAC grants a plugin's identity.
pub const IDENTITY_GROUP: &str = "kubewasm.io";
/// The virtual resource: `use` on `identities` named `NAME` lets a user create Plugin `NAME`.
pub const IDENTITY_RESOURCE: &str = "identities";
/// The ValidatingAdmissionPolicy's check, as the chart writes it: the requesting user may `use`
/// the identity the Plugin's name stands for, in the Plugin's namespace. The host requires this
/// exact expression (`--plugin-identity-policy`).
pub const POLICY_EXPRESSION: &str =
    "authorizer.group('kubewasm.io').resource('identities').namespace(object.metadata.namespace).name(object.metadata.name).check('use').allowed()";

/// The one match condition the chart's policy has (a change of labels or annotations keeps the
/// identity, so only a creation or a new spec is checked); any other narrows the policy.
pub const POLICY_MATCH_CONDITION: &str = "request.operation == 'CREATE' || object.spec != oldObject.spec";

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
        // An error page the API server (or whatever answers at its address) sent may be long.
        .map_err(|e| excerpt(&e.to_string(), REASON_BYTES).into_owned())?;
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
    #[error(
        "it needs {needs} access reviews at admission (verbs × namespaces × resource names of its rules), more than the host makes for one plugin (--max-admission-reviews={max}): grant cluster-wide rather than namespace by namespace or name by name"
    )]
    TooManyReviews { needs: usize, max: usize },
    #[error(
        "it needs more than {max} watches (one per resource and namespace it reads; --max-plugin-watches={max}): grant lists cluster-wide rather than namespace by namespace, or serve fewer namespaces"
    )]
    TooManyWatches { max: usize },
    #[error(
        "Plugin resources are not protected: {problem}. Without the ValidatingAdmissionPolicy {policy} (the chart's), whoever may create a Plugin could name it after another team's plugin and act as its identity; install it, or run with --plugin-identity-policy= to accept that"
    )]
    Unprotected { policy: String, problem: String },
}

impl AdmissionError {
    /// What a `Ready=False` or rejection says: `Forbidden` for a missing rule or a cap passed,
    /// else the API server could not answer (or the identity policy is not in force).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, AdmissionError::Missing { .. } | AdmissionError::TooManyReviews { .. } | AdmissionError::TooManyWatches { .. })
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

/// A rule, in the namespaces it covers on this host, as the access reviews it stands for.
struct Expansion {
    rule: Rule,
    plural: String,
    namespaces: Vec<Option<String>>,
}

impl Expansion {
    /// The access reviews: one per verb, namespace and name.
    fn reviews(&self) -> usize {
        self.rule.verbs.len().saturating_mul(self.namespaces.len()).saturating_mul(self.rule.names.len().max(1))
    }
}

/// What a rule is about besides its verbs: resource, subresource, namespaces and names.
type RuleTarget = (Gvk, Option<String>, Option<BTreeSet<String>>, BTreeSet<String>);

/// Rules that differ only in their verbs, as one (a plugin's implied reads and its own grant on
/// the same resource): counted and reviewed once.
fn merged(rules: Vec<Rule>) -> Vec<Rule> {
    let mut merged: BTreeMap<RuleTarget, Rule> = BTreeMap::new();
    for rule in rules {
        let key = (rule.resource.clone(), rule.subresource.clone(), rule.namespaces.clone(), rule.names.clone());
        match merged.get_mut(&key) {
            Some(into) => into.verbs.extend(rule.verbs),
            None => {
                merged.insert(key, rule);
            }
        }
    }
    merged.into_values().collect()
}

/// The namespaces a rule covers on a host serving `served` (empty: all): those it names that
/// are served (the host makes no request for the plugin anywhere else), every one served, or
/// `None` — cluster-wide, or every namespace.
fn rule_namespaces(rule: &Rule, scope: Scope, served: &[String]) -> Vec<Option<String>> {
    match (&rule.namespaces, scope) {
        (_, Scope::Cluster) => vec![None],
        (Some(set), Scope::Namespaced) => set.iter().filter(|ns| served.is_empty() || served.contains(ns)).cloned().map(Some).collect(),
        (None, Scope::Namespaced) if served.is_empty() => vec![None],
        (None, Scope::Namespaced) => served.iter().cloned().map(Some).collect(),
    }
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
    limits: AdmissionLimits,
    /// Paces the access reviews (and discovery queries) of all admissions.
    reviews: SharedBucket,
    /// The ValidatingAdmissionPolicy that must be in force before any plugin is admitted.
    policy: Option<String>,
}

impl Identities {
    pub fn new(
        mode: IdentityMode,
        namespace: String,
        host: kube::Client,
        discovery: Arc<Discovery>,
        served: Arc<[String]>,
        timeout: Duration,
        limits: AdmissionLimits,
    ) -> Self {
        Identities { mode, namespace, host, discovery, served, timeout, reviews: limits.bucket(), limits, policy: None }
    }

    /// Requires the ValidatingAdmissionPolicy `policy` and its binding of the same name to be
    /// in force before any plugin is admitted (a host serving Plugin resources with a
    /// ServiceAccount per plugin).
    pub fn with_policy(self, policy: String) -> Self {
        Identities { policy: Some(policy), ..self }
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

    /// Admits a plugin: counts its watches and access reviews against the host's caps, checks
    /// that the identity policy is in force, then asks the API server, as the plugin, whether it
    /// may do everything `manifest` needs.
    pub async fn admit(&self, manifest: &Manifest, sharded: bool) -> Result<(), AdmissionError> {
        let mut kinds = HashMap::new();
        self.count_watches(manifest, &mut kinds).await?;
        let Some(user) = self.user(&manifest.name) else { return Ok(()) };
        if let Some(policy) = &self.policy {
            self.policy_in_force(policy).await?;
        }
        let mut rules = manifest.rules();
        if sharded {
            rules.extend(manifest.sharding_rules());
        }
        let mut expansions = Vec::new();
        for rule in merged(rules) {
            let (plural, scope) = match self.resolve(&rule.resource, &mut kinds).await {
                Some(resolved) => (resolved.api.plural, resolved.scope),
                // Not served yet (its CRD may come later): RBAC does not need it to exist.
                None => (crate::resource::plural(&rule.resource), crate::resource::builtin_scope(&rule.resource)),
            };
            let namespaces = rule_namespaces(&rule, scope, &self.served);
            expansions.push(Expansion { rule, plural, namespaces });
        }
        // From the numbers alone: not one review is built past the cap.
        let needs = expansions.iter().map(Expansion::reviews).fold(0usize, usize::saturating_add);
        if needs > self.limits.max_reviews {
            return Err(AdmissionError::TooManyReviews { needs, max: self.limits.max_reviews });
        }
        let mut checks: BTreeMap<Check, String> = BTreeMap::new();
        for expansion in &expansions {
            for check in expand(expansion) {
                checks.entry(check).or_insert_with(|| expansion.rule.why.to_string());
            }
        }
        let client = self.client_for(&manifest.name);
        self.drop_granted(Api::all(client.clone()), &mut checks).await;
        let api: Api<SelfSubjectAccessReview> = Api::all(client);
        let timeout = self.timeout;
        let answers: Vec<Option<(Check, String)>> = futures::stream::iter(checks)
            .map(|item| {
                let api = api.clone();
                async move {
                    self.throttle().await;
                    review(api, item, timeout).await
                }
            })
            .buffer_unordered(8)
            .try_collect()
            .await
            .map_err(|reason| {
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

    /// Takes out of `checks` what the identity's RBAC visibly grants, asking once per namespace
    /// the checks name (SelfSubjectRulesReview) instead of once per check: fifty plugins of ten
    /// checks each took 10 s of access reviews at the shared rate. Only a complete answer counts
    /// (`incomplete` means an authorizer, a webhook say, could not list its rules, and it may
    /// deny what RBAC allows); what a rule does not show allowed, an answer that fails, checks
    /// cluster-wide or across all namespaces (a namespace's rules include its RoleBindings'),
    /// all go on to access reviews, which name what is missing. A rule shown is a grant of the
    /// authorizer, so this only ever saves reviews; the API server still authorizes every
    /// request the plugin makes.
    async fn drop_granted(&self, api: Api<SelfSubjectRulesReview>, checks: &mut BTreeMap<Check, String>) {
        let namespaces: BTreeSet<String> = checks.keys().filter_map(|c| c.namespace.clone()).collect();
        let timeout = self.timeout;
        let granted: Vec<(String, Vec<ResourceRule>)> = futures::stream::iter(namespaces)
            .map(|namespace| {
                let api = api.clone();
                async move {
                    self.throttle().await;
                    let review = SelfSubjectRulesReview { spec: SelfSubjectRulesReviewSpec { namespace: Some(namespace.clone()) }, ..Default::default() };
                    let answer = tokio::time::timeout(timeout, api.create(&PostParams::default(), &review)).await.ok()?.ok()?;
                    let status = answer.status.filter(|s| !s.incomplete)?;
                    Some((namespace, status.resource_rules))
                }
            })
            .buffer_unordered(8)
            .filter_map(std::future::ready)
            .collect()
            .await;
        for (namespace, rules) in granted {
            checks.retain(|check, _| check.namespace.as_ref() != Some(&namespace) || !rules.iter().any(|rule| grants(rule, check)));
        }
    }

    /// Waits for a token of the admissions' shared rate limit.
    async fn throttle(&self) {
        let wait = self.reviews.lock().reserve(tokio::time::Instant::now());
        tokio::time::sleep(wait).await;
    }

    /// What API discovery says of `gvk` (`None`: not served, or no answer), asked once per
    /// admission; a query not answered from memory waits for a token like a review.
    async fn resolve(&self, gvk: &Gvk, known: &mut HashMap<Gvk, Option<Resolved>>) -> Option<Resolved> {
        if let Some(answer) = known.get(gvk) {
            return answer.clone();
        }
        if !self.discovery.is_cached(gvk) {
            self.throttle().await;
        }
        let answer = self.discovery.resolve(gvk).await.ok();
        known.insert(gvk.clone(), answer.clone());
        answer
    }

    /// Refuses a plugin whose watches (one informer per resource and namespace, as the
    /// controller opens them from [`Manifest::watch_plan`]) pass `--max-plugin-watches`,
    /// counting no further than the cap.
    async fn count_watches(&self, manifest: &Manifest, kinds: &mut HashMap<Gvk, Option<Resolved>>) -> Result<(), AdmissionError> {
        let max = self.limits.max_watches;
        let mut informers: HashSet<(Gvk, Option<String>)> = HashSet::new();
        for planned in manifest.watch_plan() {
            // As the controller does: a kind not served is taken as namespaced.
            let cluster = self.resolve(&planned.resource, kinds).await.is_some_and(|r| r.scope == Scope::Cluster);
            for namespace in planned.scopes(&self.served, cluster) {
                informers.insert((planned.resource.clone(), namespace));
                if informers.len() > max {
                    return Err(AdmissionError::TooManyWatches { max });
                }
            }
        }
        Ok(())
    }

    /// Whether the ValidatingAdmissionPolicy `name` and its binding of the same name are in
    /// force as the chart installs them: the policy checks [`POLICY_EXPRESSION`] on Plugins and
    /// fails closed, and the binding denies what it refuses, everywhere.
    async fn policy_in_force(&self, name: &str) -> Result<(), AdmissionError> {
        let unprotected = |problem: String| AdmissionError::Unprotected { policy: name.into(), problem };
        let policy: ValidatingAdmissionPolicy = self.read_cluster_object(name).await.map_err(unprotected)?;
        let binding: ValidatingAdmissionPolicyBinding = self.read_cluster_object(name).await.map_err(unprotected)?;
        let spec = policy.spec.unwrap_or_default();
        if spec.failure_policy.as_deref().is_some_and(|p| p != "Fail") {
            return Err(unprotected(format!("its failurePolicy is {:?}, not Fail", spec.failure_policy.unwrap_or_default())));
        }
        let checks = spec.validations.unwrap_or_default().iter().any(|v| v.expression == POLICY_EXPRESSION);
        if !checks {
            return Err(unprotected(format!("it does not check {POLICY_EXPRESSION}")));
        }
        // A match condition, object selector or excluded rule lets some Plugins past unchecked: a
        // Plugin author could label or name theirs to fit and take any identity.
        if let Some(condition) = spec.match_conditions.unwrap_or_default().into_iter().find(|c| c.expression != POLICY_MATCH_CONDITION) {
            return Err(unprotected(format!("its match condition {:?} narrows it: the chart's checks every Plugin", condition.name)));
        }
        let constraints = spec.match_constraints.unwrap_or_default();
        if constraints
            .object_selector
            .as_ref()
            .is_some_and(|s| s.match_labels.as_ref().is_some_and(|l| !l.is_empty()) || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty()))
        {
            return Err(unprotected("its objectSelector narrows it: the chart's checks every Plugin".into()));
        }
        if constraints.exclude_resource_rules.as_ref().is_some_and(|rules| !rules.is_empty()) {
            return Err(unprotected("its excludeResourceRules narrow it: the chart's checks every Plugin".into()));
        }
        // The chart's policy covers its own namespace; one covering every namespace will do.
        let selector = constraints.namespace_selector.unwrap_or_default();
        let labels = selector.match_labels.unwrap_or_default();
        let here = labels.is_empty() || (labels.len() == 1 && labels.get("kubernetes.io/metadata.name") == Some(&self.namespace));
        if !here || selector.match_expressions.is_some_and(|e| !e.is_empty()) {
            return Err(unprotected(format!("it does not cover the namespace {}", self.namespace)));
        }
        let covers = constraints.resource_rules.unwrap_or_default().iter().any(|r| {
            let has = |list: &Option<Vec<String>>, item: &str| list.as_ref().is_some_and(|l| l.iter().any(|x| x == item || x == "*"));
            has(&r.api_groups, IDENTITY_GROUP)
                && has(&r.resources, "plugins")
                && has(&r.operations, "CREATE")
                && has(&r.operations, "UPDATE")
                && r.resource_names.as_ref().is_none_or(Vec::is_empty)
        });
        if !covers {
            return Err(unprotected("it does not match the creation and update of every Plugin".into()));
        }
        let binding = binding.spec;
        if binding.policy_name != name {
            return Err(unprotected(format!("its binding names the policy {:?}", binding.policy_name)));
        }
        if !binding.validation_actions.iter().any(|a| a == "Deny") {
            return Err(unprotected("its binding does not deny (validationActions has no Deny)".into()));
        }
        if binding.match_resources.is_some() || binding.param_ref.is_some() {
            return Err(unprotected("its binding narrows it (matchResources or paramRef): the chart's applies to every Plugin".into()));
        }
        Ok(())
    }
}

impl Identities {
    /// Reads a cluster-scoped object as the host, within the request timeout; the problem when
    /// it cannot.
    async fn read_cluster_object<K>(&self, name: &str) -> Result<K, String>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let kind = K::kind(&());
        match tokio::time::timeout(self.timeout, Api::<K>::all(self.host.clone()).get(name)).await {
            Err(_) => Err(format!("no answer about the {kind} {name} within {:?}", self.timeout)),
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => Err(format!("there is no {kind} {name}")),
            Ok(Err(e)) => Err(format!("cannot read the {kind} {name}: {e}")),
            Ok(Ok(object)) => Ok(object),
        }
    }
}

/// Whether `rule` (as a rules review lists it) allows `check`: RBAC's matching — `*` for any
/// group, resource or verb, `*/SUB` for a subresource of any resource, no names for any name.
fn grants(rule: &ResourceRule, check: &Check) -> bool {
    // `RESOURCE` or `RESOURCE/SUB`, where a rule's RESOURCE may be `*` for a subresource.
    let names_resource = |r: &str| match &check.subresource {
        None => r == check.resource,
        Some(sub) => r.strip_suffix(sub.as_str()).and_then(|r| r.strip_suffix('/')).is_some_and(|r| r == check.resource || r == "*"),
    };
    let resource_matches = rule.resources.iter().flatten().any(|r| r == "*" || names_resource(r));
    let name_matches = match (&rule.resource_names, &check.name) {
        (None, _) => true,
        (Some(names), _) if names.is_empty() => true,
        (Some(names), Some(name)) => names.contains(name),
        (Some(_), None) => false,
    };
    let group_matches = rule.api_groups.iter().flatten().any(|g| g == "*" || *g == check.group);
    rule.verbs.iter().any(|v| v == "*" || v == check.verb.as_str()) && group_matches && resource_matches && name_matches
}

/// The single requests a rule stands for.
fn expand(expansion: &Expansion) -> Vec<Check> {
    let rule = &expansion.rule;
    let names: Vec<Option<String>> = if rule.names.is_empty() { vec![None] } else { rule.names.iter().cloned().map(Some).collect() };
    let mut checks = Vec::with_capacity(expansion.reviews());
    for verb in &rule.verbs {
        for namespace in &expansion.namespaces {
            for name in &names {
                checks.push(Check {
                    group: rule.resource.group.clone(),
                    resource: expansion.plural.clone(),
                    subresource: rule.subresource.clone(),
                    verb: *verb,
                    namespace: namespace.clone(),
                    name: name.clone(),
                });
            }
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    use crate::fake_api::{FakeApi, not_found};
    use crate::manifest::{Permission, RequestedLimits};

    const REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

    /// An API server that allows every access review and serves no kind (so a rule's scope is
    /// the built-in one).
    fn allowing() -> FakeApi {
        FakeApi::new(|method, path| match (method.as_str(), path) {
            ("POST", p) if p.starts_with(REVIEWS) => {
                (201, r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{},"status":{"allowed":true}}"#.into())
            }
            _ => (404, not_found()),
        })
    }

    fn identities(api: &FakeApi, mode: IdentityMode, served: &[&str], limits: AdmissionLimits) -> Identities {
        let discovery = Arc::new(Discovery::new(api.client.clone(), Duration::from_secs(5)));
        let served: Arc<[String]> = served.iter().map(|s| s.to_string()).collect();
        Identities::new(mode, "kubewasm".into(), api.client.clone(), discovery, served, Duration::from_secs(5), limits)
    }

    fn manifest(permissions: Vec<Permission>) -> Manifest {
        Manifest {
            name: "greedy".into(),
            version: "1.0.0".into(),
            primary: Gvk::new("", "v1", "ConfigMap"),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            resync: None,
            max_concurrency: 1,
            limits: RequestedLimits::default(),
            permissions,
            metadata_only: vec![],
            projections: vec![],
            composition: None,
            clusters: Default::default(),
            hooks: Default::default(),
        }
    }

    fn strings(prefix: &str, n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    /// What the audit's H1 `access` export declares: 1000 rules, each with every verb, 100
    /// namespaces and 100 names — 14 million reviews, which admission once built in one list.
    #[tokio::test]
    async fn the_audits_access_flood_is_refused_from_the_numbers_before_any_review() {
        let permissions = (0..1000)
            .map(|i| Permission {
                resource: Gvk::new("", "v1", "Secret"),
                subresource: None,
                verbs: Verb::ALL.into(),
                namespaces: strings(&format!("ns{i}"), 100),
                names: strings("name", 100),
            })
            .collect();
        let api = allowing();
        let started = std::time::Instant::now();
        let refused = identities(&api, IdentityMode::ServiceAccount, &[], AdmissionLimits::default()).admit(&manifest(permissions), false).await;
        let Err(AdmissionError::TooManyReviews { needs, max: 2000 }) = refused else { panic!("{refused:?}") };
        assert!(needs >= 1000 * 14 * 100 * 100, "{needs}");
        assert_eq!(api.count(&http::Method::POST, REVIEWS), 0, "no review may reach the API server");
        assert!(started.elapsed() < Duration::from_secs(2), "refused in {:?}", started.elapsed());
        assert!(refused.unwrap_err().to_string().contains("--max-admission-reviews=2000"));
    }

    /// A plugin's implied reads and its own grant on the same resource are one rule; grants in
    /// namespaces the host does not serve need no review (the host never acts there).
    #[tokio::test]
    async fn reviews_are_counted_once_per_verb_namespace_and_name_served() {
        let cm = Gvk::new("", "v1", "ConfigMap");
        let grant =
            Permission { resource: cm.clone(), subresource: None, verbs: [Verb::Get, Verb::Patch].into(), namespaces: BTreeSet::new(), names: BTreeSet::new() };
        let elsewhere = Permission {
            resource: Gvk::new("", "v1", "Secret"),
            subresource: None,
            verbs: [Verb::Get].into(),
            namespaces: ["a".to_string(), "unserved".to_string()].into(),
            names: ["s1".to_string(), "s2".to_string()].into(),
        };
        let api = allowing();
        identities(&api, IdentityMode::ServiceAccount, &["a", "b"], AdmissionLimits::default()).admit(&manifest(vec![grant, elsewhere]), false).await.unwrap();
        // ConfigMaps: get, list, watch, patch in a and b (8); Secrets: get s1, s2 in a (2);
        // ConfigMaps' finalizers: update in a and b (2, it writes); Events: create, patch in a
        // and b (4).
        assert_eq!(api.count(&http::Method::POST, REVIEWS), 16);
    }

    const RULES_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";

    /// An API server whose rules review lists `rules` (complete or not) in every namespace and
    /// that allows every access review.
    fn listing(rules: serde_json::Value, incomplete: bool) -> FakeApi {
        let answer = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {},
            "status": {"resourceRules": rules, "nonResourceRules": [], "incomplete": incomplete}
        })
        .to_string();
        FakeApi::new(move |method, path| match (method.as_str(), path) {
            ("POST", p) if p.starts_with(RULES_REVIEWS) => (201, answer.clone()),
            ("POST", p) if p.starts_with(REVIEWS) => {
                (201, r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{},"status":{"allowed":true}}"#.into())
            }
            _ => (404, not_found()),
        })
    }

    /// One rules review per namespace served spares the access reviews of what its rules show
    /// granted; an incomplete answer (an authorizer that cannot list its rules may deny what
    /// RBAC allows) spares none, and checks across all namespaces never ask for rules.
    #[tokio::test]
    async fn a_complete_rules_review_spares_the_access_reviews_it_shows_granted() {
        let grant = Permission {
            resource: Gvk::new("", "v1", "ConfigMap"),
            subresource: None,
            verbs: [Verb::Get, Verb::Patch].into(),
            namespaces: BTreeSet::new(),
            names: BTreeSet::new(),
        };
        // Everything the plugin needs but `patch` on ConfigMaps.
        let rules = serde_json::json!([
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]},
            {"verbs": ["update"], "apiGroups": [""], "resources": ["*/finalizers"]},
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["events"]},
            {"verbs": ["patch"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["only-this-one"]}
        ]);
        // ConfigMaps get, list, watch, patch, finalizers update, Events create, patch: 7 a namespace.
        for (incomplete, served, rules_reviews, reviews) in [(false, vec!["a", "b"], 2, 2), (true, vec!["a", "b"], 2, 14), (false, vec![], 0, 7)] {
            let api = listing(rules.clone(), incomplete);
            identities(&api, IdentityMode::ServiceAccount, &served, AdmissionLimits::default()).admit(&manifest(vec![grant.clone()]), false).await.unwrap();
            assert_eq!(api.count(&http::Method::POST, RULES_REVIEWS), rules_reviews, "incomplete: {incomplete}, served: {served:?}");
            assert_eq!(api.count(&http::Method::POST, REVIEWS), reviews, "incomplete: {incomplete}, served: {served:?}");
        }
    }

    #[test]
    fn rules_grant_as_rbac_matches_them() {
        let rule = |json: serde_json::Value| -> ResourceRule { serde_json::from_value(json).unwrap() };
        let check = |resource: &str, subresource: Option<&str>, verb: Verb, name: Option<&str>| Check {
            group: "apps".into(),
            resource: resource.into(),
            subresource: subresource.map(Into::into),
            verb,
            namespace: Some("a".into()),
            name: name.map(Into::into),
        };
        let deployments = rule(serde_json::json!({"verbs": ["get", "patch"], "apiGroups": ["apps"], "resources": ["deployments"]}));
        assert!(grants(&deployments, &check("deployments", None, Verb::Patch, None)));
        assert!(grants(&deployments, &check("deployments", None, Verb::Get, Some("web"))), "no names: every name");
        assert!(!grants(&deployments, &check("deployments", None, Verb::Delete, None)));
        assert!(!grants(&deployments, &check("deployments", Some("status"), Verb::Patch, None)), "a resource is not its subresources");
        assert!(!grants(&deployments, &check("statefulsets", None, Verb::Get, None)));
        let core = rule(serde_json::json!({"verbs": ["*"], "apiGroups": [""], "resources": ["*"]}));
        assert!(!grants(&core, &check("deployments", None, Verb::Get, None)), "another group");
        let status = rule(serde_json::json!({"verbs": ["update"], "apiGroups": ["*"], "resources": ["*/status"]}));
        assert!(grants(&status, &check("deployments", Some("status"), Verb::Update, None)));
        assert!(!grants(&status, &check("deployments", Some("scale"), Verb::Update, None)));
        assert!(!grants(&status, &check("deployments", None, Verb::Update, None)));
        let named = rule(serde_json::json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["web"]}));
        assert!(grants(&named, &check("deployments", Some("scale"), Verb::Get, Some("web"))));
        assert!(!grants(&named, &check("deployments", Some("scale"), Verb::Get, Some("db"))));
        assert!(!grants(&named, &check("deployments", Some("scale"), Verb::Get, None)), "a request without a name is not one of the names");
        let everything = rule(serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(grants(&everything, &check("deployments", Some("status"), Verb::Impersonate, Some("x"))));
    }

    /// Every admission's reviews wait for tokens of one bucket: two plugins admitted at once
    /// take as long as their reviews at the host's rate.
    #[tokio::test(start_paused = true)]
    async fn reviews_of_all_admissions_share_one_rate_limit() {
        let named = |n| Permission {
            resource: Gvk::new("", "v1", "Secret"),
            subresource: None,
            verbs: [Verb::Get].into(),
            namespaces: BTreeSet::new(),
            names: strings("s", n),
        };
        let api = allowing();
        let limits = AdmissionLimits { qps: 10.0, ..AdmissionLimits::default() };
        let ids = identities(&api, IdentityMode::ServiceAccount, &[], limits);
        let (a, b) = (manifest(vec![named(50)]), Manifest { name: "other".into(), ..manifest(vec![named(50)]) });
        let started = tokio::time::Instant::now();
        let (ra, rb) = tokio::join!(ids.admit(&a, false), ids.admit(&b, false));
        ra.unwrap();
        rb.unwrap();
        // 50 names + 3 reads of the primary + 2 for Events, each: 110, 20 at once, then 10 a second.
        let reviews = api.count(&http::Method::POST, REVIEWS);
        assert_eq!(reviews, 110);
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(9), "{reviews} reviews in {took:?}");
    }

    /// A grant limited to many namespaces is a watch in each: past the cap, refused whoever the
    /// plugin acts as, before any watch or review.
    #[tokio::test(start_paused = true)]
    async fn watches_past_the_cap_are_refused_in_either_mode() {
        let lists = |i| Permission {
            resource: Gvk::new("", "v1", "Secret"),
            subresource: None,
            verbs: [Verb::List, Verb::Watch].into(),
            namespaces: strings(&format!("ns{i}"), 100),
            names: BTreeSet::new(),
        };
        for mode in [IdentityMode::ServiceAccount, IdentityMode::Host] {
            let api = allowing();
            let refused = identities(&api, mode, &[], AdmissionLimits::default()).admit(&manifest((0..10).map(lists).collect()), false).await;
            assert!(matches!(refused, Err(AdmissionError::TooManyWatches { max: 500 })), "{refused:?}");
            assert_eq!(api.count(&http::Method::POST, REVIEWS), 0);
            let fits = identities(&api, mode, &[], AdmissionLimits::default()).admit(&manifest((0..4).map(lists).collect()), false).await;
            assert!(fits.is_ok(), "{fits:?}");
        }
        // Owned kinds and the primary are watched in every namespace served.
        let api = allowing();
        let served: Vec<String> = (0..300).map(|i| format!("team-{i}")).collect();
        let served: Vec<&str> = served.iter().map(String::as_str).collect();
        let mut owner = manifest(vec![]);
        owner.owns.push(Gvk::new("apps", "v1", "Deployment"));
        let refused = identities(&api, IdentityMode::Host, &served, AdmissionLimits::default()).admit(&owner, false).await;
        assert!(matches!(refused, Err(AdmissionError::TooManyWatches { .. })), "{refused:?}");
    }

    /// The chart's policy and binding, as the API server returns them, the policy's spec
    /// changed by `edit`.
    fn policy_answer(
        expression: &str,
        failure: &str,
        actions: &str,
        edit: fn(&mut serde_json::Value),
    ) -> impl Fn(&http::Method, &str) -> (u16, String) + Send + Sync + 'static {
        let mut policy = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "kubewasm-plugin-identity"},
            "spec": {
                "failurePolicy": failure,
                "matchConstraints": {"resourceRules": [{"apiGroups": ["kubewasm.io"], "apiVersions": ["*"], "resources": ["plugins"], "operations": ["CREATE", "UPDATE"]}]},
                "matchConditions": [{"name": "creates-or-changes-the-spec", "expression": POLICY_MATCH_CONDITION}],
                "validations": [{"expression": expression}]
            }
        });
        edit(&mut policy["spec"]);
        let policy = policy.to_string();
        let binding = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "kubewasm-plugin-identity"},
            "spec": {"policyName": "kubewasm-plugin-identity", "validationActions": [actions]}
        })
        .to_string();
        move |method, path| match (method.as_str(), path) {
            ("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/kubewasm-plugin-identity") => (200, policy.clone()),
            ("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/kubewasm-plugin-identity") => (200, binding.clone()),
            ("POST", p) if p.starts_with(REVIEWS) => {
                (201, r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{},"status":{"allowed":true}}"#.into())
            }
            _ => (404, not_found()),
        }
    }

    /// Admits a plugin with Plugin resources served (the identity policy checked) against `api`.
    async fn admit_with_policy(api: FakeApi) -> Result<(), String> {
        identities(&api, IdentityMode::ServiceAccount, &[], AdmissionLimits::default())
            .with_policy("kubewasm-plugin-identity".into())
            .admit(&manifest(vec![]), false)
            .await
            .map_err(|e| e.to_string())
    }

    /// With Plugin resources served, no plugin is admitted unless the identity policy is in
    /// force as the chart installs it: present, failing closed, checking `use`, denying.
    #[tokio::test]
    async fn no_plugin_is_admitted_without_the_identity_policy_in_force() {
        let missing = admit_with_policy(FakeApi::serving_nothing()).await.unwrap_err();
        assert!(
            missing.contains("there is no ValidatingAdmissionPolicy kubewasm-plugin-identity") && missing.contains("--plugin-identity-policy="),
            "{missing}"
        );
        assert_eq!(admit_with_policy(FakeApi::new(policy_answer(POLICY_EXPRESSION, "Fail", "Deny", |_| {}))).await, Ok(()));
        for (answer, problem) in [
            (policy_answer("true", "Fail", "Deny", |_| {}), "does not check"),
            (policy_answer(POLICY_EXPRESSION, "Ignore", "Deny", |_| {}), "failurePolicy"),
            (policy_answer(POLICY_EXPRESSION, "Fail", "Audit", |_| {}), "does not deny"),
        ] {
            let refused = admit_with_policy(FakeApi::new(answer)).await.unwrap_err();
            assert!(refused.contains(problem), "{refused}");
        }
    }

    /// A policy as the chart's, but narrowed so that some Plugins are never checked (by a match
    /// condition, an object selector, excluded resources or names), is not in force: a Plugin
    /// author could otherwise take any identity by labelling, or naming, their Plugin to fit.
    #[tokio::test]
    async fn a_narrowed_identity_policy_is_not_in_force() {
        type Narrowing = (&'static str, fn(&mut serde_json::Value));
        let narrowings: [Narrowing; 6] = [
            ("match condition \"unlabelled\"", |spec| spec["matchConditions"] = json!([{"name": "unlabelled", "expression": "!has(object.metadata.labels)"}])),
            ("match condition \"also\"", |spec| spec["matchConditions"].as_array_mut().unwrap().push(json!({"name": "also", "expression": "true"}))),
            ("objectSelector", |spec| spec["matchConstraints"]["objectSelector"] = json!({"matchLabels": {"checked": "yes"}})),
            ("objectSelector", |spec| spec["matchConstraints"]["objectSelector"] = json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]})),
            ("excludeResourceRules", |spec| {
                spec["matchConstraints"]["excludeResourceRules"] = json!([{"apiGroups": ["kubewasm.io"], "apiVersions": ["*"], "resources": ["plugins"], "operations": ["CREATE"], "resourceNames": ["admin"]}])
            }),
            ("every Plugin", |spec| spec["matchConstraints"]["resourceRules"][0]["resourceNames"] = json!(["only-this-one"])),
        ];
        for (problem, edit) in narrowings {
            let refused = admit_with_policy(FakeApi::new(policy_answer(POLICY_EXPRESSION, "Fail", "Deny", edit))).await.unwrap_err();
            assert!(refused.contains(problem), "{problem}: {refused}");
        }
        // Empty selectors and lists narrow nothing.
        let empty = policy_answer(POLICY_EXPRESSION, "Fail", "Deny", |spec| {
            spec["matchConstraints"]["objectSelector"] = json!({});
            spec["matchConstraints"]["excludeResourceRules"] = json!([]);
        });
        assert_eq!(admit_with_policy(FakeApi::new(empty)).await, Ok(()));
    }
}
