//! The one `bindgen!` of the host: Rust types and traits generated from `wit/`, the single
//! source of truth for the contract. Client calls and cache reads may reach the API server, so
//! they are async; the other imports answer from memory and stay synchronous. Every import may
//! trap, which the host uses only for its own bugs and exceeded limits — a guest's bad request
//! is an `error` value.
//!
//! The bindings are generated for the `controller` world, whose imports and exports cover the
//! `declarative` world's too. Exports are looked up interface by interface
//! ([`super::Prepared`]) rather than through a generated `ControllerPre`: a `declarative`-world
//! plugin exports no `reconciler`, `access` and `release` were added in 0.1.1, `views` in 0.1.2
//! `composite` in 0.1.3, `clusters` in 0.1.4, `projections` in 0.1.5 and `webhooks` in 0.1.6, and
//! a plugin built for an earlier version does not export them.
#![allow(unused_variables)] // the generated `types` interface has no functions

wasmtime::component::bindgen!({
    world: "controller",
    path: "../wit",
    imports: {
        "kubewasm:controller/client": async | trappable,
        "kubewasm:controller/cache": async | trappable,
        "kubewasm:controller/fleet": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

pub use self::exports::kubewasm::controller::access as access_exports;
pub use self::exports::kubewasm::controller::clusters as clusters_exports;
pub use self::exports::kubewasm::controller::composite as composite_exports;
pub use self::exports::kubewasm::controller::plugin as plugin_exports;
pub use self::exports::kubewasm::controller::projections as projections_exports;
pub use self::exports::kubewasm::controller::reconciler as reconciler_exports;
pub use self::exports::kubewasm::controller::release as release_exports;
pub use self::exports::kubewasm::controller::views as views_exports;
pub use self::exports::kubewasm::controller::webhooks as webhooks_exports;
pub use self::kubewasm::controller::{cache, client, events, fleet, log, types};

/// The WIT package and version this host implements.
pub const PACKAGE: &str = "kubewasm:controller";
pub const PACKAGE_VERSION: &str = "0.1.6";

#[cfg(test)]
mod tests {
    /// The constants name the package the bindings were generated from: every file of `wit/`.
    #[test]
    fn the_package_version_is_the_wits() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let want = format!("package {}@{};", super::PACKAGE, super::PACKAGE_VERSION);
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "wit") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert_eq!(text.lines().next(), Some(want.as_str()), "{}", path.display());
                files += 1;
            }
        }
        assert!(files >= 10, "only {files} WIT files in {}", dir.display());
    }
}
