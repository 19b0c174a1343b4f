//! A registry on loopback that plays the attacker for the delivery tests: plain tokio, HTTP/1.1,
//! one response per connection. Each repository misbehaves in its own way (see [`Behaviour`]);
//! every one serves a well-formed Wasm artifact manifest first (unless the manifest is the
//! attack), so that a host gets as far as the part that misbehaves. Answers `/v2/` like a
//! registry without authentication.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Text a response body carries that must never show up in a Plugin's status or Events.
pub const MARKER: &str = "kubewasm-hostile-registry-marker-7f3a";

/// What a repository does, by its last path segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `endless`: the module never ends (its manifest declares `declared` bytes).
    Endless,
    /// `larger`: the module is 16 MiB, its manifest declares 1000 bytes; no Content-Length.
    Larger,
    /// `huge-manifest`: the manifest is endless (claims 8 GiB); HEAD names no digest.
    HugeManifest,
    /// `trickle`: the manifest arrives one byte every 29 s.
    Trickle,
    /// `redirect`: the module is a redirect to [`HostileRegistry::redirect_to`].
    Redirect,
    /// `not-found`: the module is a redirect to a 404 page of this registry holding [`MARKER`].
    NotFound,
    /// `missing`: the manifest is a 404 page holding [`MARKER`].
    Missing,
}

impl Behaviour {
    fn of(repository: &str) -> Option<Behaviour> {
        Some(match repository.rsplit('/').next()? {
            "endless" => Behaviour::Endless,
            "larger" => Behaviour::Larger,
            "huge-manifest" => Behaviour::HugeManifest,
            "trickle" => Behaviour::Trickle,
            "redirect" => Behaviour::Redirect,
            "not-found" => Behaviour::NotFound,
            "missing" => Behaviour::Missing,
            _ => return None,
        })
    }
}

struct Shared {
    /// The size the `endless` manifest declares.
    declared: u64,
    redirect_to: Mutex<String>,
    addr: SocketAddr,
}

/// Runs until dropped.
pub struct HostileRegistry {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl HostileRegistry {
    /// `declared`: the module size the `endless` repository's manifest declares.
    pub async fn start(declared: u64) -> std::io::Result<HostileRegistry> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let shared = Arc::new(Shared { declared, redirect_to: Mutex::new(String::new()), addr: listener.local_addr()? });
        let serving = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, serving.clone()));
            }
        });
        Ok(HostileRegistry { shared, task })
    }

    /// `127.0.0.1:PORT`, the registry part of a reference.
    pub fn host(&self) -> String {
        self.shared.addr.to_string()
    }

    /// Where the `redirect` repository sends its module.
    pub fn redirect_to(&self, url: &str) {
        *self.shared.redirect_to.lock().unwrap() = url.to_string();
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// A Wasm artifact manifest naming a module of `size` bytes with `layer` as its digest.
fn manifest(layer: &str, size: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": digest(b"{}"), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": layer, "size": size}],
    }))
    .expect("JSON")
}

fn manifest_of(behaviour: Behaviour, shared: &Shared) -> Vec<u8> {
    let small = vec![b'a'; 1000];
    match behaviour {
        Behaviour::Endless => manifest(&digest(b"never all of it"), shared.declared),
        _ => manifest(&digest(&small), small.len() as u64),
    }
}

async fn head(stream: &mut TcpStream, status: &str, headers: &[(&str, String)]) -> std::io::Result<()> {
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).await
}

async fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    head(stream, status, &[("Content-Type", content_type.into()), ("Content-Length", body.len().to_string())]).await?;
    stream.write_all(body).await
}

/// Writes bytes forever (until the client goes), in 64 KiB pieces.
async fn forever(stream: &mut TcpStream) -> std::io::Result<()> {
    let chunk = vec![b'x'; 64 << 10];
    loop {
        stream.write_all(&chunk).await?;
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = answer(&mut stream, &shared).await;
}

async fn answer(stream: &mut TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || request.len() > 64 << 10 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&request).into_owned();
    let mut words = text.split_whitespace();
    let (method, path) = (words.next().unwrap_or_default().to_string(), words.next().unwrap_or_default().to_string());
    let is_head = method == "HEAD";
    if path == "/v2/" {
        return respond(stream, "200 OK", "application/json", b"{}").await;
    }
    if path == "/page404" {
        return respond(stream, "404 Not Found", "text/html", format!("<html>{MARKER}</html>").as_bytes()).await;
    }
    let Some(rest) = path.strip_prefix("/v2/") else { return respond(stream, "404 Not Found", "text/plain", MARKER.as_bytes()).await };
    let (repository, kind) = match (rest.rsplit_once("/manifests/"), rest.rsplit_once("/blobs/")) {
        (Some((repository, _)), _) => (repository, "manifests"),
        (_, Some((repository, _))) => (repository, "blobs"),
        _ => return respond(stream, "404 Not Found", "text/plain", MARKER.as_bytes()).await,
    };
    let Some(behaviour) = Behaviour::of(repository) else { return respond(stream, "404 Not Found", "text/plain", MARKER.as_bytes()).await };
    let media = "application/vnd.oci.image.manifest.v1+json".to_string();
    match (kind, behaviour) {
        ("manifests", Behaviour::Missing) => respond(stream, "404 Not Found", "text/html", format!("<html><body>{MARKER}</body></html>").as_bytes()).await,
        ("manifests", Behaviour::HugeManifest) if is_head => {
            head(stream, "200 OK", &[("Content-Type", media), ("Content-Length", (8u64 << 30).to_string())]).await
        }
        ("manifests", Behaviour::HugeManifest) => {
            head(stream, "200 OK", &[("Content-Type", media)]).await?;
            stream.write_all(b"{\"schemaVersion\":2,\"padding\":\"").await?;
            forever(stream).await
        }
        ("manifests", behaviour) => {
            let body = manifest_of(behaviour, shared);
            let headers = [("Content-Type", media), ("Content-Length", body.len().to_string()), ("Docker-Content-Digest", digest(&body))];
            head(stream, "200 OK", &headers).await?;
            if is_head {
                return Ok(());
            }
            if behaviour == Behaviour::Trickle {
                for byte in body {
                    stream.write_all(&[byte]).await?;
                    tokio::time::sleep(Duration::from_secs(29)).await;
                }
                return Ok(());
            }
            stream.write_all(&body).await
        }
        (_, Behaviour::Endless) => {
            head(stream, "200 OK", &[("Content-Type", "application/octet-stream".into())]).await?;
            forever(stream).await
        }
        (_, Behaviour::Larger) => {
            head(stream, "200 OK", &[("Content-Type", "application/octet-stream".into())]).await?;
            let chunk = vec![b'a'; 64 << 10];
            for _ in 0..256 {
                stream.write_all(&chunk).await?;
            }
            Ok(())
        }
        (_, Behaviour::Redirect) => {
            let to = shared.redirect_to.lock().unwrap().clone();
            head(stream, "307 Temporary Redirect", &[("Location", to), ("Content-Length", "0".into())]).await
        }
        (_, Behaviour::NotFound) => {
            head(stream, "307 Temporary Redirect", &[("Location", format!("http://{}/page404", shared.addr)), ("Content-Length", "0".into())]).await
        }
        (_, _) => respond(stream, "404 Not Found", "text/plain", MARKER.as_bytes()).await,
    }
}
