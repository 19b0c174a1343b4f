//! Names of things in the Kubernetes API as the host handles them: a kind ([`Gvk`]) and an
//! object's key within a resource ([`ObjectKey`]). Plain data, no I/O.

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
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
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

impl fmt::Display for Gvk {
    /// kubectl's spelling: `Deployment.v1.apps`, `ConfigMap.v1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}.{}", self.kind, self.version)
        } else {
            write!(f, "{}.{}.{}", self.kind, self.version, self.group)
        }
    }
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
    }
}
