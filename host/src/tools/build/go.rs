//! Go plugins (`kubewasm build --lang go`): builds a Go main package with the standard Go
//! toolchain into a core WebAssembly module (`GOOS=wasip1 GOARCH=wasm go build
//! -buildmode=c-shared`), which [`super::componentize`] makes a component, so a Go author needs
//! Go and `kubewasm`, nothing else (no TinyGo). The Go SDK (`plugins/go`) provides the bindings
//! and the exports.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Go toolchain the SDK is built and tested with; older ones lack `//go:wasmexport` (1.24)
/// or were not tried.
const MIN_GO: (u32, u32) = (1, 24);

#[derive(Debug, thiserror::Error)]
pub enum GoBuildError {
    #[error("{}: not a Go module directory (no go.mod); give the directory of the plugin's main package", .0.display())]
    NotAModule(PathBuf),
    #[error("building a Go plugin needs the Go toolchain ({}.{} or newer) on PATH, and `{go}` could not be run: {source}", MIN_GO.0, MIN_GO.1)]
    GoMissing {
        go: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{version} is too old to build plugins: install Go {}.{} or newer", MIN_GO.0, MIN_GO.1, version = .0)]
    GoTooOld(String),
    #[error("`go build` failed ({status}):\n{output}")]
    GoBuild { status: String, output: String },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Wrap(#[from] super::WrapError),
}

/// What to build.
#[derive(Debug, Clone)]
pub struct GoBuild {
    /// The directory of the plugin's main package (with its go.mod, or below it).
    pub dir: PathBuf,
    /// Where the component goes.
    pub output: PathBuf,
    /// The `go` command (default `go` from PATH).
    pub go: OsString,
    /// Extra arguments for `go build` (e.g. `-tags=...`); `GOFLAGS` in the environment applies
    /// too.
    pub go_args: Vec<String>,
}

impl GoBuild {
    pub fn new(dir: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        GoBuild { dir: dir.into(), output: output.into(), go: "go".into(), go_args: Vec::new() }
    }
}

/// What a build made.
#[derive(Debug, Clone)]
pub struct Built {
    pub output: PathBuf,
    /// Size of the core module `go build` made, and of the component.
    pub core_bytes: usize,
    pub component_bytes: usize,
    pub go_version: String,
    /// Time in `go build`, and in making the component.
    pub go_build: Duration,
    pub componentize: Duration,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GoBuildError + '_ {
    move |source| GoBuildError::Io { path: path.to_path_buf(), source }
}

/// Whether `dir` or one of its parents holds a go.mod.
fn in_module(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join("go.mod").is_file())
}

/// `go version`'s answer (`go1.26.8`), checked against [`MIN_GO`].
fn go_version(go: &OsString) -> Result<String, GoBuildError> {
    let go_name = go.to_string_lossy().into_owned();
    let output =
        Command::new(go).args(["env", "GOVERSION"]).stdin(Stdio::null()).output().map_err(|source| GoBuildError::GoMissing { go: go_name.clone(), source })?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let numbers: Vec<u32> = version.trim_start_matches("go").split(['.', '-', ' ']).take(2).map_while(|n| n.parse().ok()).collect();
    match numbers.as_slice() {
        [major, minor] if (*major, *minor) >= MIN_GO => Ok(version),
        [_, _] => Err(GoBuildError::GoTooOld(version)),
        // A development toolchain ("devel go1.27-..."): let it try.
        _ => Ok(if version.is_empty() { "go (unknown version)".into() } else { version }),
    }
}

/// Builds the Go plugin in `build.dir` into the component `build.output`.
pub fn build(build: &GoBuild) -> Result<Built, GoBuildError> {
    let dir = build.dir.canonicalize().map_err(io(&build.dir))?;
    if !in_module(&dir) {
        return Err(GoBuildError::NotAModule(build.dir.clone()));
    }
    let go_version = go_version(&build.go)?;
    let scratch = super::scratch_beside(&build.output).map_err(io(&build.output))?;
    let core = scratch.path().join("core.wasm");

    let started = Instant::now();
    let output = Command::new(&build.go)
        .current_dir(&dir)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        // c-shared: a reactor whose //go:wasmexport functions are the WIT exports; the bindings'
        // allocator links runtime.sbrk, which -checklinkname=0 allows.
        .args(["build", "-buildmode=c-shared", "-trimpath", "-ldflags=-checklinkname=0", "-o"])
        .arg(&core)
        .args(&build.go_args)
        .arg(".")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| GoBuildError::GoMissing { go: build.go.to_string_lossy().into_owned(), source })?;
    if !output.status.success() {
        return Err(GoBuildError::GoBuild { status: output.status.to_string(), output: super::printed(&output) });
    }
    let go_build = started.elapsed();

    let wrapped = super::wrap(scratch.path(), &core, &build.output)?;
    Ok(Built {
        output: build.output.clone(),
        core_bytes: wrapped.core_bytes,
        component_bytes: wrapped.component_bytes,
        go_version,
        go_build,
        componentize: wrapped.took,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_go_mod_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = build(&GoBuild::new(dir.path(), dir.path().join("p.wasm"))).unwrap_err();
        assert!(matches!(error, GoBuildError::NotAModule(_)), "{error}");
        assert!(error.to_string().contains("go.mod"), "{error}");
    }
}
