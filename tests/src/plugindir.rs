//! A host's plugin directory, as an operator changes it: atomic installs and replacements
//! (write aside, rename into place), removals, and slow non-atomic copies; plus the suite's
//! `e2e-guest` plugin (`tests/guests/e2e`), its settings, and *variants* of it made from one
//! build by patching the 16-byte marker in its data.
//!
//! Owns the directory (deleted on drop); knows nothing of hosts.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::guests;

/// The label the e2e guest's primaries carry (its default selector).
pub const PRIMARY: &str = "e2e.kubewasm.io/primary";
/// The annotation the e2e guest turns into its output.
pub const INPUT: &str = "e2e.kubewasm.io/input";
/// The label on every output of the e2e guest: `OUTPUT_LABEL=<plugin name>`.
pub const OUTPUT_LABEL: &str = "e2e.kubewasm.io/plugin";

/// The marker `tests/guests/e2e` carries in its data; the last three bytes are the variant.
const MARKER_PREFIX: &[u8] = b"kubewasm-e2e:";

/// The built `e2e-guest` component (built once per process).
pub fn e2e_guest() -> PathBuf {
    guests::guest("e2e-guest", "e2e_guest")
}

/// The `e2e-guest` component as variant `code` (three ASCII characters: `v01`…, or `trp` to
/// trap in describe, `bad` for an invalid manifest). Same size as the build; a different
/// digest for every variant.
pub fn e2e_variant(code: &str) -> Vec<u8> {
    let wasm = fs::read(e2e_guest()).expect("read the e2e guest");
    variant_of(&wasm, code)
}

/// `wasm` with its variant marker set to `code`.
pub fn variant_of(wasm: &[u8], code: &str) -> Vec<u8> {
    assert_eq!(code.len(), 3, "a variant is three ASCII characters: {code:?}");
    let at: Vec<usize> = wasm.windows(MARKER_PREFIX.len() + 3).enumerate().filter(|(_, w)| w.starts_with(MARKER_PREFIX)).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 1, "the e2e guest must carry its variant marker exactly once, found it at {at:?}");
    let mut out = wasm.to_vec();
    let start = at[0] + MARKER_PREFIX.len();
    out[start..start + 3].copy_from_slice(code.as_bytes());
    out
}

/// The settings of one `e2e-guest` plugin (its `NAME.toml`); see `tests/guests/e2e`.
#[derive(Debug, Clone, Default)]
pub struct E2eSettings {
    pub name: String,
    pub host: Option<String>,
    pub kind: Option<String>,
    pub selector: Option<String>,
    pub mode: Option<String>,
    pub finalizer: Option<String>,
    pub max_concurrency: Option<u32>,
    pub events: bool,
    pub extra: Vec<String>,
    pub map_label: Option<String>,
    pub watch_kind: Option<String>,
    pub describe_sleep_ms: Option<u64>,
    pub map_sleep_ms: Option<u64>,
    pub related: bool,
    pub metadata_only: bool,
    pub list_all: Option<u32>,
    pub owns: bool,
    pub trace: bool,
    pub serve_members: Option<String>,
    pub reads_fields: Vec<String>,
    /// The `[kubewasm]` table of host options, as TOML lines (e.g. `sharding = false`).
    pub options: Vec<String>,
}

