//! Builds the workspace's WebAssembly guests (test plugins, examples) and hands out the paths of
//! the resulting components: Rust guests with cargo for `wasm32-wasip2` (once per test process),
//! Python and JavaScript plugins with their SDKs' build commands (`kubewasm-py build`, `node
//! plugins/js/bin/kubewasm-js.js build`; one at a time, since each peaks at hundreds of MB), Go
//! plugins with `kubewasm build --lang go` (the workspace's own `kubewasm`), and the examples and
//! the SDK conformance plugin in every language ([`example`], [`conformance`]). Python, JS and Go builds take seconds each: they are kept in the
//! target directory, keyed by a digest of their inputs ([`cached_plugin`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The cargo target directory (`$CARGO_TARGET_DIR`, else the workspace's `target/`).
pub fn target_dir() -> PathBuf {
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

/// The languages the examples are written in, as named in `examples/<example>/<lang>`.
pub const LANGS: [&str; 5] = ["rust", "python", "js", "go", "c"];

/// Held while a Python or JS plugin builds: componentize-py and componentize-js each peak at
/// hundreds of MB, so builds go one at a time within a test process.
static HEAVY_BUILD: Mutex<()> = Mutex::new(());

/// Runs a plugin build command, panicking with its output (or with how to install the tool) if it
/// fails.
fn run_build(what: &str, mut command: Command, install: &str) {
    let _one_at_a_time = HEAVY_BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let output = match command.stdin(Stdio::null()).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("building {what}: {:?} is not installed ({install})", command.get_program()),
        Err(e) => panic!("building {what}: cannot run {:?}: {e}", command.get_program()),
    };
    assert!(
        output.status.success(),
        "building {what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds the Python plugin `src` into the component `out` with the Python SDK's
/// `kubewasm-py build` (from `PATH`: `pip install plugins/python`; `scripts/env.sh` installs it
/// into a venv), with the packages of a `requirements.txt` beside `src`, if any, bundled
/// (`-p`, see [`python_requirements`]).
pub fn python_plugin(src: &Path, out: &Path) {
    let mut command = Command::new("kubewasm-py");
    command.arg("build").arg(src).arg("-o").arg(out);
    if let Some(deps) = python_requirements(src) {
        command.arg("-p").arg(deps);
    }
    run_build(&src.display().to_string(), command, "pip install ./plugins/python, or source scripts/env.sh");
    assert!(out.is_file(), "kubewasm-py built {}, but {} is missing", src.display(), out.display());
}

/// The `requirements.txt` beside the Python app `app`, if there is one.
fn requirements_of(app: &Path) -> Option<PathBuf> {
    Some(app.with_file_name("requirements.txt")).filter(|r| r.is_file())
}

/// The packages of the `requirements.txt` beside the Python app `app` (None without one),
/// installed with `python3 -m pip install --target` (the venv's pip, from `PATH`) into
/// `target/kubewasm-tests/python-deps/<digest>`, once: the directory that
/// `kubewasm-py build -p` bundles from. The digest covers the requirements and the sources of
/// every local directory they name (a scaffold's names the SDK by its path): a path whose
/// contents changed must not be served from an install of its old contents.
fn python_requirements(app: &Path) -> Option<PathBuf> {
    let requirements = requirements_of(app)?;
    let text = std::fs::read_to_string(&requirements).unwrap_or_else(|e| panic!("read {}: {e}", requirements.display()));
    let mut local = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let dir = requirements.parent().unwrap_or(Path::new(".")).join(line);
        if dir.is_dir() {
            files_under(&dir, &["py", "toml", "cfg"], &mut local);
        }
    }
    let digest = inputs_digest(&requirements, &local);
    let parent = target_dir().join("kubewasm-tests/python-deps");
    let dir = parent.join(&digest);
    static INSTALLS: Mutex<()> = Mutex::new(());
    let _guard = INSTALLS.lock().unwrap_or_else(|e| e.into_inner());
    if dir.is_dir() {
        return Some(dir);
    }
    std::fs::create_dir_all(&parent).unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
    // Installed aside and renamed into place: a concurrent test process sees all of it or nothing.
    let partial = parent.join(format!(".{digest}.{}.partial", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let mut command = Command::new("python3");
    command.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"]).arg(&partial).arg("-r").arg(&requirements);
    run_build(&requirements.display().to_string(), command, "source scripts/env.sh: its venv has pip");
    if let Err(e) = std::fs::rename(&partial, &dir) {
        // Another test process installed the same requirements first: theirs is as good.
        let _ = std::fs::remove_dir_all(&partial);
        assert!(dir.is_dir(), "rename {} to {}: {e}", partial.display(), dir.display());
    }
    Some(dir)
}

/// Builds the JavaScript (or TypeScript) plugin `src` into the component `out` with the JS SDK's
/// build command, `node plugins/js/bin/kubewasm-js.js build` (its tools installed by `npm install`
/// in `plugins/js`).
pub fn js_plugin(src: &Path, out: &Path) {
    let sdk = workspace_root().join("plugins/js");
    assert!(
        sdk.join("node_modules/@bytecodealliance/componentize-js").is_dir(),
        "building {}: the JS SDK's tools are not installed: run `npm install` in {} (scripts/env.sh does)",
        src.display(),
        sdk.display()
    );
    let mut command = Command::new("node");
    command.arg(sdk.join("bin/kubewasm-js.js")).arg("build").arg(src).arg("-o").arg(out);
    run_build(&src.display().to_string(), command, "install Node.js 20 or later");
    assert!(out.is_file(), "kubewasm-js built {}, but {} is missing", src.display(), out.display());
}

/// Builds the Go plugin in the directory `src` (a main package in a Go module) or the C plugin
/// whose `.c` files are in `src` into the component `out` with `kubewasm build --lang go|c`, as
/// an author does: the workspace's `kubewasm` (built on first use), and Go 1.26 or clang-16 with
/// wasi-libc from `PATH`.
pub fn kubewasm_built_plugin(lang: &str, src: &Path, out: &Path) {
    let kubewasm = crate::host::kubewasm_binary().unwrap_or_else(|e| panic!("building {}: no kubewasm binary: {e}", src.display()));
    let mut command = Command::new(kubewasm);
    command.arg("build").arg("--lang").arg(lang).arg(src).arg("-o").arg(out);
    let install = if lang == "c" { "apt-get install clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32 (scripts/env.sh does)" } else { "install Go 1.26" };
    run_build(&src.display().to_string(), command, install);
    assert!(out.is_file(), "kubewasm build built {}, but {} is missing", src.display(), out.display());
}

/// Every file under `dir` with one of `extensions`, sorted (skipping installed packages, caches and
/// build outputs).
fn files_under(dir: &Path, extensions: &[&str], found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            // Installed packages, bytecode and setuptools' in-tree `build/` are outputs.
            if !["node_modules", "__pycache__", "build"].iter().any(|skip| name == *skip) {
                files_under(&path, extensions, found);
            }
        } else if path.extension().is_some_and(|x| extensions.iter().any(|e| x == *e)) {
            found.push(path);
        }
    }
    found.sort();
}

/// The digest of what a Python or JS build reads: the app, the SDK and the WIT. Files are named
/// by their path in the workspace (the app by its file name: it may live in a temporary
/// directory).
fn inputs_digest(app: &Path, inputs: &[PathBuf]) -> String {
    let root = workspace_root();
    let mut hasher = Sha256::new();
    let app_name = app.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for (name, path) in
        std::iter::once((app_name, app)).chain(inputs.iter().map(|p| (p.strip_prefix(&root).unwrap_or(p).to_string_lossy().into_owned(), p.as_path())))
    {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        // A Go or C plugin's app is its directory: its files are among the inputs.
        if path.is_dir() {
            continue;
        }
        hasher.update(std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())));
    }
    hex(&hasher.finalize()[..8])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The Python (`lang` "python") or JavaScript ("js") plugin whose source is the one file `app`,
