//! Uniquely named namespaces that isolate parallel tests on one control plane.
//!
//! Owns only the namespace's lifetime: created by [`ControlPlane::namespace`], deleted (best
//! effort) when the [`TestNamespace`] is dropped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client, Resource};

use crate::controlplane::{ControlPlane, Error, client_from};

/// Label put on every test namespace.
pub const TEST_LABEL: &str = "kubewasm.io/test";

/// A namespace that exists for one test; deleted when dropped (unless [`keep`](Self::keep) was
/// called). Holds an admin client bound to the runtime of the test that created it.
pub struct TestNamespace {
    name: String,
    client: Client,
    kubeconfig: PathBuf,
    keep: bool,
}

impl ControlPlane {
    /// Creates a namespace named `<prefix>-<unique suffix>` (prefix trimmed to keep the name a DNS
    /// label), labelled `kubewasm.io/test=<prefix>`.
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace, Error> {
        let client = self.client().await?;
        let name = unique_name(prefix);
        let ns = Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), labels: Some([(TEST_LABEL.to_owned(), label_value(prefix))].into()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|source| Error::CreateNamespace { name: name.clone(), source })?;
        Ok(TestNamespace { name, client, kubeconfig: self.kubeconfig_path().to_owned(), keep: false })
    }
}

impl TestNamespace {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The admin client this namespace was created with.
    pub fn client(&self) -> &Client {
        &self.client
    }
    /// A namespaced `Api` in this namespace, with the admin client.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
    /// Leave the namespace in place when dropped (to inspect it after a failure).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        // The test's client is bound to the test's runtime, which may be blocked right here (a
        // current-thread runtime dropping us) or shutting down; so issue the delete from a thread
        // with its own runtime and client. The server finishes the deletion asynchronously.
        let name = std::mem::take(&mut self.name);
        let kubeconfig = self.kubeconfig.clone();
        let deleter = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async {
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    if let Ok(client) = client_from(&kubeconfig).await {
                        let _ = Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()).await;
                    }
                })
                .await;
            });
        });
        let _ = deleter.join();
    }
}

/// `<prefix>-<suffix>`: at most 63 characters of `[a-z0-9-]`, unique within this process and
/// (with overwhelming likelihood) across processes sharing a control plane.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut x = (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64 finaliser, then base36.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    let mut suffix = String::new();
    for _ in 0..6 {
        suffix.push(char::from_digit((x % 36) as u32, 36).unwrap());
        x /= 36;
    }
    let prefix = label_value(prefix);
    let prefix = if prefix.is_empty() { "test".to_owned() } else { prefix };
    format!("{prefix}-{n}{suffix}")
}

/// Lowercase alphanumerics and dashes, at most 36 characters, no leading/trailing dash.
fn label_value(prefix: &str) -> String {
    let cleaned: String = prefix.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).take(36).collect();
    cleaned.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels_and_unique() {
        let a = unique_name("My_Test.Name");
        let b = unique_name("My_Test.Name");
        assert_ne!(a, b);
        assert!(a.starts_with("my-test-name-"), "{a}");
        let long = unique_name(&"x".repeat(100));
        assert!(long.len() <= 63, "{long}");
        for n in [&a, &b, &long, &unique_name("--")] {
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{n}");
            assert!(!n.starts_with('-') && !n.ends_with('-'), "{n}");
        }
    }
}
