//! `kubewasm rbac`: the RBAC objects that grant exactly what the plugins declare and the host
//! does for them. With per-plugin identities, each plugin gets its own ServiceAccount
//! (`kubewasm-plugin-<name>`), a ClusterRole for its cluster-wide rules and a Role in each
//! namespace its namespace-limited rules name (never a ClusterRole for those), with bindings;
//! the host keeps only what it needs itself — list and watch of what plugins read, its Lease,
//! its status ConfigMap, its own Events, and `impersonate` on exactly the plugins'
//! ServiceAccounts. With `--plugin-identity=host`, the host gets everything. When plugins declare
//! admission or conversion hooks, the host also gets what serving them takes: writing their
//! webhook configurations and CRD conversion stanzas, and keeping its own certificate's Secret.
//!
//! Plural names follow kube's pluralization of the kind (the API's own for every built-in
//! kind), and built-in cluster-scoped kinds are known; no cluster is needed.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::identity::service_account;
use crate::manifest::{Manifest, Rule, Verb};
use crate::resource::{Gvk, Scope, builtin_scope, crd_name, plural};

/// Who the host's rules are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grantee {
    ServiceAccount { namespace: String, name: String },
    User(String),
}

/// What the host needs besides its plugins, and how it runs them.
#[derive(Debug, Clone, Default)]
pub struct HostNeeds {
    /// The leader election Lease (namespace, name), if leader election is on.
    pub lease: Option<(String, String)>,
    /// The status ConfigMap (namespace, name) listing the running plugins.
    pub status: Option<(String, String)>,
    /// The namespace of the plugins' ServiceAccounts; `None` when plugins act as the host.
    pub identity_namespace: Option<String>,
    /// Namespaces served (`--namespace`); empty for all.
    pub namespaces: Vec<String>,
    /// Whether the host runs in a shard ring: a sharded plugin's identity must then itself be
    /// allowed to `patch` what the host labels for it (`Manifest::sharding_rules`).
    pub sharded: bool,
    /// How the host serves plugins' hooks (`kubewasm run --webhook-*`), if it does; granted only
    /// when some plugin declares hooks.
    pub webhooks: Option<WebhookNeeds>,
}

/// What serving plugins' hooks takes of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookNeeds {
    /// The leader writes the webhook configurations and CRD conversion stanzas (`--webhook-url`
    /// or `--webhook-service`); otherwise they are the user's (`kubewasm webhooks`).
    pub writes: bool,
    /// The Secret (namespace, name) the host keeps its own CA and certificate in; `None` when
    /// the certificate is mounted (`--webhook-cert-dir`).
    pub cert_secret: Option<(String, String)>,
}

/// Verbs by (API group, resource), then by the resource names they are limited to.
type ByResource = BTreeMap<(String, String), BTreeMap<Vec<String>, BTreeSet<&'static str>>>;

/// Rules by scope (`None`: cluster-wide), then by (API group, resource names), each with its
/// resources and verbs.
#[derive(Default)]
struct Grants(BTreeMap<Option<String>, ByResource>);

impl Grants {
    /// Grants `verbs` on `resource` (plural, maybe with a subresource) of `group` in `namespace`,
    /// limited to `names` (empty for all).
    fn add(&mut self, namespace: Option<&str>, group: &str, resource: String, names: Vec<String>, verbs: impl IntoIterator<Item = &'static str>) {
        self.0.entry(namespace.map(Into::into)).or_default().entry((group.to_string(), resource)).or_default().entry(names).or_default().extend(verbs);
    }

