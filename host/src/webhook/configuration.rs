//! The objects that point the API server at this host's hooks: for each plugin serving admission
//! hooks, a ValidatingWebhookConfiguration and a MutatingWebhookConfiguration `HOST-PLUGIN`
//! (labelled with the host that wrote them), and for each custom resource a plugin converts, its
//! CRD's `spec.conversion`. The leader writes them (server-side apply, field manager
//! [`FIELD_MANAGER`]) and keeps them in step with the plugins served: when a plugin goes, its
//! configurations go at once and its CRDs' conversion falls back to `None`, so that a `Fail`
//! policy never blocks the cluster on a plugin that is gone. [`render`] is also what
//! `kubewasm webhooks` prints for a GitOps user.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::discovery::{Discovery, DiscoveryError};
use crate::hooks::{AdmissionHook, Hooks};
use crate::leader::Leadership;
use crate::resource::{Gvk, Scope};

use super::Hooked;

pub const FIELD_MANAGER: &str = "kubewasm-webhooks";
/// Labels the configurations and CRDs a host wrote carry: which host, which plugin.
pub const HOST_LABEL: &str = "kubewasm.io/webhooks-host";
pub const PLUGIN_LABEL: &str = "kubewasm.io/plugin";
/// How often everything is written again though nothing changed (someone may have edited it).
const RESYNC: Duration = Duration::from_secs(60);
/// How long a failed write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);
/// How often the plugins' hooks are compared with what was written (a hot reload may change
/// them without the set of plugins changing).
const LOOK: Duration = Duration::from_secs(2);

/// How the API server reaches this host's hooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL (`https://host:port`): the paths are appended.
    Url(String),
    /// A Service in front of the replicas.
    Service { namespace: String, name: String, port: u16 },
}

impl Endpoint {
    /// A base URL as a flag gives it: `https://HOST[:PORT][/PATH]` (the API server calls hooks
    /// over HTTPS only).
    pub fn url(text: &str) -> Result<Endpoint, EndpointError> {
        let host = text.strip_prefix("https://").map(|rest| rest.split(['/', ':']).next().unwrap_or_default());
        match host {
            Some(host) if !host.is_empty() => Ok(Endpoint::Url(text.to_owned())),
            _ => Err(EndpointError::Url(text.to_owned())),
        }
    }

    /// A Service as a flag gives it: `NAMESPACE/NAME[:PORT]`, port 443 unless given.
    pub fn service(text: &str) -> Result<Endpoint, EndpointError> {
        let problem = || EndpointError::Service(text.to_owned());
        let (namespace, rest) = text.split_once('/').ok_or_else(problem)?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (name, port.parse().map_err(|_| problem())?),
            None => (rest, 443),
        };
        if !crate::resource::is_dns_label(namespace) || !crate::resource::is_dns_label(name) || port == 0 {
            return Err(problem());
        }
        Ok(Endpoint::Service { namespace: namespace.into(), name: name.into(), port })
    }

    /// What a serving certificate must be for: the URL's host, or the Service's DNS names.
    pub fn dns_names(&self) -> Vec<String> {
        match self {
            Endpoint::Url(url) => {
                let rest = url.strip_prefix("https://").unwrap_or(url);
                let host = match rest.strip_prefix('[') {
                    Some(bracketed) => bracketed.split(']').next(),
                    None => rest.split(['/', ':']).next(),
                };
                host.into_iter().map(str::to_owned).collect()
            }
            Endpoint::Service { namespace, name, .. } => vec![format!("{name}.{namespace}.svc"), format!("{name}.{namespace}.svc.cluster.local")],
        }
    }

    /// The `clientConfig` of a hook at `path`.
    fn client_config(&self, path: &str, ca: Option<&[u8]>) -> Value {
        let mut config = match self {
            Endpoint::Url(base) => json!({ "url": format!("{}{path}", base.trim_end_matches('/')) }),
            Endpoint::Service { namespace, name, port } => json!({ "service": { "namespace": namespace, "name": name, "port": port, "path": path } }),
        };
        if let Some(ca) = ca {
            config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
        }
        config
    }
}