impl E2eSettings {
    pub fn new(name: &str) -> Self {
        E2eSettings { name: name.into(), ..Default::default() }
    }
    pub fn host(mut self, host: &str) -> Self {
        self.host = Some(host.into());
        self
    }
    pub fn kind(mut self, kind: &str) -> Self {
        self.kind = Some(kind.into());
        self
    }
    pub fn selector(mut self, selector: &str) -> Self {
        self.selector = Some(selector.into());
        self
    }
    pub fn mode(mut self, mode: &str) -> Self {
        self.mode = Some(mode.into());
        self
    }
    pub fn finalizer(mut self, finalizer: &str) -> Self {
        self.finalizer = Some(finalizer.into());
        self
    }
    pub fn max_concurrency(mut self, workers: u32) -> Self {
        self.max_concurrency = Some(workers);
        self
    }
    /// One more grant: `VERBS KIND [name=NAME]`, e.g. `get,list Secret.v1`.
    pub fn extra(mut self, grant: &str) -> Self {
        self.extra.push(grant.into());
        self
    }
    /// Watch ConfigMaps labelled `label`, each mapped (`map-related`) to the primary its value
    /// names.
    pub fn map_label(mut self, label: &str) -> Self {
        self.map_label = Some(label.into());
        self
    }
    /// Sleep `ms` in every `map-related` call (a watched object's annotation
    /// `e2e.kubewasm.io/map-sleep-ms` overrides it for that object).
    pub fn map_sleep_ms(mut self, ms: u64) -> Self {
        self.map_sleep_ms = Some(ms);
        self
    }
    /// With [`E2eSettings::map_label`]: each output also lists the watched objects naming its
    /// primary and their inputs (`related = "NAME=INPUT,..."`, sorted).
    pub fn related(mut self) -> Self {
        self.related = true;
        self
    }
    /// With `map_label`: watch objects of this core/v1 kind instead of ConfigMaps.
    pub fn watch_kind(mut self, kind: &str) -> Self {
        self.watch_kind = Some(kind.into());
        self
    }
    /// With `map_label`: read the watched ConfigMaps as metadata only (the primary's kind must
    /// be another, see `kind`); `related-data` then names none of them.
    pub fn metadata_only(mut self) -> Self {
        self.metadata_only = true;
        self
    }
    /// List every ConfigMap the plugin can see in the primary's namespace `times` times per
    /// reconcile (the output's `listed` says how many).
    pub fn list_all(mut self, times: u32) -> Self {
        self.list_all = Some(times);
        self
    }
    /// Sleep `ms` in `describe`: a plugin slow to start.
    pub fn describe_sleep_ms(mut self, ms: u64) -> Self {
        self.describe_sleep_ms = Some(ms);
        self
    }
    /// A Normal Event `Reconciled` (note: the input) on each primary reconciled.
    pub fn events(mut self) -> Self {
        self.events = true;
        self
    }
    /// Write the output as an owned Secret (`stringData`; an owned watch of Secrets).
    pub fn owns(mut self) -> Self {
        self.owns = true;
        self
    }
    /// Log `e2e-trace start NS/NAME` as the first thing of each reconcile and `e2e-trace end
    /// NS/NAME` as the last (see `kubewasm_tests::trace`).
    pub fn trace(mut self) -> Self {
        self.trace = true;
        self
    }
    /// Also serve these member clusters: `all`, or a label selector over their labels; each
    /// output then says which cluster it was made in (`cluster`, empty for the host's own).
    pub fn serve_members(mut self, members: &str) -> Self {
        self.serve_members = Some(members.into());
        self
    }
    /// Read the primary's kind projected to these dotted fields; the output then says what the
    /// plugin was handed (`handed`, `read`, `answered`: see the guest).
    pub fn reads_fields(mut self, fields: &[&str]) -> Self {
        self.reads_fields = fields.iter().map(|f| f.to_string()).collect();
        self
    }
    /// One line of the `[kubewasm]` host options, e.g. `sharding = false`.
    pub fn option(mut self, line: &str) -> Self {
        self.options.push(line.into());
        self
    }

