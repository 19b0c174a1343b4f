//! The host's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process serves) and
//! `/readyz` (every plugin's caches have synced; a standby is ready too). Metrics and probes
//! listen on separate addresses, as in controller-runtime, or share one.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Says whether the host is ready, and if not, why.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

fn metrics_routes(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { ([(header::CONTENT_TYPE, Metrics::CONTENT_TYPE)], metrics.encode()) }
        }),
    )
}

fn probe_routes(ready: Readiness) -> Router {
    Router::new().route("/healthz", get(|| async { "ok" })).route(
        "/readyz",
        get(move || {
            let ready = ready.clone();
            async move {
                match ready() {
                    Ok(()) => (StatusCode::OK, "ok".to_string()).into_response(),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
                }
            }
        }),
    )
}

/// Binds the endpoints and serves them until `shutdown`. Returns the bound addresses (useful
/// with port 0) once listening.
pub async fn serve(
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Readiness,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, SocketAddr), ServerError> {
    let routers = if metrics_addr == health_addr {
        vec![(metrics_addr, metrics_routes(metrics).merge(probe_routes(ready)))]
    } else {
        vec![(metrics_addr, metrics_routes(metrics)), (health_addr, probe_routes(ready))]
    };
    let mut bound = Vec::new();
    for (addr, router) in routers {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServerError::Bind { addr, source })?;
        let local = listener.local_addr().map_err(|source| ServerError::Bind { addr, source })?;
        bound.push(local);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, router).with_graceful_shutdown(async move { shutdown.cancelled().await }).await;
            if let Err(e) = served {
                tracing::error!(%local, "HTTP endpoint failed: {e}");
            }
        });
    }
    Ok((bound[0], *bound.last().expect("at least one listener")))
}
