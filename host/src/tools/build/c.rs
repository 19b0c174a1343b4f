//! C plugins (`kubewasm build --lang c`): compiles every `.c` file of a directory, with the C SDK
//! (`plugins/c/src`, embedded in this binary: a C author copies nothing), into a core WebAssembly
//! module with clang for `wasm32-wasi` and wasi-libc (`-mexec-model=reactor`), which
//! [`super::componentize`] makes a component. Debian packages the toolchain: `clang-16 lld-16
//! wasi-libc libclang-rt-16-dev-wasm32`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The C SDK: its header, its sources and the bindings `wit-bindgen c` generated from `wit/`
/// (`plugins/c/scripts/generate.sh`). Every file of `plugins/c/src` is listed (a test checks).
const SDK: &[(&str, &str)] = &[
    ("boundary.h", include_str!("../../../../plugins/c/src/boundary.h")),
    ("call.c", include_str!("../../../../plugins/c/src/call.c")),
    ("controller.c", include_str!("../../../../plugins/c/src/controller.c")),
    ("controller.h", include_str!("../../../../plugins/c/src/controller.h")),
    ("exports.c", include_str!("../../../../plugins/c/src/exports.c")),
    ("host.c", include_str!("../../../../plugins/c/src/host.c")),
    ("json.c", include_str!("../../../../plugins/c/src/json.c")),
    ("json.h", include_str!("../../../../plugins/c/src/json.h")),
    ("kubewasm.h", include_str!("../../../../plugins/c/src/kubewasm.h")),
];

/// The compilers tried, in order, when `$CC` is not set: Debian's versioned clang first (the one
/// its `libclang-rt-16-dev-wasm32` belongs to).
const COMPILERS: &[&str] = &["clang-16", "clang"];

/// What a C author installs on Debian or Ubuntu to build plugins.
const TOOLCHAIN_HINT: &str = "apt-get install clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32";

#[derive(Debug, thiserror::Error)]
pub enum CBuildError {
    #[error("{}: no .c files there; give the directory of the plugin's C sources", .0.display())]
    NoSources(PathBuf),
    #[error("building a C plugin needs clang for wasm32-wasi with wasi-libc ({TOOLCHAIN_HINT}), and no compiler could be run ({tried})")]
    CompilerMissing { tried: String },
    #[error("`{compiler}` failed ({status}):\n{output}{}", install_hint(*.toolchain_missing))]
    Compile { compiler: String, status: String, output: String, toolchain_missing: bool },
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
pub struct CBuild {
    /// The directory of the plugin's `.c` files (its headers beside them).
    pub dir: PathBuf,
    /// Where the component goes.
    pub output: PathBuf,
    /// The compiler: `$CC` if set, else the first of [`COMPILERS`] that runs.
    pub compiler: Option<OsString>,
    /// Extra compiler arguments (`-DNAME=VALUE`, `-O2`, ...): `$CFLAGS`, split on whitespace.
    pub cflags: Vec<String>,
}

impl CBuild {
    /// A build with the compiler and flags of the environment (`CC`, `CFLAGS`).
    pub fn new(dir: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        let cflags = std::env::var("CFLAGS").map(|f| f.split_whitespace().map(String::from).collect()).unwrap_or_default();
        CBuild { dir: dir.into(), output: output.into(), compiler: std::env::var_os("CC").filter(|c| !c.is_empty()), cflags }
    }
}

/// What a build made.
#[derive(Debug, Clone)]
pub struct Built {
    pub output: PathBuf,
    pub core_bytes: usize,
    pub component_bytes: usize,
    /// Time in the compiler, and in making the component.
    pub compile: Duration,
    pub componentize: Duration,
}

/// The line a compile error ends with when the compiler lacks the WebAssembly sysroot or runtime.
fn install_hint(toolchain_missing: bool) -> String {
    if toolchain_missing { format!("\n(is the wasm32-wasi toolchain installed? {TOOLCHAIN_HINT})") } else { String::new() }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CBuildError + '_ {
    move |source| CBuildError::Io { path: path.to_path_buf(), source }
}

/// The `.c` files of `dir`, sorted (so a build is the same whatever the directory's order).
fn sources(dir: &Path) -> Result<Vec<PathBuf>, CBuildError> {
    let mut sources: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(io(dir))?.flatten().map(|e| e.path()).filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "c")).collect();
    if sources.is_empty() {
        return Err(CBuildError::NoSources(dir.to_path_buf()));
    }
    sources.sort();
    Ok(sources)
}

