//! A fault-injection TCP proxy on loopback, between a client (a host) and a server (the API
//! server), told at any moment to misbehave: pass traffic, black-hole it (connections stay open
//! but nothing moves either way, as on a partitioned network), delay every chunk, or reset
//! every connection (and refuse new ones until told otherwise). TLS passes through untouched:
//! the server's certificate names 127.0.0.1, where the proxy listens too.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How the proxy treats traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    /// Nothing moves; connections stay open.
    BlackHole,
    /// Each chunk waits this long.
    Delay(Duration),
    /// Every connection is closed, new ones too.
    Reset,
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (mode, rx) = watch::channel(Mode::Pass);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                let mode = rx.clone();
                tokio::spawn(async move {
                    if *mode.borrow() == Mode::Reset {
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    // When one direction ends, the other goes with it.
                    tokio::select! {
                        _ = pump(client_read, server_write, mode.clone()) => {}
                        _ = pump(server_read, client_write, mode) => {}
                    }
                });
            }
        });
        Ok(FaultProxy { addr, mode, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// A copy of the kubeconfig at `original` that reaches the server through this proxy.
    pub fn kubeconfig(&self, original: &Path, upstream_port: u16, out: &Path) -> std::io::Result<()> {
        let text = std::fs::read_to_string(original)?;
        let through = text.replace(&format!("127.0.0.1:{upstream_port}"), &self.addr.to_string());
        std::fs::write(out, through)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.mode.send_replace(Mode::Reset);
    }
}

/// Copies one direction under the current mode.
async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = mode.wait_for(|m| *m == Mode::Reset) => { let _ = changed; return }
        };
        // Hold the chunk while black-holed; drop everything on a reset.
        let current = match mode.wait_for(|m| *m != Mode::BlackHole).await {
            Ok(m) => *m,
            Err(_) => return,
        };
        match current {
            Mode::Reset => return,
            Mode::Delay(d) => tokio::time::sleep(d).await,
            Mode::Pass | Mode::BlackHole => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