/// An endpoint as a flag gives it, not understood. (Apart from [`ConfigurationError`]: a
/// flag's error stays small.)
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("{0:?} is not a URL the API server calls hooks at: write https://HOST[:PORT]")]
    Url(String),
    #[error("{0:?} is not a Service: write NAMESPACE/NAME[:PORT], e.g. kubewasm/kubewasm-webhooks:443")]
    Service(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigurationError {
    #[error("resolving {kind} for hook {hook:?} of plugin {plugin:?}: {source}")]
    Resolve {
        plugin: String,
        hook: String,
        kind: Gvk,
        #[source]
        source: DiscoveryError,
    },
    #[error("plugin {plugin:?} converts {kind}.{group}, but no CRD defines it")]
    NoCrd { plugin: String, group: String, kind: String },
    #[error("writing {what}: {source}")]
    Write {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// What one plugin's hooks come to.
#[derive(Debug, Default, PartialEq)]
pub struct Rendered {
    pub validating: Option<Value>,
    pub mutating: Option<Value>,
}

/// A hook's kind as the API server serves it.
#[derive(Debug, Clone)]
pub struct Served {
    pub plural: String,
    pub scope: Scope,
}

/// The webhook configurations of `plugin`'s admission hooks, written by `host`: each hook one
/// webhook `HOOK.PLUGIN.kubewasm.io`, its kinds resolved in `resources`; only namespaces in
/// `namespaces` (all when empty).
pub fn render(
    host: &str,
    plugin: &str,
    hooks: &Hooks,
    resources: &BTreeMap<Gvk, Served>,
    endpoint: &Endpoint,
    ca: Option<&[u8]>,
    namespaces: &[String],
) -> Rendered {
    let webhook = |hook: &AdmissionHook| {
        let verb = if hook.mutating { "mutate" } else { "validate" };
        let rules: Vec<Value> = hook
            .kinds
            .iter()
            .map(|kind| {
                let served = &resources[kind];
                json!({
                    "apiGroups": [kind.group],
                    "apiVersions": [kind.version],
                    "resources": [served.plural],
                    "operations": hook.operations.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
                    "scope": if served.scope == Scope::Namespaced { "Namespaced" } else { "Cluster" },
                })
            })
            .collect();
        let mut webhook = json!({
            "name": format!("{}.{plugin}.kubewasm.io", hook.name),
            "clientConfig": endpoint.client_config(&format!("/{verb}/{plugin}/{}", hook.name), ca),
            "rules": rules,
            "failurePolicy": hook.failure_policy.as_str(),
            "sideEffects": hook.side_effects.as_str(),
            "timeoutSeconds": hook.timeout.as_secs(),
            "admissionReviewVersions": ["v1"],
            "matchPolicy": "Equivalent",
            "matchConditions": hook.match_conditions.iter().map(|c| json!({ "name": c.name, "expression": c.expression })).collect::<Vec<_>>(),
        });
        if !namespaces.is_empty() {
            webhook["namespaceSelector"] = json!({ "matchExpressions": [{ "key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces }] });
        }
        if hook.mutating {
            webhook["reinvocationPolicy"] = json!("IfNeeded");
        }
        webhook
    };
    let configuration = |kind: &str, mutating: bool| {
        let webhooks: Vec<Value> = hooks.admission.iter().filter(|h| h.mutating == mutating).map(webhook).collect();
        (!webhooks.is_empty()).then(|| {
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": { "name": name(host, plugin), "labels": labels(host, plugin) },
                "webhooks": webhooks,
            })
        })
    };
    Rendered { validating: configuration("ValidatingWebhookConfiguration", false), mutating: configuration("MutatingWebhookConfiguration", true) }
}

/// The conversion stanza of CRD `crd` for `plugin`.
pub fn conversion(host: &str, plugin: &str, crd: &str, endpoint: &Endpoint, ca: Option<&[u8]>) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": crd, "labels": labels(host, plugin) },
        "spec": { "conversion": {
            "strategy": "Webhook",
            "webhook": { "clientConfig": endpoint.client_config(&format!("/convert/{plugin}"), ca), "conversionReviewVersions": ["v1"] },
        } },
    })
}

fn name(host: &str, plugin: &str) -> String {
    format!("{host}-{plugin}")
}

fn labels(host: &str, plugin: &str) -> Value {
    json!({ HOST_LABEL: host, PLUGIN_LABEL: plugin, "app.kubernetes.io/managed-by": "kubewasm" })
}

/// Keeps the cluster's configurations in step with the hooks served, while this host leads.
pub struct Writer {
    pub api: Client,
    pub discovery: Arc<Discovery>,
    pub hooked: Hooked,
    /// This host's name: the configurations' prefix and [`HOST_LABEL`].
    pub host: String,
    pub endpoint: Endpoint,
    pub ca: watch::Receiver<Option<Arc<[u8]>>>,
    /// Namespaces served; empty for all.
    pub namespaces: Vec<String>,
}

impl Writer {
    pub async fn run(mut self, mut leadership: Leadership, shutdown: CancellationToken) {
        let mut changes = self.hooked.changes();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                leading = leadership.wait_until_leading() => if !leading { return },
            }
            let written = self.hooked.declared();
            let next = tokio::time::Instant::now()
                + match self.write(&written).await {
                    Ok(()) => RESYNC,
                    Err(e) => {
                        tracing::warn!("writing the webhook configurations: {e}");
                        RETRY
                    }
                };
            // Until the next write is due: now if the plugins served or the CA change, or a
            // plugin's serving version declares other hooks.
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = changes.changed() => break,
                    _ = self.ca.changed() => break,
                    _ = tokio::time::sleep_until(next.min(tokio::time::Instant::now() + LOOK)) => {}
                }
                if tokio::time::Instant::now() >= next || self.hooked.declared() != written {
                    break;
                }
            }
        }
    }

    /// Writes the configurations and conversions of every plugin `declared`; removes those of
    /// plugins gone.
    pub async fn write(&self, declared: &BTreeMap<String, Hooks>) -> Result<(), ConfigurationError> {
        let ca = self.ca.borrow().clone();
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.api.clone());
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.api.clone());
        // Every plugin is written even when one fails; the first failure is returned.
        let mut errors = Vec::new();
        let mut keep = (BTreeSet::new(), BTreeSet::new());
        for (plugin, hooks) in declared {
            match self.resolve(plugin, hooks).await {
                Ok(resources) => {
                    let rendered = render(&self.host, plugin, hooks, &resources, &self.endpoint, ca.as_deref(), &self.namespaces);
                    if let Some(object) = rendered.validating {
                        keep.0.insert(name(&self.host, plugin));
                        errors.extend(put(&validating, &name(&self.host, plugin), object, &apply).await.err());
                    }
                    if let Some(object) = rendered.mutating {
                        keep.1.insert(name(&self.host, plugin));
                        errors.extend(put(&mutating, &name(&self.host, plugin), object, &apply).await.err());
                    }
                }
                // Keep what it had: a kind not served yet may be in a moment.
                Err(e) => {
                    keep.0.insert(name(&self.host, plugin));
                    keep.1.insert(name(&self.host, plugin));
                    errors.push(e);
                }
            }
        }
        let mine = ListParams::default().labels(&format!("{HOST_LABEL}={}", self.host));
        for (api, keep) in [(&validating as &dyn Prune, &keep.0), (&mutating, &keep.1)] {
            errors.extend(api.prune(&mine, keep).await.err());
        }
        errors.extend(self.convert(declared, ca.as_deref(), &apply).await.err());
        errors.into_iter().next().map_or(Ok(()), Err)
    }

    async fn resolve(&self, plugin: &str, hooks: &Hooks) -> Result<BTreeMap<Gvk, Served>, ConfigurationError> {
        let mut resources = BTreeMap::new();
        for hook in &hooks.admission {
            for kind in &hook.kinds {
                let resolved = self.discovery.resolve(kind).await.map_err(|source| ConfigurationError::Resolve {
                    plugin: plugin.to_owned(),
                    hook: hook.name.clone(),
                    kind: kind.clone(),
                    source,
                })?;
                resources.insert(kind.clone(), Served { plural: resolved.api.plural, scope: resolved.scope });
            }
        }
        Ok(resources)
    }

    /// Points the CRDs of every conversion declared at its plugin; those this host pointed at a
    /// plugin that no longer converts them go back to `None`.
    async fn convert(&self, declared: &BTreeMap<String, Hooks>, ca: Option<&[u8]>, apply: &PatchParams) -> Result<(), ConfigurationError> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.api.clone());
        let wanted: Vec<(&String, &Gvk)> = declared.iter().flat_map(|(plugin, hooks)| hooks.conversion.iter().map(move |g| (plugin, g))).collect();
        let list = |params: ListParams| {
            let crds = crds.clone();
            async move { crds.list(&params).await.map_err(|source| ConfigurationError::Write { what: "CustomResourceDefinitions (listing)".into(), source }) }
        };
        let mut pointed = BTreeSet::new();
        if !wanted.is_empty() {
            let all = list(ListParams::default()).await?;
            for (plugin, gvk) in wanted {
                let crd = all.items.iter().find(|c| c.spec.group == gvk.group && c.spec.names.kind == gvk.kind).ok_or_else(|| ConfigurationError::NoCrd {
                    plugin: plugin.clone(),
                    group: gvk.group.clone(),
                    kind: gvk.kind.clone(),
                })?;
                let name = crd.meta().name.clone().unwrap_or_default();
                put(&crds, &name, conversion(&self.host, plugin, &name, &self.endpoint, ca), apply).await?;
                pointed.insert(name);
            }
        }
        for crd in list(ListParams::default().labels(&format!("{HOST_LABEL}={}", self.host))).await?.items {
            let name = crd.meta().name.clone().unwrap_or_default();
            if !pointed.contains(&name) {
                // Applying without the labels and the webhook gives up this manager's fields.
                let none = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": { "name": name }, "spec": { "conversion": { "strategy": "None" } } });
                put(&crds, &name, none, apply).await?;
                tracing::info!(crd = name, "conversion webhook removed: no plugin converts it any more");
            }
        }
        Ok(())
    }
}

