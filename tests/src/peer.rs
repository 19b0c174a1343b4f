//! The controller-runtime peer (`tests/peers/controller-runtime`) as child processes, for the
//! benchmarks that run it side by side with kubewasm: started, waited for until ready, stopped.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::process;

/// One controller-runtime process.
pub struct Peer {
    child: Child,
    health: SocketAddr,
    log: PathBuf,
}

/// Peer processes and the directory of their logs.
pub struct Peers {
    peers: Vec<Peer>,
    _logs: tempfile::TempDir,
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

/// The status code of `GET path` on `addr`, if it answers.
async fn status_code(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// Starts a peer running `controllers` (comma-separated), its output going to `log`.
fn spawn(bin: &Path, kubeconfig: &Path, namespace: &str, controllers: &str, log: &Path) -> Peer {
    let health = free_port();
    let file = std::fs::File::create(log).unwrap();
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={namespace}"))
        .arg(format!("--controllers={controllers}"))
        // Served as kubewasm serves its own, on a port nobody needs to know.
        .arg("--metrics-addr=127.0.0.1:0")
        .arg(format!("--health-addr={health}"))
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    let child = process::spawn_tied(cmd).expect("the peer starts");
    Peer { child, health, log: log.to_path_buf() }
}

impl Peers {
    /// Starts one peer process per entry of `groups` (each a comma-separated list of controllers)
    /// serving `namespace`, and waits (up to `timeout`) until every one is ready: its ConfigMap
    /// informer synced.
    pub async fn start(bin: &Path, kubeconfig: &Path, namespace: &str, groups: &[String], timeout: Duration) -> Peers {
        let logs = tempfile::Builder::new().prefix("kubewasm-peers-").tempdir().unwrap();
        let mut peers: Vec<Peer> = groups
            .iter()
            .enumerate()
            .map(|(i, controllers)| spawn(bin, kubeconfig, namespace, controllers, &logs.path().join(format!("peer-{i}.log"))))
            .collect();
        let deadline = Instant::now() + timeout;
        for (peer, controllers) in peers.iter_mut().zip(groups) {
            while status_code(peer.health, "/readyz").await != Some(200) {
                let log = || std::fs::read_to_string(&peer.log).unwrap_or_default();
                if let Some(status) = peer.child.try_wait().unwrap() {
                    // The port picked for it can be taken before it binds it (another peer's
                    // connection to the API server may get it): start it again on another.
                    assert!(log().contains("address already in use"), "a peer exited ({status}):\n{}", log());
                    *peer = spawn(bin, kubeconfig, namespace, controllers, &peer.log.clone());
                    continue;
                }
                assert!(Instant::now() < deadline, "a peer did not get ready:\n{}", log());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Peers { peers, _logs: logs }
    }

    pub fn pids(&self) -> Vec<u32> {
        self.peers.iter().map(|p| p.child.id()).collect()
    }

    /// Stops every peer: all told at once, so that they shut down in parallel, then each reaped.
    pub async fn stop(self) {
        for peer in &self.peers {
            process::signal(peer.child.id(), libc::SIGTERM);
        }
        let Peers { peers, _logs } = self;
        tokio::task::spawn_blocking(move || {
            for peer in peers {
                process::terminate_pid(peer.child.id(), Duration::from_secs(15));
            }
        })
        .await
        .unwrap();
    }
}
