//! Builds the workspace's WebAssembly guests (test plugins, examples) for `wasm32-wasip2` once per
//! test process and hands out the paths of the resulting components.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

/// The component built from workspace package `package` (a `cdylib` or `bin` crate), building it
/// on first use. `artifact` is the output file stem (`faulty_guest` for a lib, the bin name for a
/// bin).
pub fn guest(package: &str, artifact: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(path) = built.get(package) {
        return path.clone();
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2", "-p", package])
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {package}: {e}"));
    assert!(status.success(), "building {package} for wasm32-wasip2 failed (is the target installed? `rustup target add wasm32-wasip2`)");
    let path = target_dir().join("wasm32-wasip2/release").join(format!("{artifact}.wasm"));
    assert!(path.exists(), "{package} built, but {} is missing", path.display());
    built.insert(package.to_string(), path.clone());
    path
}

/// Copies a guest into `dir` as `name.wasm` (plugins are loaded from directories), with optional
/// settings written to `name.toml`.
pub fn install(guest: &Path, dir: &Path, name: &str, settings: Option<&str>) -> PathBuf {
    let target = dir.join(format!("{name}.wasm"));
    std::fs::copy(guest, &target).unwrap_or_else(|e| panic!("copy {} to {}: {e}", guest.display(), target.display()));
    if let Some(settings) = settings {
        std::fs::write(dir.join(format!("{name}.toml")), settings).expect("write settings");
    }
    target
}
