//! Polling for conditions, and the Kubernetes waits tests keep needing (CRDs, API error codes).
//!
//! Owns no state; every wait is bounded by a timeout and reports what it last saw.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client};

/// A condition that did not come true in time.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("timed out after {waited:?} waiting for {what}; last: {last}")]
    TimedOut { what: String, waited: Duration, last: String },
}

/// Calls `check` until it returns `Ok`, at growing intervals (25 ms up to 500 ms), for at most
/// `timeout`. An `Err` means "not yet" and its text is kept for the timeout message — so a
/// condition reads naturally:
///
/// ```ignore
/// eventually("the child to be collected", Duration::from_secs(30), || async {
///     match api.get_opt("child").await? {
///         None => Ok(()),
///         Some(_) => Err(anyhow::anyhow!("still there")),
///     }
/// }).await?;
/// ```
pub async fn eventually<T, E, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let started = Instant::now();
    let mut interval = Duration::from_millis(25);
    loop {
        let last = match check().await {
            Ok(value) => return Ok(value),
            Err(e) => e.to_string(),
        };
        let waited = started.elapsed();
        if waited >= timeout {
            return Err(WaitError::TimedOut { what: what.to_owned(), waited, last });
        }
        tokio::time::sleep(interval.min(timeout - waited)).await;
        interval = (interval * 2).min(Duration::from_millis(500));
    }
}

/// The HTTP status code of an API error (`409`, `403`, `410`, …), if `err` is one.
pub fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Why a CRD could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("CRD has no metadata.name")]
    NoName,
    #[error("CRD {0} has no version that is both served and the storage version")]
    NoStorageVersion(String),
    #[error("applying CRD {name}: {source}")]
    Apply { name: String, source: kube::Error },
    #[error(transparent)]
    Wait(#[from] WaitError),
}

/// Field manager used by the test-support library's server-side applies.
pub const FIELD_MANAGER: &str = "kubewasm-tests";

/// Server-side-applies `crd` (forcing ownership), waits until it is Established and its resources
/// can be listed, and returns the [`ApiResource`] of its storage version (for `Api<DynamicObject>`).
pub async fn apply_crd(client: &Client, crd: &CustomResourceDefinition, timeout: Duration) -> Result<ApiResource, CrdError> {
    let name = crd.metadata.name.clone().ok_or(CrdError::NoName)?;
    let version = crd.spec.versions.iter().find(|v| v.served && v.storage).ok_or_else(|| CrdError::NoStorageVersion(name.clone()))?;
    let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut body = crd.clone();
    body.metadata.managed_fields = None;
    body.metadata.resource_version = None;
    body.status = None;
    let mut value = serde_json::to_value(&body).expect("a CRD serialises");
    value["apiVersion"] = "apiextensions.k8s.io/v1".into();
    value["kind"] = "CustomResourceDefinition".into();
    crds.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&value))
        .await
        .map_err(|source| CrdError::Apply { name: name.clone(), source })?;

    wait_crd_established(client, &name, timeout).await?;
    // Established means the handler is installed; make sure it actually answers before returning.
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    eventually(&format!("{name} to be listable"), timeout, || {
        let api = api.clone();
        async move { api.list(&ListParams::default().limit(1)).await }
    })
    .await?;
    Ok(resource)
}

/// Waits until the CRD called `name` has condition `Established=True`.
pub async fn wait_crd_established(client: &Client, name: &str, timeout: Duration) -> Result<(), WaitError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(&format!("CRD {name} to be Established"), timeout, || {
        let crds = crds.clone();
        async move {
            let crd = crds.get(name).await.map_err(|e| e.to_string())?;
            let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
            match conditions.iter().find(|c| c.type_ == "Established") {
                Some(c) if c.status == "True" => Ok(()),
                Some(c) => Err(format!("Established={} ({})", c.status, c.message.clone().unwrap_or_default())),
                None => Err("no Established condition yet".to_owned()),
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_retries_until_ok_and_times_out_with_the_last_error() {
        let mut n = 0;
        let got = eventually("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move { if n >= 3 { Ok(n) } else { Err(format!("n={n}")) } }
        })
        .await
        .unwrap();
        assert_eq!(got, 3);

        let err = eventually("never", Duration::from_millis(100), || async { Err::<(), _>("nope") }).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("never") && text.contains("nope"), "{text}");
    }
}
