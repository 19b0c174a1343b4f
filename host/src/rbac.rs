//! `kubewasm rbac`: the RBAC objects that cover exactly what the plugins declare, plus what the
//! host itself needs — watches of every cached resource, finalizer patches, Events, the leader
//! election Lease and the status ConfigMap. Cluster-wide grants become one ClusterRole; grants limited to
//! namespaces become a Role in each. Plural names follow kube's pluralization of the kind (the
//! API's own for every built-in kind); no cluster is needed.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ApiResource;

use crate::manifest::{Manifest, Verb};
use crate::resource::Gvk;

/// Who the rules are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grantee {
    ServiceAccount { namespace: String, name: String },
    User(String),
}

/// What the host needs besides its plugins.
#[derive(Debug, Clone)]
pub struct HostNeeds {
    /// The namespace of the leader election Lease, if leader election is on.
    pub lease_namespace: Option<String>,
    /// The namespace of the status ConfigMap listing the running plugins.
    pub status_namespace: Option<String>,
}

/// Rules collected per scope: `None` is cluster-wide, `Some(ns)` one namespace.
type Grants = BTreeMap<Option<String>, BTreeMap<(String, String), BTreeSet<&'static str>>>;

fn plural(gvk: &Gvk) -> String {
    ApiResource::from_gvk(&gvk.to_kube()).plural
}

fn grant(grants: &mut Grants, namespace: Option<&str>, group: &str, resource: String, verbs: impl IntoIterator<Item = &'static str>) {
    grants.entry(namespace.map(Into::into)).or_default().entry((group.to_string(), resource)).or_default().extend(verbs);
}

/// Every rule the plugins and the host need.
fn collect(manifests: &[Manifest], host: &HostNeeds) -> Grants {
    let mut grants = Grants::new();
    for m in manifests {
        for gvk in m.cached_resources() {
            grant(&mut grants, None, &gvk.group, plural(gvk), Verb::READ.map(Verb::as_str));
        }
        if m.finalizer.is_some() {
            grant(&mut grants, None, &m.primary.group, plural(&m.primary), [Verb::Patch.as_str()]);
        }
        for p in &m.permissions {
            let resource = match p.subresource {
                Some(sub) => format!("{}/{}", plural(&p.resource), sub.as_str()),
                None => plural(&p.resource),
            };
            let verbs = p.verbs.iter().map(|v| v.as_str());
            if p.namespaces.is_empty() {
                grant(&mut grants, None, &p.resource.group, resource, verbs);
            } else {
                for ns in &p.namespaces {
                    grant(&mut grants, Some(ns), &p.resource.group, resource.clone(), verbs.clone());
                }
            }
        }
    }
    // Events about any object, in any namespace; kube's recorder patches event series.
    grant(&mut grants, None, "events.k8s.io", "events".into(), ["create", "patch"]);
    if let Some(ns) = &host.lease_namespace {
        grant(&mut grants, Some(ns), "coordination.k8s.io", "leases".into(), ["get", "create", "update"]);
    }
    if let Some(ns) = &host.status_namespace {
        // Server-side apply: patch, and create the first time.
        grant(&mut grants, Some(ns), "", "configmaps".into(), ["create", "patch"]);
    }
    grants
}

fn rules(by_resource: &BTreeMap<(String, String), BTreeSet<&'static str>>) -> Vec<PolicyRule> {
    // Resources with the same verbs in the same group share one rule, as people write them.
    let mut merged: BTreeMap<(String, Vec<&str>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in by_resource {
        merged.entry((group.clone(), verbs.iter().copied().collect())).or_default().push(resource.clone());
    }
    merged
        .into_iter()
        .map(|((group, verbs), resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources),
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

/// The RBAC objects as one YAML stream: roles and their bindings to `grantee`, all named `name`.
pub fn render(manifests: &[Manifest], host: &HostNeeds, grantee: &Grantee, name: &str) -> String {
    let meta = |namespace: Option<&String>| ObjectMeta { name: Some(name.into()), namespace: namespace.cloned(), ..Default::default() };
    let role_ref = |kind: &str| RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: kind.into(), name: name.into() };
    let mut documents = Vec::new();
    for (namespace, by_resource) in &collect(manifests, host) {
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
    documents.join("---\n")
}

fn yaml(object: &impl serde::Serialize) -> String {
    serde_saphyr::to_string(object).expect("RBAC objects serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Mapping, Permission, RequestedLimits, Subresource, Watch};

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
                Permission {
                    resource: Gvk::new("apps", "v1", "Deployment"),
                    subresource: None,
                    verbs: [Verb::Create, Verb::Patch].into(),
                    namespaces: Default::default(),
                },
                Permission {
                    resource: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
                    subresource: Some(Subresource::Status),
                    verbs: [Verb::Patch].into(),
                    namespaces: Default::default(),
                },
                Permission {
                    resource: Gvk::new("", "v1", "Secret"),
                    subresource: None,
                    verbs: [Verb::Get].into(),
                    namespaces: ["team-a".to_string()].into(),
                },
            ],
        }
    }

    #[test]
    fn covers_exactly_the_declared_permissions_and_the_hosts_needs() {
        let host = HostNeeds { lease_namespace: Some("kube-system".into()), status_namespace: Some("kubewasm".into()) };
        let grants = collect(&[manifest()], &host);
        let cluster = &grants[&None];
        let verbs = |group: &str, resource: &str| cluster[&(group.to_string(), resource.to_string())].iter().copied().collect::<Vec<_>>();
        assert_eq!(verbs("apps", "deployments"), ["create", "get", "list", "patch", "watch"]);
        assert_eq!(verbs("samplecontroller.k8s.io", "foos"), ["get", "list", "patch", "watch"], "patch: the finalizer");
        assert_eq!(verbs("samplecontroller.k8s.io", "foos/status"), ["patch"]);
        assert_eq!(verbs("", "configmaps"), ["get", "list", "watch"]);
        assert_eq!(verbs("events.k8s.io", "events"), ["create", "patch"]);
        assert!(!cluster.contains_key(&(String::new(), "secrets".to_string())), "secrets only in team-a");
        assert_eq!(grants[&Some("team-a".into())].len(), 1);
        assert_eq!(grants[&Some("kube-system".into())][&("coordination.k8s.io".to_string(), "leases".to_string())].len(), 3);
        assert_eq!(grants[&Some("kubewasm".into())][&(String::new(), "configmaps".to_string())].len(), 2);
    }

    #[test]
    fn renders_roles_and_bindings_as_yaml() {
        let grantee = Grantee::ServiceAccount { namespace: "kubewasm".into(), name: "kubewasm".into() };
        let yaml = render(&[manifest()], &HostNeeds { lease_namespace: None, status_namespace: None }, &grantee, "kubewasm");
        for needle in ["kind: ClusterRole\n", "kind: ClusterRoleBinding", "kind: Role\n", "kind: RoleBinding", "namespace: team-a", "- foos/status", "kind: ServiceAccount"] {
            assert!(yaml.contains(needle), "{needle:?} missing in:\n{yaml}");
        }
        assert_eq!(yaml.matches("\n---\n").count() + usize::from(yaml.starts_with("---")), 3, "four documents:\n{yaml}");
    }
}