    /// Adds a manifest rule in every namespace it covers.
    fn add_rule(&mut self, rule: &Rule, served: &[String], verbs: impl Iterator<Item = Verb> + Clone) {
        let resource = match &rule.subresource {
            Some(sub) => format!("{}/{sub}", plural(&rule.resource)),
            None => plural(&rule.resource),
        };
        let names: Vec<String> = rule.names.iter().cloned().collect();
        for namespace in scopes(&rule.resource, rule.namespaces.as_ref(), served) {
            self.add(namespace.as_deref(), &rule.resource.group, resource.clone(), names.clone(), verbs.clone().map(Verb::as_str));
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Where a rule on `resource` applies: cluster-wide for cluster-scoped kinds and for "every
/// namespace" when the host serves them all; else each namespace.
fn scopes(resource: &Gvk, namespaces: Option<&BTreeSet<String>>, served: &[String]) -> Vec<Option<String>> {
    match (builtin_scope(resource), namespaces) {
        (Scope::Cluster, _) => vec![None],
        (Scope::Namespaced, Some(set)) => set.iter().cloned().map(Some).collect(),
        (Scope::Namespaced, None) if served.is_empty() => vec![None],
        (Scope::Namespaced, None) => served.iter().cloned().map(Some).collect(),
    }
}

/// Everything a plugin's own identity needs.
fn plugin_grants(manifest: &Manifest, served: &[String], sharded: bool) -> Grants {
    let mut grants = Grants::default();
    let sharding = if sharded { manifest.sharding_rules() } else { Vec::new() };
    for rule in manifest.rules().into_iter().chain(sharding) {
        grants.add_rule(&rule, served, rule.verbs.iter().copied());
    }
    grants
}

/// Everything the host's identity needs.
fn host_grants(manifests: &[Manifest], host: &HostNeeds) -> Grants {
    let mut grants = Grants::default();
    for m in manifests {
        if host.identity_namespace.is_none() {
            // Plugins act as the host: it needs all they need.
            for rule in m.rules() {
                grants.add_rule(&rule, &host.namespaces, rule.verbs.iter().copied());
            }
            continue;
        }
        // The shared watches: what plugins read from the cache.
        for resource in m.cached_resources() {
            let namespaces = m.cached_namespaces(resource).map(|set| set.into_iter().map(String::from).collect());
            let rule = Rule { resource: resource.clone(), subresource: None, verbs: Verb::READ.into(), namespaces, names: BTreeSet::new(), why: "" };
            grants.add_rule(&rule, &host.namespaces, Verb::READ.into_iter());
        }
    }
    if let Some((ns, name)) = &host.lease {
        grants.add(Some(ns), "coordination.k8s.io", "leases".into(), Vec::new(), ["create"]);
        grants.add(Some(ns), "coordination.k8s.io", "leases".into(), vec![name.clone()], ["get", "update"]);
    }
    if let Some((ns, name)) = &host.status {
        // Server-side apply: create the first time, patch after; Events about it.
        grants.add(Some(ns), "", "configmaps".into(), Vec::new(), ["create"]);
        grants.add(Some(ns), "", "configmaps".into(), vec![name.clone()], ["get", "patch"]);
        grants.add(Some(ns), "events.k8s.io", "events".into(), Vec::new(), ["create", "patch"]);
    }
    if let Some(ns) = &host.identity_namespace
        && !manifests.is_empty()
    {
        let accounts = manifests.iter().map(|m| service_account(&m.name)).collect();
        grants.add(Some(ns), "", "serviceaccounts".into(), accounts, ["impersonate"]);
    }
    if let Some(webhooks) = &host.webhooks
        && manifests.iter().any(|m| !m.hooks.is_empty())
    {
        add_webhook_grants(&mut grants, manifests, webhooks);
    }
    grants
}

/// What the webhook configurations' writer (`webhook::configuration::Writer`) and the host's own
/// certificate (`webhook::certs`) need.
fn add_webhook_grants(grants: &mut Grants, manifests: &[Manifest], webhooks: &WebhookNeeds) {
    if webhooks.writes {
        // Named HOST-PLUGIN for whatever plugins come and go: not limited to names.
        for resource in ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"] {
            grants.add(None, "admissionregistration.k8s.io", resource.into(), Vec::new(), ["get", "list", "create", "patch", "delete"]);
        }
        // Each round the writer lists the CRDs it pointed at a plugin, to put back those no
        // plugin converts any more: a `list` even when none converts now.
        grants.add(None, "apiextensions.k8s.io", "customresourcedefinitions".into(), Vec::new(), ["list"]);
        let converted: BTreeSet<String> = manifests.iter().flat_map(|m| m.hooks.conversion.iter().map(crd_name)).collect();
        if !converted.is_empty() {
            // Pointing a CRD elsewhere intercepts every object of it: only the CRDs converted.
            grants.add(None, "apiextensions.k8s.io", "customresourcedefinitions".into(), converted.into_iter().collect(), ["patch"]);
        }
    }
    if let Some((ns, name)) = &webhooks.cert_secret {
        // RBAC cannot limit `create` to a name: the object has none when it is authorized.
        grants.add(Some(ns), "", "secrets".into(), Vec::new(), ["create"]);
        grants.add(Some(ns), "", "secrets".into(), vec![name.clone()], ["get", "update"]);
    }
}

fn rules(by_resource: &ByResource) -> Vec<PolicyRule> {
    // Resources with the same verbs, group and names share one rule, as people write them.
    type Shape<'a> = (String, Vec<String>, Vec<&'a str>);
    let mut merged: BTreeMap<Shape, Vec<String>> = BTreeMap::new();
    for ((group, resource), by_names) in by_resource {
        for (names, verbs) in by_names {
            merged.entry((group.clone(), names.clone(), verbs.iter().copied().collect())).or_default().push(resource.clone());
        }
    }
    merged
        .into_iter()
        .map(|((group, names, verbs), resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources),
            resource_names: (!names.is_empty()).then_some(names),
            verbs: verbs.into_iter().map(Into::into).collect(),
            ..Default::default()
        })
        .collect()
}

