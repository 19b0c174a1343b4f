//! Serves plugins' admission and conversion hooks (contract 0.1.6, `webhooks`) over HTTPS, on one
//! port of every replica: a hook needs no leader, so a standby — or a host fenced out of its
//! leadership — answers too. Owns the table of plugins serving hooks ([`Hooked`]); each request
//! takes the runner of the plugin's version serving at that moment, so a hot reload swaps a hook's
//! code between two requests and refuses none.
//!
//! A hook runs in its plugin's own instances and CPU share, under a deadline below the API
//! server's timeout: a slow or hostile plugin answers late or faults, and its hook's failure
//! policy answers for it; another plugin's hooks never wait on it.
//!
//! - [`review`]: the reviews in and the answers out. [`configuration`]: the webhook
//!   configurations and CRD conversion stanzas that point the API server here. [`certs`]: the
//!   serving certificate.
//!
//! Paths: `/validate/PLUGIN/HOOK`, `/mutate/PLUGIN/HOOK`, `/convert/PLUGIN`.

pub mod certs;
pub mod configuration;
pub mod review;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use parking_lot::RwLock;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::events::{EventRecorder, ObjectEvent};
use crate::hooks::{AdmissionHook, FailurePolicy, Hooks};
use crate::metrics::Metrics;
use crate::resource::ObjectKey;
use crate::runtime::PluginRunner;

