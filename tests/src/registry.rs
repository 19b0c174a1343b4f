//! An OCI registry on loopback for the delivery tests: go-containerregistry's in-memory registry
//! (`tests/tools/registry/`), or the CNCF distribution registry
//! (`tests/tools/distribution/`, [`Registry::start_distribution`]), built once per machine like
//! the control plane and started per test.
//! Plain HTTP, as registries on loopback are. It can be told to serve corrupted blobs (a digest
//! mismatch a client must catch) and to leave the Location header off a finished blob upload (as
//! `crane registry serve` does); for an unreachable registry put a [`crate::proxy::FaultProxy`]
//! in front of it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use crate::build::{BuildError, Tool, go_tool};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("starting the registry: {0}")]
    Start(#[source] std::io::Error),
    #[error("the registry did not say where it listens (its output: {0:?})")]
    NoAddress(String),
    #[error("switching the registry's {0}: {1}")]
    Switch(&'static str, #[source] std::io::Error),
}

/// A running registry; stopped when dropped.
pub struct Registry {
    child: Child,
    addr: SocketAddr,
}

impl Registry {
    pub fn start() -> Result<Registry, RegistryError> {
        Self::start_tool(Tool::Registry)
    }

    /// The distribution registry; it has none of [`Registry::start`]'s switches.
    pub fn start_distribution() -> Result<Registry, RegistryError> {
        Self::start_tool(Tool::Distribution)
    }

    fn start_tool(tool: Tool) -> Result<Registry, RegistryError> {
        let bin = go_tool(tool)?;
        let mut cmd = Command::new(bin);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = crate::process::spawn_tied(cmd).map_err(RegistryError::Start)?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).map_err(RegistryError::Start)?;
        let addr = line.trim().strip_prefix("listening on ").and_then(|a| a.parse().ok()).ok_or_else(|| RegistryError::NoAddress(line.clone()))?;
        Ok(Registry { child, addr })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT`, the registry part of a reference.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Corrupts (or stops corrupting) every blob served from now on.
    pub fn tamper(&self, on: bool) -> Result<(), RegistryError> {
        self.switch("tamper", on)
    }

    /// Leaves (or stops leaving) the Location header off every finished blob upload from now on.
    pub fn omit_location(&self, on: bool) -> Result<(), RegistryError> {
        self.switch("omit-location", on)
    }

    /// Turns the registry's `/-/NAME` switch on (POST) or off (DELETE).
    fn switch(&self, name: &'static str, on: bool) -> Result<(), RegistryError> {
        use std::io::{Read, Write};
        let fail = |e| RegistryError::Switch(name, e);
        let mut stream = std::net::TcpStream::connect(self.addr).map_err(fail)?;
        let method = if on { "POST" } else { "DELETE" };
        write!(stream, "{method} /-/{name} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.addr).map_err(fail)?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).map_err(fail)?;
        if answer.starts_with("HTTP/1.1 204") { Ok(()) } else { Err(fail(std::io::Error::other(answer))) }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
