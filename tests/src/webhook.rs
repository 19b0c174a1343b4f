//! A validating admission webhook on loopback that plays broken infrastructure: told at any
//! moment to allow, to hang for a while before it answers (a slow webhook: the API server waits
//! up to its `timeoutSeconds`), or to refuse with HTTP status codes in turn (a 503/429 storm,
//! which the API server passes on to the client as its own answer).
//!
//! Owns the HTTPS server (a self-signed certificate for 127.0.0.1 made here, handed to the API
//! server as the `caBundle`) and one `ValidatingWebhookConfiguration`, scoped to one namespace
//! and to the ConfigMaps carrying one label value (one plugin's outputs), so parallel tests on the
//! shared control plane, and the other plugins of the same test, are untouched. `failurePolicy: Ignore`: a webhook that times out (or a configuration left behind)
//! lets the write through. Dropping it stops the server and deletes the configuration.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::controlplane::{ControlPlane, client_from};
use crate::namespace::TestNamespace;
use crate::wait::{WaitError, eventually};

/// What the webhook does with each review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow,
    /// Waits this long, then allows (the API server gives up at the configuration's timeout,
    /// and with `failurePolicy: Ignore` lets the write through).
    Hang(Duration),
    /// Refuses with these HTTP status codes in turn (e.g. `[503, 429]`).
    Refuse(Vec<u16>),
}

/// Why the webhook could not be started or registered.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("serving the webhook: {0}")]
    Serve(#[from] crate::tls::LoopbackTlsError),
    #[error("listening on loopback: {0}")]
    Listen(#[from] std::io::Error),
    #[error("registering the ValidatingWebhookConfiguration: {0}")]
    Register(#[from] kube::Error),
    #[error("the webhook never saw a review: {0}")]
    NotCalled(#[from] WaitError),
}

/// Counts of what the webhook answered.
#[derive(Debug, Default)]
struct Counts {
    reviews: AtomicU64,
    refused: AtomicU64,
}

/// A running webhook and its registration; see the module docs.
pub struct AdmissionWebhook {
    name: String,
    answer: Arc<Mutex<Answer>>,
    counts: Arc<Counts>,
    client: Client,
    kubeconfig: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

/// How long the API server waits for the webhook (at most 30 s; the audit's slow webhook is 10 s).
const TIMEOUT_SECONDS: i32 = 10;

impl AdmissionWebhook {
    /// Serves the webhook on a free loopback port and registers it for creates and updates of the
    /// ConfigMaps labelled `label` (a key and its value) in `ns`; returns once the API server
    /// calls it.
    pub async fn start(cp: &ControlPlane, ns: &TestNamespace, label: (&str, &str)) -> Result<AdmissionWebhook, WebhookError> {
        let crate::tls::LoopbackTls { certificate: cert, acceptor, listener } = crate::tls::LoopbackTls::bind().await?;
        let addr = listener.local_addr()?;
        let answer = Arc::new(Mutex::new(Answer::Allow));
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn(serve(listener, acceptor, answer.clone(), counts.clone()));

        let name = crate::unique_name(&format!("e2e-{}", ns.name()));
        let client = ns.client().clone();
        let webhook = AdmissionWebhook { name, answer, counts, client, kubeconfig: cp.kubeconfig_path().to_owned(), task };
        webhook.register(ns.name(), label, addr, &cert.pem()).await?;
        webhook.wait_called(ns, label).await?;
        Ok(webhook)
    }

    async fn register(&self, ns: &str, (key, value): (&str, &str), addr: SocketAddr, ca: &str) -> Result<(), kube::Error> {
        use base64::Engine as _;
        let configuration: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": self.name},
            "webhooks": [{
                "name": "e2e.kubewasm.io",
                "clientConfig": {"url": format!("https://{addr}/validate"), "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "objectSelector": {"matchLabels": {key: value}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": TIMEOUT_SECONDS,
                "admissionReviewVersions": ["v1"],
            }],
        }))
        .expect("a valid ValidatingWebhookConfiguration");
        Api::<ValidatingWebhookConfiguration>::all(self.client.clone()).create(&PostParams::default(), &configuration).await?;
        Ok(())
    }

    /// The API server picks a new configuration up within a moment: dry-run creates of a
    /// labelled ConfigMap (no side effects, nothing stored) until the webhook sees one.
    async fn wait_called(&self, ns: &TestNamespace, (key, value): (&str, &str)) -> Result<(), WaitError> {
        let cms: Api<ConfigMap> = ns.api();
        let probe = ConfigMap {
            metadata: ObjectMeta { name: Some("e2e-webhook-probe".into()), labels: Some([(key.to_string(), value.to_string())].into()), ..Default::default() },
            ..Default::default()
        };
        let before = self.reviews();
        eventually("the API server to call the webhook", Duration::from_secs(30), || async {
            cms.create(&PostParams { dry_run: true, ..Default::default() }, &probe).await.map_err(|e| e.to_string())?;
            if self.reviews() > before { Ok(()) } else { Err("not called yet".to_string()) }
        })
        .await
    }

    /// From now on, answer every review this way.
    pub fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = answer;
    }

    /// Reviews received so far (answered or not yet).
    pub fn reviews(&self) -> u64 {
        self.counts.reviews.load(Ordering::Relaxed)
    }

    /// Reviews refused with a status code so far.
    pub fn refused(&self) -> u64 {
        self.counts.refused.load(Ordering::Relaxed)
    }
}

impl Drop for AdmissionWebhook {
    fn drop(&mut self) {
        self.task.abort();
        // As `TestNamespace` does: the test's runtime may be the one dropping us, so the delete
        // runs on a thread with a runtime and client of its own.
        let (name, kubeconfig) = (std::mem::take(&mut self.name), self.kubeconfig.clone());
        let deleter = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async {
                let Ok(client) = client_from(&kubeconfig).await else { return };
                let _ = Api::<ValidatingWebhookConfiguration>::all(client).delete(&name, &DeleteParams::default()).await;
            });
        });
        let _ = deleter.join();
    }
}

/// Accepts TLS connections and serves each with HTTP/1.1 until the task is aborted.
async fn serve(listener: TcpListener, acceptor: tokio_rustls::TlsAcceptor, answer: Arc<Mutex<Answer>>, counts: Arc<Counts>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let (acceptor, answer, counts) = (acceptor.clone(), answer.clone(), counts.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper::service::service_fn(move |request| review(request, answer.clone(), counts.clone()));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

/// Answers one `AdmissionReview` as the current [`Answer`] says.
async fn review(request: Request<Incoming>, answer: Arc<Mutex<Answer>>, counts: Arc<Counts>) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = counts.reviews.fetch_add(1, Ordering::Relaxed);
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let uid = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v["request"]["uid"].as_str().map(String::from)).unwrap_or_default();
    let current = answer.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let response = match current {
        Answer::Allow => json!({"uid": uid, "allowed": true}),
        Answer::Hang(wait) => {
            tokio::time::sleep(wait).await;
            json!({"uid": uid, "allowed": true})
        }
        Answer::Refuse(codes) => {
            counts.refused.fetch_add(1, Ordering::Relaxed);
            let code = codes.get(n as usize % codes.len().max(1)).copied().unwrap_or(503);
            json!({"uid": uid, "allowed": false, "status": {"code": code, "message": format!("e2e webhook storm: {code}")}})
        }
    };
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    Ok(Response::builder().header("content-type", "application/json").body(Full::new(Bytes::from(review.to_string()))).expect("a valid response"))
}