/// What serves a plugin's hooks now: the runner of its serving version; `None` once it is gone.
pub type Serving = Arc<dyn Fn() -> Option<Arc<PluginRunner>> + Send + Sync>;

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 1024;
/// A TLS handshake or a request's headers not done within this are dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The API server's conversion webhook timeout (fixed at 30 s); the host answers before it.
const CONVERSION_DEADLINE: Duration = Duration::from_secs(25);

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("cannot listen for webhooks on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The plugins whose hooks this host serves, and a signal when the set changes.
#[derive(Clone)]
pub struct Hooked {
    plugins: Arc<RwLock<BTreeMap<String, (u64, Serving)>>>,
    /// The last registration's number.
    registered: Arc<AtomicU64>,
    changed: watch::Sender<u64>,
}

impl Default for Hooked {
    fn default() -> Self {
        Hooked { plugins: Arc::default(), registered: Arc::default(), changed: watch::Sender::new(0) }
    }
}

impl Hooked {
    /// Serves `plugin`'s hooks from whatever version `serving` hands out, from now on; returns
    /// the registration's number, for [`Hooked::withdraw`].
    pub fn serve(&self, plugin: &str, serving: Serving) -> u64 {
        let number = self.registered.fetch_add(1, Ordering::Relaxed) + 1;
        self.plugins.write().insert(plugin.to_owned(), (number, serving));
        self.changed.send_modify(|n| *n += 1);
        number
    }

    /// Stops serving `plugin`'s hooks, unless it registered again since `number`: requests for
    /// it are allowed unchecked from now on, and the leader removes its configurations next.
    pub fn withdraw(&self, plugin: &str, number: u64) {
        let removed = {
            let mut plugins = self.plugins.write();
            let current = plugins.get(plugin).is_some_and(|(n, _)| *n == number);
            current && plugins.remove(plugin).is_some()
        };
        if removed {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn runner(&self, plugin: &str) -> Option<Arc<PluginRunner>> {
        let serving = self.plugins.read().get(plugin).map(|(_, serving)| serving.clone())?;
        serving()
    }

    /// The hooks of every plugin served that declares some, as its serving version does.
    pub fn declared(&self) -> BTreeMap<String, Hooks> {
        let plugins: Vec<(String, Serving)> = self.plugins.read().iter().map(|(name, (_, serving))| (name.clone(), serving.clone())).collect();
        plugins
            .into_iter()
            .filter_map(|(name, serving)| {
                let runner = serving()?;
                let hooks = runner.manifest().map(|m| m.hooks.clone()).unwrap_or_default();
                (!hooks.is_empty() && runner.serves_hooks()).then_some((name, hooks))
            })
            .collect()
    }
}

/// What the request handlers share.
#[derive(Clone)]
struct Server {
    hooked: Hooked,
    metrics: Arc<Metrics>,
    /// Where a hook's failure is told about the object it was asked about.
    events: EventRecorder,
}

/// Binds the webhook server's address.
pub async fn listen(addr: SocketAddr) -> Result<TcpListener, WebhookError> {
    TcpListener::bind(addr).await.map_err(|source| WebhookError::Bind { addr, source })
}

/// Serves hooks on `listener` with `tls` (whose certificate resolver hands each new connection
/// the newest certificate), until `shutdown`: then stops accepting and lets requests in flight
/// finish.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    hooked: Hooked,
    metrics: Arc<Metrics>,
    events: EventRecorder,
    shutdown: CancellationToken,
) {
    let router = routes(Server { hooked, metrics, events });
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = connections.clone().acquire_owned() => permit.expect("never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!("accepting a webhook connection: {e}");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return tracing::debug!(%peer, "webhook TLS handshake: {e}"),
                Err(_) => return tracing::debug!(%peer, "webhook TLS handshake timed out"),
            };
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(HANDSHAKE_TIMEOUT);
            let connection = http.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    tasks.close();
    tasks.wait().await;
}

fn routes(server: Server) -> Router {
    Router::new()
        .route("/validate/{plugin}/{hook}", post(validate).layer(DefaultBodyLimit::max(review::MAX_ADMISSION_BODY)))
        .route("/mutate/{plugin}/{hook}", post(mutate).layer(DefaultBodyLimit::max(review::MAX_ADMISSION_BODY)))
        .route("/convert/{plugin}", post(convert).layer(DefaultBodyLimit::max(review::MAX_CONVERSION_BODY)))
        .with_state(server)
}

async fn validate(State(server): State<Server>, Path((plugin, hook)): Path<(String, String)>, body: Bytes) -> Response {
    let path = format!("/validate/{plugin}/{hook}");
    server.measured(&path, admit(&server, &plugin, &hook, false, &body)).await
}

async fn mutate(State(server): State<Server>, Path((plugin, hook)): Path<(String, String)>, body: Bytes) -> Response {
    let path = format!("/mutate/{plugin}/{hook}");
    server.measured(&path, admit(&server, &plugin, &hook, true, &body)).await
}

async fn convert(State(server): State<Server>, Path(plugin): Path<String>, body: Bytes) -> Response {
    let path = format!("/convert/{plugin}");
    server.measured(&path, conversion(&server, &plugin, &body)).await
}

impl Server {
    /// Serves an answer under controller-runtime's webhook metrics for `path`.
    async fn measured(&self, path: &str, answer: impl Future<Output = Result<Value, (StatusCode, String)>>) -> Response {
        let metrics = self.metrics.webhook(path);
        metrics.in_flight.inc();
        let started = Instant::now();
        let response = match answer.await {
            Ok(review) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], review.to_string()).into_response(),
            Err((status, message)) => (status, message).into_response(),
        };
        metrics.latency.observe(started.elapsed().as_secs_f64());
        metrics.in_flight.dec();
        metrics.answered(response.status().as_u16());
        response
    }
}

/// The deadline of a hook's call: its timeout less a margin for the network and the answer.
fn call_deadline(hook: &AdmissionHook) -> Duration {
    hook.timeout - (hook.timeout / 4).min(Duration::from_secs(1))
}