    pub fn to_toml(&self) -> String {
        let mut out = format!("name = {:?}\n", self.name);
        let strings = [
            ("host", &self.host),
            ("kind", &self.kind),
            ("selector", &self.selector),
            ("mode", &self.mode),
            ("finalizer", &self.finalizer),
            ("map-label", &self.map_label),
            ("watch-kind", &self.watch_kind),
            ("serve-members", &self.serve_members),
        ];
        for (key, value) in strings {
            if let Some(value) = value {
                out.push_str(&format!("{key} = {value:?}\n"));
            }
        }
        if let Some(n) = self.max_concurrency {
            out.push_str(&format!("max-concurrency = {n}\n"));
        }
        if let Some(ms) = self.describe_sleep_ms {
            out.push_str(&format!("describe-sleep-ms = {ms}\n"));
        }
        if let Some(ms) = self.map_sleep_ms {
            out.push_str(&format!("map-sleep-ms = {ms}\n"));
        }
        if let Some(times) = self.list_all {
            out.push_str(&format!("list-all = {times}\n"));
        }
        if !self.extra.is_empty() {
            out.push_str(&format!("extra = {:?}\n", self.extra));
        }
        if !self.reads_fields.is_empty() {
            out.push_str(&format!("reads-fields = {:?}\n", self.reads_fields));
        }
        let flags = [("related", self.related), ("metadata-only", self.metadata_only), ("events", self.events), ("owns", self.owns), ("trace", self.trace)];
        for (key, _) in flags.into_iter().filter(|(_, on)| *on) {
            out.push_str(&format!("{key} = true\n"));
        }
        if !self.options.is_empty() {
            out.push_str("[kubewasm]\n");
            for line in &self.options {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// A plugin directory (a temporary one, deleted on drop).
pub struct PluginDir {
    dir: tempfile::TempDir,
}

impl PluginDir {
    pub fn new() -> Self {
        PluginDir { dir: tempfile::Builder::new().prefix("kubewasm-plugins-").tempdir().expect("create a plugin directory") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn wasm_path(&self, name: &str) -> PathBuf {
        self.path().join(format!("{name}.wasm"))
    }

    /// Writes `bytes` beside the target under a name the host ignores, then renames it into
    /// place: the host sees the old file or the new one, never half of one.
    pub fn write_atomic(&self, file: &str, bytes: &[u8]) {
        let target = self.path().join(file);
        let aside = self.path().join(format!(".{file}.partial"));
        let mut f = fs::File::create(&aside).unwrap_or_else(|e| panic!("create {}: {e}", aside.display()));
        f.write_all(bytes).and_then(|()| f.sync_all()).unwrap_or_else(|e| panic!("write {}: {e}", aside.display()));
        drop(f);
        fs::rename(&aside, &target).unwrap_or_else(|e| panic!("rename {} to {}: {e}", aside.display(), target.display()));
    }

    /// Installs plugin `name`: settings first (if any), then the component, each atomically.
    pub fn install(&self, name: &str, wasm: &[u8], settings: Option<&str>) {
        if let Some(settings) = settings {
            self.write_atomic(&format!("{name}.toml"), settings.as_bytes());
        }
        self.write_atomic(&format!("{name}.wasm"), wasm);
    }

    /// Installs the `e2e-guest` as variant `variant` with `settings` (named `settings.name`).
    pub fn install_e2e(&self, settings: &E2eSettings, variant: &str) {
        self.install(&settings.name, &e2e_variant(variant), Some(&settings.to_toml()));
    }

    /// Replaces plugin `name`'s component atomically (settings unchanged).
    pub fn replace(&self, name: &str, wasm: &[u8]) {
        self.write_atomic(&format!("{name}.wasm"), wasm);
    }

    /// Removes plugin `name` (its component; then its settings).
    pub fn remove(&self, name: &str) {
        fs::remove_file(self.wasm_path(name)).unwrap_or_else(|e| panic!("remove {name}.wasm: {e}"));
        let _ = fs::remove_file(self.path().join(format!("{name}.toml")));
    }

    /// Overwrites `NAME.wasm` in place, the way a plain slow copy does: truncate, then `chunks`
    /// writes with `pause` between them (each write visible at once), then close.
    pub async fn write_slowly(&self, name: &str, bytes: &[u8], chunks: usize, pause: Duration) {
        let path = self.wasm_path(name);
        let mut file = fs::OpenOptions::new().create(true).write(true).truncate(true).open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let size = bytes.len().div_ceil(chunks).max(1);
        for (i, chunk) in bytes.chunks(size).enumerate() {
            if i > 0 {
                tokio::time::sleep(pause).await;
            }
            file.write_all(chunk).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
        drop(file);
    }
}

impl Default for PluginDir {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_changes_only_the_marker() {
        let wasm = b"\0asm....kubewasm-e2e:v01....".to_vec();
        let v7 = variant_of(&wasm, "v07");
        assert_eq!(v7.len(), wasm.len());
        assert_eq!(&v7[..21], &wasm[..21]);
        assert!(v7.windows(16).any(|w| w == b"kubewasm-e2e:v07"));
    }

    #[test]
    fn settings_render_as_toml() {
        let toml = E2eSettings::new("a").host("h1").mode("update").max_concurrency(3).to_toml();
        assert_eq!(toml, "name = \"a\"\nhost = \"h1\"\nmode = \"update\"\nmax-concurrency = 3\n");
    }
}
