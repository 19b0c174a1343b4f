//! `kubewasm build`: makes a plugin component from a language whose toolchain builds only core
//! WebAssembly modules — Go ([`go`]) and C ([`c`]). Each language builds a wasip1 reactor module
//! with its standard toolchain; this module makes it a component of the `controller` world (the
//! WIT package embedded in this binary, and the WASI preview1 reactor adapter of the wasmtime
//! release the host runs, from the crate `wasi-preview1-component-adapter-provider`) with the
//! `wit-component` crate, so an author needs the language's toolchain and `kubewasm`, nothing
//! else (no `wasm-tools`, no `wit-bindgen`).
//!
//! Knows nothing of what a plugin does: the SDKs provide the bindings and the exports. Owns the
//! temporary directory of one build, and writes the component with a rename, so a plugin
//! directory never sees half a file.

pub mod c;
pub mod go;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::{Resolve, SourceMap};

/// The WIT package the component's world comes from: `wit/`, embedded at compile time. Every
/// file of the package is listed (a test checks none is missing).
const WIT: &[(&str, &str)] = &[
    ("access.wit", include_str!("../../../../wit/access.wit")),
    ("cache.wit", include_str!("../../../../wit/cache.wit")),
    ("client.wit", include_str!("../../../../wit/client.wit")),
    ("clusters.wit", include_str!("../../../../wit/clusters.wit")),
    ("composite.wit", include_str!("../../../../wit/composite.wit")),
    ("events.wit", include_str!("../../../../wit/events.wit")),
    ("fleet.wit", include_str!("../../../../wit/fleet.wit")),
    ("log.wit", include_str!("../../../../wit/log.wit")),
    ("plugin.wit", include_str!("../../../../wit/plugin.wit")),
    ("projections.wit", include_str!("../../../../wit/projections.wit")),
    ("reconciler.wit", include_str!("../../../../wit/reconciler.wit")),
    ("release.wit", include_str!("../../../../wit/release.wit")),
    ("types.wit", include_str!("../../../../wit/types.wit")),
    ("views.wit", include_str!("../../../../wit/views.wit")),
    ("webhooks.wit", include_str!("../../../../wit/webhooks.wit")),
    ("world.wit", include_str!("../../../../wit/world.wit")),
];

/// The world a plugin's component implements.
const WORLD: &str = "controller";

/// The `controller` world of the embedded WIT package. An error is a bug of this binary.
fn world() -> Result<(Resolve, wit_parser::WorldId), String> {
    let mut sources = SourceMap::new();
    for (name, text) in WIT {
        sources.push_str(name, *text);
    }
    let invalid = |e: &dyn std::fmt::Display| format!("the WIT package embedded in kubewasm does not parse: {e}");
    let group = sources.parse().map_err(|(_, e)| invalid(&e))?;
    let mut resolve = Resolve::default();
    let package = resolve.push_group(group).map_err(|e| invalid(&e))?;
    let world = resolve.select_world(&[package], Some(WORLD)).map_err(|e| invalid(&e))?;
    Ok((resolve, world))
}

/// Makes a component of the `controller` world from a core module built for wasip1 (reactor):
/// embeds the world's type information (what `wasm-tools component embed` does) and wraps the
/// module with the WASI preview1 reactor adapter (`wasm-tools component new --adapt`). The
/// result is validated. Errors are messages for the plugin's author.
pub fn componentize(core: &[u8]) -> Result<Vec<u8>, String> {
    let (resolve, world) = world()?;
    let mut module = core.to_vec();
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8).map_err(|e| format!("{e:#}"))?;
    let mut encoder = ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .map_err(|e| format!("{e:#}"))?
        .adapter(
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .map_err(|e| format!("{e:#}"))?;
    encoder.encode().map_err(|e| format!("{e:#}"))
}

/// The last step of a build, the same for every language: the core module the toolchain wrote
/// made a component and installed.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("making a component of {}: {message}", .output.display())]
    Component { output: PathBuf, message: String },
}

/// What [`wrap`] made.
struct Wrapped {
    core_bytes: usize,
    component_bytes: usize,
    took: Duration,
}

/// Reads the core module at `core`, makes it a component ([`componentize`]) and writes that to
/// `output` through `scratch` ([`install`]).
fn wrap(scratch: &Path, core: &Path, output: &Path) -> Result<Wrapped, WrapError> {
    let started = Instant::now();
    let module = std::fs::read(core).map_err(|source| WrapError::Io { path: core.to_path_buf(), source })?;
    let component = componentize(&module).map_err(|message| WrapError::Component { output: output.to_path_buf(), message })?;
    let took = started.elapsed();
    install(scratch, &component, output).map_err(|source| WrapError::Io { path: output.to_path_buf(), source })?;
    Ok(Wrapped { core_bytes: module.len(), component_bytes: component.len(), took })
}

/// What a failed toolchain command printed, stdout then stderr, for the author.
fn printed(output: &std::process::Output) -> String {
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim_end().to_string()
}

/// A build's scratch directory, beside the output (so the final rename stays on one file system).
fn scratch_beside(output: &Path) -> std::io::Result<tempfile::TempDir> {
    let out_dir = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    tempfile::Builder::new().prefix(".kubewasm-build-").tempdir_in(out_dir)
}

/// Writes the component to `output` through a file in `scratch` and a rename.
fn install(scratch: &Path, component: &[u8], output: &Path) -> std::io::Result<()> {
    let partial = scratch.join("component.wasm");
    std::fs::write(&partial, component)?;
    std::fs::rename(&partial, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_wit_is_the_whole_package() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let mut on_disk: Vec<String> =
            std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".wit")).collect();
        on_disk.sort();
        let embedded: Vec<String> = WIT.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, on_disk, "list every file of wit/ in build::WIT");
        let (resolve, world) = world().unwrap();
        assert_eq!(resolve.worlds[world].name, WORLD);
    }

    #[test]
    fn a_core_module_that_is_not_a_plugin_is_refused_with_a_message() {
        // An empty core module exports nothing the world needs.
        let empty = b"\0asm\x01\0\0\0".to_vec();
        let error = componentize(&empty).unwrap_err();
        assert!(error.contains("plugin") || error.contains("export") || error.contains("missing"), "{error}");
        let error = componentize(b"not wasm").unwrap_err();
        assert!(!error.is_empty());
    }
}
