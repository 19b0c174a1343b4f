//! A member cluster's API server on loopback that plays the attacker for the fleet tests: HTTPS
//! with a certificate made per run (its kubeconfig carries it inline, and a token), serving
//! enough discovery (`/api`, `/api/v1`, `/apis`) and access reviews for a host to admit a plugin
//! there and start watching, then misbehaving in one way ([`Behaviour`]). It records the
//! requests it got, to say what a host asked when a test fails.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

/// How the member misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Every list is a list that never ends (`{"items":[` then endless objects).
    EndlessList,
    /// Every list is 64 MiB (with a Content-Length).
    HugeList,
    /// Lists are empty and fine; every watch sends bytes that never make a line.
    EndlessWatchLine,
    /// Every access review (SSAR, SSRR) is a 503 with a 2 MiB `text/html` page.
    ErrorPage,
}

type Body = BoxBody<Bytes, Infallible>;

/// Runs until dropped.
pub struct HostileMember {
    kubeconfig: PathBuf,
    requests: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl HostileMember {
    pub async fn start(behaviour: Behaviour) -> Result<HostileMember, Box<dyn std::error::Error + Send + Sync>> {
        let crate::tls::LoopbackTls { certificate: cert, acceptor, listener } = crate::tls::LoopbackTls::bind().await?;
        let addr = listener.local_addr()?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let ca = base64::engine::general_purpose::STANDARD.encode(cert.pem());
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "hostile",
            "clusters": [{"name": "hostile", "cluster": {"server": format!("https://{addr}"), "certificate-authority-data": ca}}],
            "users": [{"name": "hostile", "user": {"token": "hostile-member-token"}}],
            "contexts": [{"name": "hostile", "context": {"cluster": "hostile", "user": "hostile"}}],
        });
        std::fs::write(&kubeconfig, serde_json::to_vec(&config)?)?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(serve(listener, acceptor, behaviour, requests.clone()));
        Ok(HostileMember { kubeconfig, requests, task, _dir: dir })
    }

    /// A kubeconfig of the member (inline CA and token), to engage it from.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The requests it got so far: `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for HostileMember {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, acceptor: tokio_rustls::TlsAcceptor, behaviour: Behaviour, requests: Arc<Mutex<Vec<String>>>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let (acceptor, requests) = (acceptor.clone(), requests.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper::service::service_fn(move |request| answer(request, behaviour, requests.clone()));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

fn whole(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder().status(status).header("content-type", content_type).body(Full::new(body.into()).boxed()).expect("a response")
}

fn json_answer(status: u16, value: serde_json::Value) -> Response<Body> {
    whole(status, "application/json", serde_json::to_vec(&value).expect("JSON"))
}

/// `start`, then `piece` forever (repeated to about 64 KiB a frame).
fn endless(start: &'static [u8], piece: &[u8]) -> Response<Body> {
    let piece = Bytes::from(piece.repeat((64 << 10) / piece.len()));
    let pieces = futures::stream::iter([Bytes::from_static(start)]).chain(futures::stream::repeat(piece));
    let body = StreamBody::new(pieces.map(|b| Ok::<_, Infallible>(Frame::data(b))));
    Response::builder().header("content-type", "application/json").body(BodyExt::boxed(body)).expect("a response")
}

const CONFIGMAP: &[u8] = br#"{"metadata":{"name":"x","namespace":"x","resourceVersion":"1"},"data":{"k":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}},"#;

async fn answer(request: Request<Incoming>, behaviour: Behaviour, requests: Arc<Mutex<Vec<String>>>) -> Result<Response<Body>, Infallible> {
    let path = request.uri().path().to_string();
    let watch = request.uri().query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    requests.lock().unwrap_or_else(|e| e.into_inner()).push(format!("{} {}", request.method(), request.uri()));
    let _ = request.into_body().collect().await;
    let verbs = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
    let response = match path.as_str() {
        "/api" => json_answer(200, json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})),
        "/apis" => json_answer(200, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})),
        "/api/v1" => json_answer(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap", "verbs": verbs},
                {"name": "secrets", "singularName": "secret", "namespaced": true, "kind": "Secret", "verbs": verbs},
                {"name": "events", "singularName": "event", "namespaced": true, "kind": "Event", "verbs": verbs},
                {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": verbs},
            ]}),
        ),
        p if p.ends_with("accessreviews") || p.ends_with("rulesreviews") => match behaviour {
            Behaviour::ErrorPage => {
                let mut page = b"<html><body><h1>503 Service Unavailable</h1><pre>".to_vec();
                page.resize(2 << 20, b'e');
                page.extend_from_slice(b"</pre></body></html>");
                whole(503, "text/html", page)
            }
            _ if p.ends_with("rulesreviews") => json_answer(
                201,
                json!({"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1", "spec": {}, "status": {
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}], "nonResourceRules": [], "incomplete": false}}),
            ),
            _ => json_answer(201, json!({"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1", "spec": {}, "status": {"allowed": true}})),
        },
        p if p.starts_with("/api/v1/") && !watch => match behaviour {
            Behaviour::EndlessList => endless(br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#, CONFIGMAP),
            Behaviour::HugeList => {
                let mut list = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[],"padding":""#.to_vec();
                list.resize(64 << 20, b'p');
                list.extend_from_slice(b"\"}");
                whole(200, "application/json", list)
            }
            _ => json_answer(200, json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []})),
        },
        p if p.starts_with("/api/v1/") => match behaviour {
            Behaviour::EndlessWatchLine => endless(br#"{"type":"ADDED","object":"#, b"x"),
            // The others' watches are never reached; a quiet one ends at once.
            _ => whole(200, "application/json", Bytes::new()),
        },
        _ => json_answer(404, json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})),
    };
    Ok(response)
}