async fn put<K>(api: &Api<K>, name: &str, object: Value, apply: &PatchParams) -> Result<(), ConfigurationError>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, apply, &Patch::Apply(object))
        .await
        .map(drop)
        .map_err(|source| ConfigurationError::Write { what: format!("{}/{name}", K::kind(&())), source })
}

/// Deletes the configurations a host wrote that it no longer wants.
#[async_trait::async_trait]
trait Prune: Send + Sync {
    async fn prune(&self, mine: &ListParams, keep: &BTreeSet<String>) -> Result<(), ConfigurationError>;
}

#[async_trait::async_trait]
impl<K> Prune for Api<K>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    async fn prune(&self, mine: &ListParams, keep: &BTreeSet<String>) -> Result<(), ConfigurationError> {
        let failed = |source| ConfigurationError::Write { what: format!("{} (pruning)", K::kind(&())), source };
        for object in self.list_metadata(mine).await.map_err(failed)?.items {
            let name = object.metadata.name.unwrap_or_default();
            if !keep.contains(&name) {
                match self.delete(&name, &DeleteParams::default()).await {
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Ok(_) => tracing::info!(name, "webhook configuration removed"),
                    Err(source) => return Err(failed(source)),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::{FailurePolicy, MatchCondition, Operation, SideEffects};

    fn cronjob() -> Gvk {
        Gvk::new("batch.tutorial.kubebuilder.io", "v1", "CronJob")
    }

    fn hook(name: &str, mutating: bool) -> AdmissionHook {
        AdmissionHook {
            name: name.into(),
            mutating,
            kinds: vec![cronjob()],
            operations: vec![Operation::Create, Operation::Update],
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            side_effects: SideEffects::None,
            match_conditions: vec![MatchCondition { name: "not-system".into(), expression: "true".into() }],
        }
    }

    #[test]
    fn each_hook_is_a_webhook_pointing_at_its_path() {
        let hooks = Hooks { admission: vec![hook("validate", false), hook("default", true)], conversion: vec![] };
        let resources = BTreeMap::from([(cronjob(), Served { plural: "cronjobs".into(), scope: Scope::Namespaced })]);
        let rendered = render("kubewasm", "cron", &hooks, &resources, &Endpoint::Url("https://127.0.0.1:9443/".into()), Some(b"CA"), &["team-a".into()]);
        let validating = rendered.validating.unwrap();
        assert_eq!(validating["metadata"]["name"], json!("kubewasm-cron"));
        assert_eq!(validating["metadata"]["labels"][HOST_LABEL], json!("kubewasm"));
        let webhook = &validating["webhooks"][0];
        assert_eq!(webhook["name"], json!("validate.cron.kubewasm.io"));
        assert_eq!(webhook["clientConfig"], json!({ "url": "https://127.0.0.1:9443/validate/cron/validate", "caBundle": "Q0E=" }));
        assert_eq!(
            webhook["rules"],
            json!([{ "apiGroups": ["batch.tutorial.kubebuilder.io"], "apiVersions": ["v1"], "resources": ["cronjobs"], "operations": ["CREATE", "UPDATE"], "scope": "Namespaced" }])
        );
        assert_eq!(
            (webhook["failurePolicy"].as_str(), webhook["sideEffects"].as_str(), webhook["timeoutSeconds"].as_u64()),
            (Some("Fail"), Some("None"), Some(10))
        );
        assert_eq!(webhook["namespaceSelector"]["matchExpressions"][0]["values"], json!(["team-a"]));
        assert_eq!(webhook["matchConditions"], json!([{ "name": "not-system", "expression": "true" }]));
        let mutating = rendered.mutating.unwrap();
        assert_eq!(mutating["webhooks"][0]["clientConfig"]["url"], json!("https://127.0.0.1:9443/mutate/cron/default"));
        assert_eq!(mutating["webhooks"].as_array().unwrap().len(), 1);

        let only_validating = Hooks { admission: vec![hook("validate", false)], conversion: vec![] };
        let service = Endpoint::Service { namespace: "kubewasm".into(), name: "kubewasm-webhooks".into(), port: 443 };
        let rendered = render("kubewasm", "cron", &only_validating, &resources, &service, None, &[]);
        assert_eq!(rendered.mutating, None);
        let webhook = &rendered.validating.unwrap()["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"],
            json!({ "service": { "namespace": "kubewasm", "name": "kubewasm-webhooks", "port": 443, "path": "/validate/cron/validate" } })
        );
        assert_eq!(webhook.get("namespaceSelector"), None);
    }

    #[test]
    fn endpoints_as_flags_give_them() {
        assert_eq!(Endpoint::url("https://10.0.0.1:9443").unwrap(), Endpoint::Url("https://10.0.0.1:9443".into()));
        assert_eq!(
            Endpoint::service("kubewasm/kubewasm-webhooks").unwrap(),
            Endpoint::Service { namespace: "kubewasm".into(), name: "kubewasm-webhooks".into(), port: 443 }
        );
        assert_eq!(Endpoint::service("ns/svc:8443").unwrap(), Endpoint::Service { namespace: "ns".into(), name: "svc".into(), port: 8443 });
        // What the host's own certificate is made for.
        assert_eq!(Endpoint::url("https://10.0.0.1:9443/x").unwrap().dns_names(), ["10.0.0.1"]);
        assert_eq!(Endpoint::url("https://[::1]:9443").unwrap().dns_names(), ["::1"]);
        assert_eq!(Endpoint::service("ns/svc").unwrap().dns_names(), ["svc.ns.svc", "svc.ns.svc.cluster.local"]);
        for bad in ["http://h:1", "https://", "https://:9443"] {
            assert!(matches!(Endpoint::url(bad), Err(EndpointError::Url(_))), "{bad}");
        }
        for bad in ["svc", "ns/", "/svc", "ns/svc:http", "ns/svc:0", "Ns/svc"] {
            assert!(matches!(Endpoint::service(bad), Err(EndpointError::Service(_))), "{bad}");
        }
    }

    #[test]
    fn a_conversion_points_the_crd_at_its_plugin() {
        let crd = conversion("kubewasm", "cron", "cronjobs.batch.tutorial.kubebuilder.io", &Endpoint::Url("https://h:1".into()), None);
        assert_eq!(crd["spec"]["conversion"]["strategy"], json!("Webhook"));
        assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"], json!("https://h:1/convert/cron"));
        assert_eq!(crd["metadata"]["labels"][PLUGIN_LABEL], json!("cron"));
    }
}
