//! Names of things in the Kubernetes API as the host handles them: a kind ([`Gvk`]), whether
//! its objects live in namespaces ([`Scope`]), an object's key within a resource
//! ([`ObjectKey`]), and the name rules Kubernetes applies (DNS labels and subdomains). Plain
//! data, no I/O.

use std::fmt;
use std::sync::Arc;

/// A Kubernetes kind: API group ("" for the core group), version and kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// `apiVersion` as objects carry it: "v1" for the core group, "apps/v1" otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Parses `apiVersion` + `kind` as found in an object or an owner reference.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Gvk::new(group, version, kind),
            None => Gvk::new("", api_version, kind),
        }
    }

    pub fn to_kube(&self) -> kube::core::GroupVersionKind {
        kube::core::GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

impl std::str::FromStr for Gvk {
    type Err = String;

    /// kubectl's spelling, as [`Gvk`] displays: `Deployment.v1.apps`, `ConfigMap.v1`.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut parts = text.splitn(3, '.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(kind), Some(version), group) if !kind.is_empty() && !version.is_empty() => Ok(Gvk::new(group.unwrap_or(""), version, kind)),
            _ => Err(format!("{text:?} is not a kind such as Deployment.v1.apps or ConfigMap.v1")),
        }
    }
}

/// `metadata.uid` of an object given as JSON text.
pub fn uid_of(json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        uid: Option<String>,
    }
    serde_json::from_str::<Object>(json).ok()?.metadata.uid
}

impl fmt::Display for Gvk {
    /// kubectl's spelling: `Deployment.v1.apps`, `ConfigMap.v1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() { write!(f, "{}.{}", self.kind, self.version) } else { write!(f, "{}.{}.{}", self.kind, self.version, self.group) }
    }
}

/// Whether a resource's objects live in namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// The plural resource name of a kind as kube pluralizes it (the API's own for every built-in
/// kind; a custom resource may choose another, which only discovery tells).
pub fn plural(gvk: &Gvk) -> String {
    kube::core::ApiResource::from_gvk(&gvk.to_kube()).plural
}

/// The name of the CRD defining a custom kind, `PLURAL.GROUP`, with the plural as [`plural`]
/// guesses it: what a conversion stanza is applied to when no cluster is asked.
pub fn crd_name(gvk: &Gvk) -> String {
    format!("{}.{}", plural(gvk), gvk.group)
}

/// Whether a kind is cluster-scoped, for built-in kinds, without asking a cluster; other kinds
/// (custom resources) are taken as namespaced.
pub fn builtin_scope(gvk: &Gvk) -> Scope {
    const CLUSTER: &[(&str, &str)] = &[
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("", "ComponentStatus"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("storage.k8s.io", "VolumeAttributesClass"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("certificates.k8s.io", "ClusterTrustBundle"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("networking.k8s.io", "IngressClass"),
        ("networking.k8s.io", "IPAddress"),
        ("networking.k8s.io", "ServiceCIDR"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
        ("resource.k8s.io", "DeviceClass"),
        ("resource.k8s.io", "ResourceSlice"),
        ("authorization.k8s.io", "SubjectAccessReview"),
        ("authorization.k8s.io", "SelfSubjectAccessReview"),
        ("authorization.k8s.io", "SelfSubjectRulesReview"),
        ("authentication.k8s.io", "TokenReview"),
        ("authentication.k8s.io", "SelfSubjectReview"),
    ];
    if CLUSTER.iter().any(|(group, kind)| gvk.group == *group && gvk.kind == *kind) { Scope::Cluster } else { Scope::Namespaced }
}

/// RFC 1123 label: what Kubernetes requires of namespace names, and kubewasm of plugin names.
pub fn is_dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty() && s.len() <= 63 && s.starts_with(ok) && s.ends_with(ok) && s.chars().all(|c| ok(c) || c == '-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters (API groups, finalizer
/// and label-key prefixes, most object names).
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Identifies an object within one resource: `namespace/name`, or `name` when cluster-scoped.
/// Cheap to clone and hash: it is the workqueue's key.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    namespace: Option<Arc<str>>,
    name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        ObjectKey { namespace: namespace.map(Arc::from), name: Arc::from(name) }
    }

    /// A key from shared parts; lets a store keep one copy of each namespace name.
    pub fn from_parts(namespace: Option<Arc<str>>, name: Arc<str>) -> Self {
        ObjectKey { namespace, name }
    }

    pub fn namespace_arc(&self) -> Option<&Arc<str>> {
        self.namespace.as_ref()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_round_trips() {
        for (api_version, group) in [("v1", ""), ("apps/v1", "apps"), ("example.com/v1alpha1", "example.com")] {
            let gvk = Gvk::from_api_version(api_version, "K");
            assert_eq!(gvk.group, group);
            assert_eq!(gvk.api_version(), api_version);
        }
        assert_eq!(Gvk::new("apps", "v1", "Deployment").to_string(), "Deployment.v1.apps");
        assert_eq!(ObjectKey::new(Some("ns"), "a").to_string(), "ns/a");
        assert_eq!(ObjectKey::new(None, "node-1").to_string(), "node-1");
        for gvk in [Gvk::new("apps", "v1", "Deployment"), Gvk::new("", "v1", "ConfigMap"), Gvk::new("example.com", "v1alpha1", "Foo")] {
            assert_eq!(gvk.to_string().parse::<Gvk>(), Ok(gvk));
        }
        assert!("Deployment".parse::<Gvk>().is_err());
        assert_eq!(uid_of(r#"{"metadata":{"name":"a","uid":"u-1"}}"#).as_deref(), Some("u-1"));
    }
}