async fn admit(server: &Server, plugin: &str, hook_name: &str, mutating: bool, body: &[u8]) -> Result<Value, (StatusCode, String)> {
    let Some(runner) = server.hooked.runner(plugin) else {
        server.metrics.webhook_answers(plugin, hook_name, "gone").inc();
        return Ok(review::gone(&review::uid_of(body), plugin));
    };
    let hook = runner.manifest().and_then(|m| m.hooks.admission(hook_name)).filter(|h| h.mutating == mutating).cloned();
    let Some(hook) = hook else {
        return Err((StatusCode::NOT_FOUND, format!("plugin {plugin:?} serves no {} hook {hook_name:?}", if mutating { "mutating" } else { "validating" })));
    };
    let request = review::admission(body, hook_name).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
    let uid = request.uid.clone();
    let deadline = call_deadline(&hook);
    let fail = |what: String| {
        tracing::warn!(plugin, hook = hook_name, uid, "webhook failed: {what}");
        let outcome = if hook.failure_policy == FailurePolicy::Fail { "failed-closed" } else { "failed-open" };
        server.metrics.webhook_answers(plugin, hook_name, outcome).inc();
        // An object whose name the API server has yet to generate has nothing to be about.
        if !request.name.is_empty() {
            server.events.publish(ObjectEvent {
                regarding: request.kind.clone(),
                key: ObjectKey::new(request.namespace.as_deref(), &request.name),
                uid: None,
                warning: true,
                reason: "WebhookFailed".into(),
                action: "Admit".into(),
                note: format!(
                    "hook {hook_name:?} of plugin {plugin:?} failed ({}); answered by its failure policy {}",
                    crate::excerpt::excerpt(&what, 512),
                    hook.failure_policy.as_str()
                ),
            });
        }
        Ok(review::failed(&uid, plugin, hook_name, hook.failure_policy, &what))
    };
    // The runner keeps the call within `deadline` of the plugin's own time; this bounds the
    // wall-clock too (waiting for an instance, a stalled host call).
    let verdict = match tokio::time::timeout(deadline, runner.admit(&request, mutating, deadline)).await {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(error)) => return fail(error.to_string()),
        Err(_) => return fail(format!("no answer within {} ms", deadline.as_millis())),
    };
    let outcome = if matches!(verdict, crate::hooks::Verdict::Allowed { .. }) { "allowed" } else { "denied" };
    match review::admission_answer(&uid, &request, verdict) {
        Ok(answer) => {
            server.metrics.webhook_answers(plugin, hook_name, outcome).inc();
            Ok(answer)
        }
        Err(misanswer) => fail(format!("a wrong answer: {misanswer}")),
    }
}

async fn conversion(server: &Server, plugin: &str, body: &[u8]) -> Result<Value, (StatusCode, String)> {
    let mut request = review::conversion(body).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
    let uid = request.uid.clone();
    let failure = |message: String| {
        tracing::warn!(plugin, uid, "conversion failed: {message}");
        server.metrics.webhook_answers(plugin, "convert", "failed-closed").inc();
        Ok(review::conversion_answer(&uid, Err(format!("kubewasm: plugin {plugin:?} could not convert: {}", crate::excerpt::excerpt(&message, 1024)))))
    };
    let Some(runner) = server.hooked.runner(plugin) else {
        server.metrics.webhook_answers(plugin, "convert", "gone").inc();
        return failure("it is not served here".into());
    };
    // A review converts the objects of one custom resource.
    if let Some((group, kind)) = request.objects.first().and_then(|o| review::group_kind(o))
        && !runner.manifest().is_some_and(|m| m.hooks.converts(&group, &kind))
    {
        return Err((StatusCode::NOT_FOUND, format!("plugin {plugin:?} declares no conversion of {kind}.{group}")));
    }
    let started = Instant::now();
    let desired = request.desired.clone();
    let mut converted = Vec::with_capacity(request.objects.len());
    for batch in request.batches() {
        let Some(left) = CONVERSION_DEADLINE.checked_sub(started.elapsed()) else {
            return failure(format!("no answer within {} ms", CONVERSION_DEADLINE.as_millis()));
        };
        let answer = match tokio::time::timeout(left, runner.convert(batch.clone(), desired.clone(), left)).await {
            Ok(Ok(Ok(objects))) => objects,
            Ok(Ok(Err(refusal))) => return failure(refusal),
            Ok(Err(error)) => return failure(error.to_string()),
            Err(_) => return failure(format!("no answer within {} ms", CONVERSION_DEADLINE.as_millis())),
        };
        if let Err(misanswer) = review::check_converted(&batch, &answer, &desired, converted.len()) {
            return failure(format!("a wrong answer: {misanswer}"));
        }
        converted.extend(answer);
    }
    server.metrics.webhook_answers(plugin, "convert", "allowed").inc();
    Ok(review::conversion_answer(&uid, Ok(converted)))
}