fn subject(grantee: &Grantee) -> Subject {
    match grantee {
        Grantee::ServiceAccount { namespace, name } => {
            Subject { kind: "ServiceAccount".into(), name: name.clone(), namespace: Some(namespace.clone()), ..Default::default() }
        }
        Grantee::User(name) => Subject { kind: "User".into(), name: name.clone(), api_group: Some("rbac.authorization.k8s.io".into()), ..Default::default() },
    }
}

/// Roles and bindings named `name` that grant `grants` to `grantee`, as YAML documents.
fn documents(grants: &Grants, grantee: &Grantee, name: &str, labels: &BTreeMap<String, String>) -> Vec<String> {
    let meta =
        |namespace: Option<&String>| ObjectMeta { name: Some(name.into()), namespace: namespace.cloned(), labels: Some(labels.clone()), ..Default::default() };
    let role_ref = |kind: &str| RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: kind.into(), name: name.into() };
    let mut documents = Vec::new();
    for (namespace, by_resource) in &grants.0 {
        match namespace {
            None => {
                documents.push(yaml(&ClusterRole { metadata: meta(None), rules: Some(rules(by_resource)), ..Default::default() }));
                documents.push(yaml(&ClusterRoleBinding { metadata: meta(None), role_ref: role_ref("ClusterRole"), subjects: Some(vec![subject(grantee)]) }));
            }
            Some(ns) => {
                documents.push(yaml(&Role { metadata: meta(Some(ns)), rules: Some(rules(by_resource)) }));
                documents.push(yaml(&RoleBinding { metadata: meta(Some(ns)), role_ref: role_ref("Role"), subjects: Some(vec![subject(grantee)]) }));
            }
        }
    }
    documents
}

/// The name of a plugin's Roles, ClusterRole and bindings.
pub fn role_name(identity_namespace: &str, plugin: &str) -> String {
    format!("kubewasm:{identity_namespace}:plugin-{plugin}")
}

/// One plugin's part: its ServiceAccount, Roles and bindings. What a team hands to its cluster
/// admin.
pub fn render_plugin(manifest: &Manifest, host: &HostNeeds) -> String {
    let Some(namespace) = &host.identity_namespace else { return String::new() };
    let account = service_account(&manifest.name);
    // Qualified by the identity namespace: two hosts in one cluster may run plugins of one name.
    let role = role_name(namespace, &manifest.name);
    let labels =
        BTreeMap::from([("app.kubernetes.io/managed-by".to_string(), "kubewasm".to_string()), ("kubewasm.io/plugin".to_string(), manifest.name.clone())]);
    let sa = ServiceAccount {
        metadata: ObjectMeta { name: Some(account.clone()), namespace: Some(namespace.clone()), labels: Some(labels.clone()), ..Default::default() },
        ..Default::default()
    };
    let grantee = Grantee::ServiceAccount { namespace: namespace.clone(), name: account.clone() };
    let mut docs = vec![yaml(&sa)];
    docs.extend(documents(&plugin_grants(manifest, &host.namespaces, host.sharded), &grantee, &role, &labels));
    docs.join("---\n")
}

/// Everything: every plugin's part (per-plugin identities) and the host's own roles, bound to
/// `grantee` and named `name`.
pub fn render(manifests: &[Manifest], host: &HostNeeds, grantee: &Grantee, name: &str) -> String {
    let mut parts: Vec<String> = manifests.iter().map(|m| render_plugin(m, host)).filter(|p| !p.is_empty()).collect();
    let grants = host_grants(manifests, host);
    if !grants.is_empty() {
        let labels = BTreeMap::from([("app.kubernetes.io/managed-by".to_string(), "kubewasm".to_string())]);
        parts.push(documents(&grants, grantee, name, &labels).join("---\n"));
    }
    parts.join("---\n")
}

