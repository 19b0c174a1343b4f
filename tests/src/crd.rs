//! The Plugin CRD as the chart ships it (`charts/kubewasm/crds/`), for suites that serve
//! Plugin resources.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::core::ApiResource;

use crate::guests::workspace_root;
use crate::wait::{CrdError, apply_crd};

/// The CRD file.
pub fn plugin_crd_path() -> std::path::PathBuf {
    workspace_root().join("charts/kubewasm/crds/plugins.kubewasm.io.yaml")
}

pub fn plugin_crd() -> CustomResourceDefinition {
    let path = plugin_crd_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Applies the Plugin CRD (idempotent) and waits until Plugins can be listed.
pub async fn install_plugin_crd(client: &Client) -> Result<ApiResource, CrdError> {
    apply_crd(client, &plugin_crd(), Duration::from_secs(60)).await
}