/// or the Go ("go") or C ("c") plugin whose source is the directory `app`, built with
/// [`python_plugin`], [`js_plugin`] or [`kubewasm_built_plugin`] and kept in
/// `target/kubewasm-tests/plugins/` as `<stem>-<digest>.wasm`, the digest covering the app, its
/// SDK and the WIT (for Python also the `requirements.txt` beside the app, for Go and C the
/// host's build recipe, `host/src/tools/build/`):
/// rebuilt only when one of them changes.
pub fn cached_plugin(lang: &str, app: &Path, stem: &str) -> PathBuf {
    let root = workspace_root();
    let mut inputs = match lang {
        "python" => {
            let mut sdk = vec![root.join("plugins/python/pyproject.toml")];
            files_under(&root.join("plugins/python/src/kubewasm"), &["py"], &mut sdk);
            // What the build bundles besides the app (python_requirements).
            sdk.extend(requirements_of(app));
            sdk
        }
        "js" => {
            let mut sdk = vec![root.join("plugins/js/package-lock.json")];
            files_under(&root.join("plugins/js/src"), &["js"], &mut sdk);
            sdk
        }
        "go" => {
            let mut sdk = vec![root.join("host/src/tools/build/mod.rs"), root.join("host/src/tools/build/go.rs")];
            files_under(&root.join("plugins/go"), &["go", "s", "mod"], &mut sdk);
            files_under(app, &["go", "mod", "sum"], &mut sdk);
            sdk
        }
        "c" => {
            let mut sdk = vec![root.join("host/src/tools/build/mod.rs"), root.join("host/src/tools/build/c.rs")];
            files_under(&root.join("plugins/c/src"), &["c", "h"], &mut sdk);
            files_under(app, &["c", "h"], &mut sdk);
            sdk
        }
        other => panic!("cached_plugin builds Python, JS, Go and C plugins, not {other:?}"),
    };
    let present = match lang {
        "go" => app.join("go.mod").is_file(),
        "c" => app.is_dir(),
        _ => app.is_file(),
    };
    assert!(present, "{} is missing", app.display());
    files_under(&root.join("wit"), &["wit"], &mut inputs);
    let out_dir = target_dir().join("kubewasm-tests/plugins");
    let out = out_dir.join(format!("{stem}-{}.wasm", inputs_digest(app, &inputs)));
    // One check-and-build at a time, so that two tests wanting the same build make it once.
    static BUILDS: Mutex<()> = Mutex::new(());
    let _guard = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    if out.is_file() {
        return out;
    }
    std::fs::create_dir_all(&out_dir).unwrap_or_else(|e| panic!("create {}: {e}", out_dir.display()));
    // Built aside and renamed into place: a concurrent test process sees all of it or nothing.
    let partial = out_dir.join(format!(".{stem}.{}.partial.wasm", std::process::id()));
    match lang {
        "python" => python_plugin(app, &partial),
        "js" => js_plugin(app, &partial),
        _ => kubewasm_built_plugin(lang, app, &partial),
    }
    std::fs::rename(&partial, &out).unwrap_or_else(|e| panic!("rename {} to {}: {e}", partial.display(), out.display()));
    // Earlier builds of the same plugin are stale now.
    for entry in std::fs::read_dir(&out_dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let digest = name.strip_prefix(&format!("{stem}-")).and_then(|rest| rest.strip_suffix(".wasm"));
        if digest.is_some_and(|d| d.len() == 16 && d.chars().all(|c| c.is_ascii_hexdigit())) && entry.path() != out {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    out
}

/// The built example `example` (a directory of `examples/`) in `lang` (one of [`LANGS`]): the
/// Rust one is the workspace package named after the example, the Python one
/// `python/<example with _>.py`, the JS one `js/<example>.js`, the Go one the module in `go/`
/// (see [`cached_plugin`]).
pub fn example(example: &str, lang: &str) -> PathBuf {
    plugin_in(&workspace_root().join("examples").join(example), example, lang)
}

/// The SDK conformance plugin (`tests/conformance`, laid out as an example) built in `lang`.
pub fn conformance(lang: &str) -> PathBuf {
    plugin_in(&workspace_root().join("tests/conformance"), "conformance", lang)
}

/// The plugin `name` of the directory `dir`, laid out as [`example`] says, built in `lang`.
fn plugin_in(dir: &Path, name: &str, lang: &str) -> PathBuf {
    match lang {
        "rust" => guest(name, &name.replace('-', "_")),
        "python" => cached_plugin(lang, &dir.join("python").join(format!("{}.py", name.replace('-', "_"))), &format!("{name}-{lang}")),
        "js" => cached_plugin(lang, &dir.join("js").join(format!("{name}.js")), &format!("{name}-{lang}")),
        "go" | "c" => cached_plugin(lang, &dir.join(lang), &format!("{name}-{lang}")),
        other => panic!("unknown language {other:?}: the examples are in {LANGS:?}"),
    }
}