/// The Helm chart's `plugins` values (charts/kubewasm/values.yaml) for these plugins: each
/// one's name, the rules of its ClusterRole (`rules`) and those of its Role in each namespace
/// (`namespaceRules`) — from which the chart makes the same ServiceAccount, Roles and bindings
/// as [`render_plugin`], and the host's reads and `impersonate`. `module` is left to the user:
/// a plugin directory does not say where its modules are pushed.
pub fn render_values(manifests: &[Manifest], namespaces: &[String], sharded: bool) -> String {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PluginValues {
        name: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        rules: Vec<PolicyRule>,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        namespace_rules: BTreeMap<String, Vec<PolicyRule>>,
    }
    #[derive(serde::Serialize)]
    struct Values {
        plugins: Vec<PluginValues>,
    }
    let plugins = manifests
        .iter()
        .map(|m| {
            let mut values = PluginValues { name: m.name.clone(), rules: Vec::new(), namespace_rules: BTreeMap::new() };
            for (namespace, by_resource) in &plugin_grants(m, namespaces, sharded).0 {
                match namespace {
                    None => values.rules = rules(by_resource),
                    Some(ns) => {
                        values.namespace_rules.insert(ns.clone(), rules(by_resource));
                    }
                }
            }
            values
        })
        .collect();
    let header = "# The chart's plugins (`helm install -f`); give each a `module` for the chart to create its Plugin.\n";
    format!("{header}{}", yaml(&Values { plugins }))
}

/// Plugins' write grants that also cover one of the host's own objects (its Lease, its status
/// ConfigMap). The host refuses such writes whatever the manifest says, but RBAC would not: an
/// admin may want to narrow the grant with resource names.
pub fn host_object_overlaps(manifests: &[Manifest], host: &HostNeeds) -> Vec<String> {
    let own = [
        host.lease.as_ref().map(|(ns, name)| (Gvk::new("coordination.k8s.io", "v1", "Lease"), ns, name)),
        host.status.as_ref().map(|(ns, name)| (Gvk::new("", "v1", "ConfigMap"), ns, name)),
    ];
    let mut warnings = Vec::new();
    for m in manifests {
        for p in &m.permissions {
            let writes: Vec<&str> = p
                .verbs
                .iter()
                .filter(|v| matches!(v, Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection))
                .map(|v| v.as_str())
                .collect();
            for (kind, ns, name) in own.iter().flatten() {
                let covers = p.resource.group == kind.group
                    && p.resource.kind == kind.kind
                    && p.subresource.is_none()
                    && (p.namespaces.is_empty() || p.namespaces.contains(*ns))
                    && (p.names.is_empty() || p.names.contains(*name));
                if covers && !writes.is_empty() {
                    // A declarative plugin's children may have any name its answers give.
                    let child = m.composition.is_some() && m.owns.contains(&p.resource);
                    let advice = if child {
                        "its children's names are its answers', so keep the host's own objects in a namespace its plugins do not write (--status-configmap NS/NAME)"
                    } else {
                        "narrow the grant with resource names"
                    };
                    warnings.push(format!(
                        "plugin {} is granted {} on {} in {ns}, which includes the host's own {} {name}: the host refuses such writes, but RBAC would not ({advice})",
                        m.name,
                        writes.join(","),
                        plural(kind),
                        kind.kind
                    ));
                }
            }
        }
    }
    warnings
}

