//! Plugins as files: reading a `.wasm` (and its `NAME.toml` settings), its digest, the artifact
//! cache, and loading — check the file, compile or fetch the artifact, ask the plugin to
//! describe itself, validate. What a loaded plugin then does is the controller's business.

pub mod artifact;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use self::artifact::{ArtifactCache, Origin};
use crate::manifest::LimitPolicy;
use crate::runtime::{DescribeError, Described, Prepared, Runtime, RuntimeError};

/// The sha256 of a plugin file: its identity. Same digest, same plugin.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

/// Why a plugin file could not be loaded. Each variant names the step that failed; the message
/// says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("it is not WebAssembly (no \\0asm header)")]
    NotWebAssembly,
    #[error("it is truncated ({0} bytes)")]
    Truncated(usize),
    #[error(
        "it is a core WebAssembly module, not a component: build Rust plugins with `--target wasm32-wasip2`, or wrap the module with `wasm-tools component new`"
    )]
    CoreModule,
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    #[error("settings file {path}: {message}")]
    Settings { path: PathBuf, message: String },
    #[error("{0}")]
    Describe(#[from] DescribeError),
    #[error("compilation was interrupted: {0}")]
    Interrupted(String),
}

/// A plugin file, loaded and described, ready to run.
#[derive(Clone)]
pub struct LoadedPlugin {
    pub path: PathBuf,
    pub digest: Digest,
    pub prepared: Prepared,
    pub described: Described,
    /// The settings as JSON text, for every new instance's `describe`.
    pub settings: String,
    pub origin: Origin,
    pub load_time: Duration,
}

impl fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("name", &self.described.manifest.name)
            .field("version", &self.described.manifest.version)
            .finish_non_exhaustive()
    }
}

/// Loads plugin files: one compilation at a time (compiling a Python or JS component peaks at
/// hundreds of MB), artifacts cached on disk.
pub struct Loader {
    runtime: Arc<Runtime>,
    artifacts: Option<Arc<ArtifactCache>>,
    policy: LimitPolicy,
    compiling: tokio::sync::Mutex<()>,
}

impl Loader {
    pub fn new(runtime: Arc<Runtime>, artifacts: Option<ArtifactCache>, policy: LimitPolicy) -> Self {
        Loader { runtime, artifacts: artifacts.map(Arc::new), policy, compiling: Default::default() }
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Reads, checks, compiles (or fetches) and describes the plugin at `path`, with the
    /// settings in `NAME.toml` beside it.
    pub async fn load(&self, path: &Path) -> Result<LoadedPlugin, LoadError> {
        let started = Instant::now();
        let wasm = tokio::fs::read(path).await.map_err(LoadError::Read)?;
        check_header(&wasm)?;
        let settings = read_settings(path).await?;
        let digest = Digest::of(&wasm);

        let (component, origin) = {
            let _one_at_a_time = self.compiling.lock().await;
            let runtime = self.runtime.clone();
            let artifacts = self.artifacts.clone();
            tokio::task::spawn_blocking(move || match artifacts {
                Some(cache) => cache.load_or_compile(&runtime, &digest, &wasm),
                None => runtime.compile(&wasm).map(|c| (c, Origin::Compiled)),
            })
            .await
            .map_err(|e| LoadError::Interrupted(e.to_string()))??
        };
        let prepared = self.runtime.prepare(&component)?;
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let described = self.runtime.describe(&prepared, &file_name, &settings, &self.policy).await?;
        Ok(LoadedPlugin {
            path: path.to_path_buf(),
            digest,
            prepared,
            described,
            settings,
            origin,
            load_time: started.elapsed(),
        })
    }
}

/// Tells a component from a core module, and both from anything else, before compiling.
fn check_header(wasm: &[u8]) -> Result<(), LoadError> {
    const MAGIC: &[u8] = b"\0asm";
    const COMPONENT_LAYER: [u8; 2] = [1, 0];
    if !wasm.starts_with(MAGIC) {
        return Err(LoadError::NotWebAssembly);
    }
    if wasm.len() < 8 {
        return Err(LoadError::Truncated(wasm.len()));
    }
    if wasm[6..8] != COMPONENT_LAYER {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

/// The settings beside the plugin (`NAME.toml`) as JSON text; "{}" when there are none.
pub async fn read_settings(wasm: &Path) -> Result<String, LoadError> {
    let path = wasm.with_extension("toml");
    let text = match tokio::fs::read_to_string(&path).await {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok("{}".into()),
        Err(e) => return Err(LoadError::Settings { path, message: e.to_string() }),
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| LoadError::Settings {
        path: path.clone(),
        message: e.message().to_string(),
    })?;
    serde_json::to_string(&table).map_err(|e| LoadError::Settings { path, message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_told_apart() {
        assert!(matches!(check_header(b"hello world"), Err(LoadError::NotWebAssembly)));
        assert!(matches!(check_header(b"\0asm\x0d"), Err(LoadError::Truncated(5))));
        assert!(matches!(check_header(b"\0asm\x01\0\0\0"), Err(LoadError::CoreModule)));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[tokio::test]
    async fn settings_come_from_toml_beside_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        assert_eq!(read_settings(&wasm).await.unwrap(), "{}");
        std::fs::write(dir.path().join("p.toml"), "maxUnavailable = 2\n[nested]\nkey = \"v\"\n").unwrap();
        let json: serde_json::Value = serde_json::from_str(&read_settings(&wasm).await.unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"maxUnavailable": 2, "nested": {"key": "v"}}));
        std::fs::write(dir.path().join("p.toml"), "maxUnavailable = ").unwrap();
        let err = read_settings(&wasm).await.unwrap_err().to_string();
        assert!(err.contains("p.toml"), "{err}");
    }
}
