//! Kubernetes identities for tests: a kubeconfig that authenticates as a ServiceAccount with a
//! token from the TokenRequest API — so a host runs with exactly the RBAC its ServiceAccount has,
//! as it would in a cluster.

use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::{AuthInfo, Kubeconfig, NamedAuthInfo};

use crate::ControlPlane;

/// Writes to `out` a kubeconfig for ServiceAccount `namespace/name` (created if missing) on
/// `cp`, with a one-hour token.
pub async fn service_account_kubeconfig(cp: &ControlPlane, namespace: &str, name: &str, out: &Path) -> anyhow::Result<()> {
    let admin = cp.client().await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
    if accounts.get_opt(name).await?.is_none() {
        let account: ServiceAccount = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        accounts.create(&PostParams::default(), &account).await?;
    }
    let request = TokenRequest { spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }), ..Default::default() };
    let token = accounts.create_token_request(name, &PostParams::default(), &request).await?;
    let token = token.status.and_then(|s| s.token).ok_or_else(|| anyhow::anyhow!("the TokenRequest has no token"))?;
    let mut config = Kubeconfig::read_from(cp.kubeconfig_path())?;
    let user = format!("system:serviceaccount:{namespace}:{name}");
    config.auth_infos =
        vec![NamedAuthInfo { name: user.clone(), auth_info: Some(AuthInfo { token: Some(token.into()), ..Default::default() }), other: Default::default() }];
    for context in &mut config.contexts {
        if let Some(context) = context.context.as_mut() {
            context.user = Some(user.clone());
        }
    }
    std::fs::write(out, serde_json::to_string(&config)?)?;
    Ok(())
}