fn yaml(object: &impl serde::Serialize) -> String {
    serde_saphyr::to_string(object).expect("RBAC objects serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Mapping, Permission, RequestedLimits, Watch};

    fn manifest() -> Manifest {
        Manifest {
            name: "sample".into(),
            version: "1".into(),
            primary: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
            primary_selector: None,
            owns: vec![Gvk::new("apps", "v1", "Deployment")],
            watches: vec![Watch { resource: Gvk::new("", "v1", "ConfigMap"), mapping: Mapping::OwnerReferences, selector: None }],
            finalizer: Some("example.com/cleanup".into()),
            resync: None,
            max_concurrency: 1,
            limits: RequestedLimits::default(),
            permissions: vec![
                permission(Gvk::new("apps", "v1", "Deployment"), None, &[Verb::Create, Verb::Patch], &[], &[]),
                permission(Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"), None, &[Verb::Patch], &[], &[]),
                permission(Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"), Some("status"), &[Verb::Patch], &[], &[]),
                permission(Gvk::new("", "v1", "Secret"), None, &[Verb::Get], &["team-a"], &[]),
                permission(Gvk::new("rbac.authorization.k8s.io", "v1", "ClusterRole"), None, &[Verb::Bind], &[], &["edit"]),
            ],
            metadata_only: vec![],
            projections: vec![],
            composition: None,
            clusters: Default::default(),
            hooks: Default::default(),
        }
    }

    fn permission(resource: Gvk, sub: Option<&str>, verbs: &[Verb], namespaces: &[&str], names: &[&str]) -> Permission {
        Permission {
            resource,
            subresource: sub.map(Into::into),
            verbs: verbs.iter().copied().collect(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            names: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn verbs(grants: &Grants, namespace: Option<&str>, group: &str, resource: &str, names: &[&str]) -> Vec<&'static str> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        grants.0[&namespace.map(String::from)][&(group.to_string(), resource.to_string())][&names].iter().copied().collect()
    }

    fn needs() -> HostNeeds {
        HostNeeds {
            lease: Some(("kube-system".into(), "kubewasm".into())),
            status: Some(("kubewasm".into(), "kubewasm-plugins".into())),
            identity_namespace: Some("kubewasm".into()),
            namespaces: Vec::new(),
            sharded: false,
            webhooks: None,
        }
    }

    /// `sample` with a validating hook on Foo and a conversion of Foo.
    fn hooked() -> Manifest {
        use crate::hooks::{AdmissionHook, FailurePolicy, Hooks, Operation, SideEffects};
        let foo = Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo");
        let hook = AdmissionHook {
            name: "validate".into(),
            mutating: false,
            kinds: vec![foo.clone()],
            operations: vec![Operation::Create],
            failure_policy: FailurePolicy::Fail,
            timeout: std::time::Duration::from_secs(10),
            side_effects: SideEffects::None,
            match_conditions: vec![],
        };
        Manifest { hooks: Hooks { admission: vec![hook], conversion: vec![foo] }, ..manifest() }
    }

    fn webhook_needs(writes: bool, cert_secret: bool) -> HostNeeds {
        let cert_secret = cert_secret.then(|| ("kubewasm".to_string(), "kubewasm-webhook-certs".to_string()));
        HostNeeds { webhooks: Some(WebhookNeeds { writes, cert_secret }), ..needs() }
    }

    /// The writer of the configurations gets them all, `list` of CRDs and `patch` of only the
    /// CRDs converted; the host's own certificate, its Secret by name (but `create`).
    #[test]
    fn hooks_give_the_host_their_configurations_the_converted_crds_and_its_certificates_secret() {
        let grants = host_grants(&[hooked()], &webhook_needs(true, true));
        for resource in ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"] {
            assert_eq!(verbs(&grants, None, "admissionregistration.k8s.io", resource, &[]), ["create", "delete", "get", "list", "patch"]);
        }
        assert_eq!(verbs(&grants, None, "apiextensions.k8s.io", "customresourcedefinitions", &[]), ["list"]);
        assert_eq!(verbs(&grants, None, "apiextensions.k8s.io", "customresourcedefinitions", &["foos.samplecontroller.k8s.io"]), ["patch"]);
        assert_eq!(verbs(&grants, Some("kubewasm"), "", "secrets", &[]), ["create"]);
        assert_eq!(verbs(&grants, Some("kubewasm"), "", "secrets", &["kubewasm-webhook-certs"]), ["get", "update"]);
        let yaml = render(&[hooked()], &webhook_needs(true, true), &Grantee::User("host".into()), "kubewasm");
        assert!(yaml.contains("resourceNames:\n  - foos.samplecontroller.k8s.io"), "{yaml}");

        // No conversion: no CRD patched, but still listed (the writer undoes earlier ones).
        let mut validating_only = hooked();
        validating_only.hooks.conversion.clear();
        let grants = host_grants(&[validating_only], &webhook_needs(true, false));
        let crds = &grants.0[&None][&("apiextensions.k8s.io".to_string(), "customresourcedefinitions".to_string())];
        assert_eq!(crds.keys().collect::<Vec<_>>(), [&Vec::<String>::new()], "list only");
        assert!(!grants.0[&Some("kubewasm".to_string())].contains_key(&(String::new(), "secrets".to_string())), "a mounted certificate");

        // Configurations left to the user: the certificate's Secret only.
        let grants = host_grants(&[hooked()], &webhook_needs(false, true));
        assert!(!grants.0[&None].keys().any(|(group, _)| group == "admissionregistration.k8s.io" || group == "apiextensions.k8s.io"));
        assert_eq!(verbs(&grants, Some("kubewasm"), "", "secrets", &["kubewasm-webhook-certs"]), ["get", "update"]);
    }

    /// Plugins without hooks, or a host serving none: nothing of webhooks.
    #[test]
    fn no_hooks_no_webhook_grants() {
        for (manifest, host) in [(manifest(), webhook_needs(true, true)), (hooked(), needs())] {
            let grants = host_grants(&[manifest], &host);
            let all: Vec<&(String, String)> = grants.0.values().flat_map(|by| by.keys()).collect();
            assert!(
                !all.iter()
                    .any(|(group, resource)| group.starts_with("admissionregistration") || resource == "customresourcedefinitions" || resource == "secrets"),
                "{all:?}"
            );
        }
    }

    /// In a shard ring the host labels a sharded plugin's primaries and children: its identity
    /// must be allowed to `patch` them itself, or admission refuses it.
    #[test]
    fn in_a_ring_a_plugins_identity_may_patch_its_primaries_and_children() {
        let mut m = manifest();
        m.owns.push(Gvk::new("", "v1", "ConfigMap"));
        let patches = |sharded| verbs(&plugin_grants(&m, &[], sharded), None, "", "configmaps", &[]).contains(&"patch");
        assert!(!patches(false) && patches(true));
        assert!(verbs(&plugin_grants(&m, &[], true), None, "samplecontroller.k8s.io", "foos", &[]).contains(&"patch"));
    }

    #[test]
    fn a_plugins_identity_gets_exactly_its_manifest_and_what_the_host_does_for_it() {
        let grants = plugin_grants(&manifest(), &[], false);
        assert_eq!(verbs(&grants, None, "apps", "deployments", &[]), ["create", "get", "list", "patch", "watch"]);
        assert_eq!(verbs(&grants, None, "samplecontroller.k8s.io", "foos", &[]), ["get", "list", "patch", "watch"], "patch: the finalizer");
        assert_eq!(verbs(&grants, None, "samplecontroller.k8s.io", "foos/status", &[]), ["patch"]);
        assert_eq!(verbs(&grants, None, "samplecontroller.k8s.io", "foos/finalizers", &[]), ["update"], "blockOwnerDeletion of owned objects");
        assert_eq!(verbs(&grants, None, "", "configmaps", &[]), ["get", "list", "watch"]);
        assert_eq!(verbs(&grants, None, "events.k8s.io", "events", &[]), ["create", "patch"]);
        assert_eq!(verbs(&grants, None, "rbac.authorization.k8s.io", "clusterroles", &["edit"]), ["bind"]);
        assert!(!grants.0[&None].contains_key(&(String::new(), "secrets".to_string())), "secrets only in team-a");
        assert_eq!(verbs(&grants, Some("team-a"), "", "secrets", &[]), ["get"]);
        assert_eq!(grants.0.len(), 2, "cluster-wide and team-a, nothing else");
    }

    #[test]
    fn the_host_keeps_only_reads_its_objects_and_the_right_to_act_as_exactly_its_plugins() {
        let grants = host_grants(&[manifest()], &needs());
        assert_eq!(verbs(&grants, None, "apps", "deployments", &[]), ["get", "list", "watch"]);
        assert_eq!(verbs(&grants, None, "samplecontroller.k8s.io", "foos", &[]), ["get", "list", "watch"]);
        assert!(!grants.0[&None].contains_key(&("events.k8s.io".to_string(), "events".to_string())), "plugins record their own Events");
        assert_eq!(verbs(&grants, Some("kube-system"), "coordination.k8s.io", "leases", &["kubewasm"]), ["get", "update"]);
        assert_eq!(verbs(&grants, Some("kubewasm"), "", "serviceaccounts", &["kubewasm-plugin-sample"]), ["impersonate"]);
        assert_eq!(verbs(&grants, Some("kubewasm"), "", "configmaps", &["kubewasm-plugins"]), ["get", "patch"]);
        // Plugins acting as the host: the host needs everything.
        let as_host = host_grants(&[manifest()], &HostNeeds { identity_namespace: None, ..needs() });
        assert_eq!(verbs(&as_host, None, "apps", "deployments", &[]), ["create", "get", "list", "patch", "watch"]);
        assert_eq!(verbs(&as_host, Some("team-a"), "", "secrets", &[]), ["get"]);
    }

    #[test]
    fn served_namespaces_turn_cluster_wide_rules_into_roles_except_for_cluster_scoped_kinds() {
        let mut m = manifest();
        m.permissions.push(permission(Gvk::new("", "v1", "Node"), None, &[Verb::Patch], &[], &[]));
        let grants = plugin_grants(&m, &["a".into(), "b".into()], false);
        assert_eq!(verbs(&grants, Some("a"), "apps", "deployments", &[]), ["create", "get", "list", "patch", "watch"]);
        assert_eq!(verbs(&grants, Some("b"), "apps", "deployments", &[]), ["create", "get", "list", "patch", "watch"]);
        assert_eq!(verbs(&grants, None, "", "nodes", &[]), ["patch"]);
        assert!(!grants.0[&None].contains_key(&("apps".to_string(), "deployments".to_string())));
    }

    #[test]
    fn renders_a_service_account_roles_and_bindings_as_yaml() {
        let grantee = Grantee::ServiceAccount { namespace: "kubewasm".into(), name: "kubewasm".into() };
        let yaml = render(&[manifest()], &needs(), &grantee, "kubewasm");
        for needle in [
            "kind: ServiceAccount\n",
            "name: kubewasm-plugin-sample\n",
            "kind: ClusterRole\n",
            "kind: ClusterRoleBinding",
            "kind: Role\n",
            "kind: RoleBinding",
            "namespace: team-a",
            "- foos/status",
            "- foos/finalizers",
            "resourceNames:\n  - edit",
            "- impersonate",
        ] {
            assert!(yaml.contains(needle), "{needle:?} missing in:\n{yaml}");
        }
        let plugin = render_plugin(&manifest(), &needs());
        assert!(!plugin.contains("impersonate") && !plugin.contains("leases"), "one plugin's part holds nothing of the host's:\n{plugin}");
    }

    /// The values carry exactly the rules `render_plugin` puts in the plugin's ClusterRole and
    /// Roles, in the shape of the chart's `plugins` list.
    #[test]
    fn renders_the_charts_plugin_values() {
        let yaml = render_values(&[manifest()], &[], false);
        let values: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let plugins = values["plugins"].as_array().unwrap();
        assert_eq!(plugins.len(), 1, "{yaml}");
        assert_eq!(plugins[0].as_object().unwrap().keys().collect::<Vec<_>>(), ["name", "namespaceRules", "rules"], "{yaml}");
        assert_eq!(plugins[0]["name"], "sample");
        let objects: Vec<serde_json::Value> = serde_saphyr::from_multiple(&render_plugin(&manifest(), &needs())).unwrap();
        let role = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap()["rules"].clone();
        assert_eq!(plugins[0]["rules"], role("ClusterRole"));
        assert_eq!(plugins[0]["namespaceRules"], serde_json::json!({"team-a": role("Role")}));
        assert_eq!(plugins[0]["namespaceRules"]["team-a"], serde_json::json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]));
        // Served namespaces: Roles only.
        let served: serde_json::Value = serde_saphyr::from_str(&render_values(&[manifest()], &["a".into()], false)).unwrap();
        assert!(served["plugins"][0].get("rules").is_some_and(|r| r.as_array().unwrap().iter().all(|r| r["resources"].to_string().contains("clusterroles"))));
        assert!(served["plugins"][0]["namespaceRules"]["a"].as_array().is_some_and(|r| !r.is_empty()));
        assert_eq!(render_values(&[], &[], false).lines().last(), Some("plugins: []"));
    }

    #[test]
    fn grants_that_cover_the_hosts_own_objects_are_pointed_out() {
        let mut m = manifest();
        m.permissions.push(permission(Gvk::new("coordination.k8s.io", "v1", "Lease"), None, &[Verb::Get, Verb::Patch], &[], &[]));
        m.permissions.push(permission(Gvk::new("coordination.k8s.io", "v1", "Lease"), None, &[Verb::Patch], &[], &["mine"]));
        let warnings = host_object_overlaps(&[m], &needs());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("patch on leases in kube-system") && warnings[0].contains("Lease kubewasm"), "{}", warnings[0]);
    }
}
