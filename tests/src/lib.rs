//! Test support for kubewasm: a real, local Kubernetes control plane (kube-apiserver, etcd and
//! kube-controller-manager's garbage-collector, namespace, serviceaccount, deployment and
//! replicaset controllers, built from the official Go modules in `tests/controlplane/`) and the
//! helpers end-to-end tests share.
//!
//! ```ignore
//! use kubewasm_tests::{ControlPlane, eventually};
//!
//! #[tokio::test]
//! async fn my_test() -> anyhow::Result<()> {
//!     let cp = ControlPlane::shared().await;          // one per test binary, started lazily
//!     let ns = cp.namespace("my-test").await?;        // unique; deleted on drop
//!     let cms = ns.api::<ConfigMap>();
//!     // ...
//!     Ok(())
//! }
//! ```
//!
//! Modules: `build` (the cached Go build), `process` (children tied to this process),
//! `controlplane` (one running instance), `shared` (the per-process instance), `namespace`,
//! `kubectl`, `wait` (polling and Kubernetes waits), `host` (the real `kubewasm` binary as a
//! child process), `plugindir` (a plugin directory and the suite's `e2e-guest` plugin), `prom`
//! (Prometheus text: the host's metrics and the API server's), `timing` (for the benchmarks),
//! `proxy` (a fault-injection TCP proxy), `peer` (the controller-runtime peer of the side-by-side benchmarks), `audit` (the API server's audit log), `accounts`
//! (ServiceAccount kubeconfigs from TokenRequest), `hostile_registry` (a registry on loopback that
//! plays the attacker: endless, oversized, trickling and redirecting answers), `hostile_member` (a
//! member cluster's API server on loopback that answers endless, oversized or newline-less bodies
//! and long error pages), `components`
//! (hostile components written by hand in WAT), `webhook` (an admission webhook on loopback that
//! hangs or answers 503/429 storms), `build` also builds the suite's Go tools
//! (`registry`: an OCI registry on loopback; crane; helm); `trace` (the checker that no two hosts
//! reconcile one object at once).

pub mod accounts;
pub mod audit;
pub mod build;
pub mod components;
pub mod controlplane;
pub mod crd;
pub mod guests;
pub mod host;
pub mod hostile_member;
pub mod hostile_registry;
pub mod kubectl;
pub mod members;
pub mod namespace;
pub mod peer;
pub mod plugindir;
pub mod process;
pub mod prom;
pub mod proxy;
pub mod registry;
mod shared;
pub mod timing;
pub mod tls;
pub mod trace;
pub mod wait;
pub mod webhook;
pub mod widgets;

pub use build::{BuildError, controlplane_binary};
pub use controlplane::{ControlPlane, Error, Options, client_from};
pub use host::{Host, HostConfig, HostError, kubewasm_binary};
pub use kubectl::{Kubectl, KubectlError, kubectl_path};
pub use namespace::{TestNamespace, unique_name};
pub use plugindir::{E2eSettings, PluginDir};
pub use wait::{CrdError, WaitError, api_code, apply_crd, eventually, wait_crd_established};