/// The compiler to run: the one asked for, or the first of [`COMPILERS`] that answers.
fn compiler(asked: Option<&OsString>) -> Result<OsString, CBuildError> {
    let candidates: Vec<OsString> = match asked {
        Some(cc) => vec![cc.clone()],
        None => COMPILERS.iter().map(OsString::from).collect(),
    };
    for candidate in &candidates {
        let runs = Command::new(candidate).arg("--version").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
        if runs.is_ok_and(|s| s.success()) {
            return Ok(candidate.clone());
        }
    }
    Err(CBuildError::CompilerMissing { tried: candidates.iter().map(|c| c.to_string_lossy().into_owned()).collect::<Vec<_>>().join(", ") })
}

/// Builds the C plugin in `build.dir` into the component `build.output`.
pub fn build(build: &CBuild) -> Result<Built, CBuildError> {
    let dir = build.dir.canonicalize().map_err(io(&build.dir))?;
    let sources = sources(&dir)?;
    let compiler = compiler(build.compiler.as_ref())?;
    let scratch = super::scratch_beside(&build.output).map_err(io(&build.output))?;
    let sdk = scratch.path().join("sdk");
    std::fs::create_dir(&sdk).map_err(io(&sdk))?;
    for (name, text) in SDK {
        std::fs::write(sdk.join(name), text).map_err(io(&sdk.join(name)))?;
    }
    let core = scratch.path().join("core.wasm");

    let started = Instant::now();
    let output = Command::new(&compiler)
        .current_dir(&dir)
        // A reactor: no main; the SDK's export_name functions are the WIT exports.
        .args(["--target=wasm32-wasi", "-mexec-model=reactor", "-std=c11", "-Os", "-Wall"])
        .arg("-I")
        .arg(&sdk)
        .args(&build.cflags)
        .arg("-o")
        .arg(&core)
        .args(&sources)
        .args(SDK.iter().filter(|(name, _)| name.ends_with(".c")).map(|(name, _)| sdk.join(name)))
        .stdin(Stdio::null())
        .output()
        .map_err(|_| CBuildError::CompilerMissing { tried: compiler.to_string_lossy().into_owned() })?;
    if !output.status.success() {
        let text = super::printed(&output);
        // The usual first failure: a clang without the WebAssembly sysroot or runtime.
        let toolchain = ["stdlib.h' file not found", "libclang_rt.builtins-wasm32", "wasm-ld", "unable to execute command"];
        let toolchain_missing = toolchain.iter().any(|t| text.contains(t));
        return Err(CBuildError::Compile {
            compiler: compiler.to_string_lossy().into_owned(),
            status: output.status.to_string(),
            output: text,
            toolchain_missing,
        });
    }
    let compile = started.elapsed();

    let wrapped = super::wrap(scratch.path(), &core, &build.output)?;
    Ok(Built { output: build.output.clone(), core_bytes: wrapped.core_bytes, component_bytes: wrapped.component_bytes, compile, componentize: wrapped.took })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_sdk_is_the_whole_sdk() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/c/src");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        on_disk.sort();
        let embedded: Vec<String> = SDK.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, on_disk, "list every file of plugins/c/src in build::c::SDK");
    }

    /// The digest `plugins/c/scripts/generate.sh` records: wit/'s files by name, without
    /// comments, whitespace collapsed (what the bindings depend on).
    fn wit_digest() -> String {
        use sha2::{Digest, Sha256};
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "wit")).collect();
        files.sort();
        let mut hasher = Sha256::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let uncommented: String = text.lines().map(|line| line.split_once("//").map_or(line, |(code, _)| code)).collect::<Vec<_>>().join("\n");
            let body = uncommented.split_whitespace().collect::<Vec<_>>().join(" ");
            hasher.update(format!("{}\0{body}\0", file.file_name().unwrap().to_string_lossy()));
        }
        hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_bindings_were_generated_from_this_wit() {
        let recorded = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/c/wit.sha256")).unwrap();
        assert_eq!(recorded.trim(), wit_digest(), "wit/ changed since the C bindings were generated: run plugins/c/scripts/generate.sh");
    }

    #[test]
    fn a_directory_without_c_files_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.go"), "package main").unwrap();
        let error = build(&CBuild::new(dir.path(), dir.path().join("p.wasm"))).unwrap_err();
        assert!(matches!(error, CBuildError::NoSources(_)), "{error}");
        assert!(error.to_string().contains(".c files"), "{error}");
    }

    #[test]
    fn a_missing_compiler_names_the_packages_to_install() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.c"), "int x;").unwrap();
        let mut build_ = CBuild::new(dir.path(), dir.path().join("p.wasm"));
        build_.compiler = Some("no-such-clang-kubewasm".into());
        let error = build(&build_).unwrap_err();
        assert!(matches!(error, CBuildError::CompilerMissing { .. }), "{error}");
        assert!(error.to_string().contains("wasi-libc") && error.to_string().contains("no-such-clang-kubewasm"), "{error}");
    }
}
