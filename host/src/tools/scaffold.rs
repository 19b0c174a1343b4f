//! `kubewasm new`: scaffolds a plugin project in Rust, Python, JavaScript, Go or C — a small working
//! controller (a ConfigMap with a label gets a summary ConfigMap, the same logic in every
//! language), a README, a Makefile (`make`, `make test`, `make check`), and table-test cases that
//! pass for all five. The controller reconciles itself (one server-side apply), or, with
//! `--mode declarative`, answers which children a parent should have and the host makes them
//! (not in C: its SDK builds reconciling plugins only).
//!
//! The templates are files under `host/templates/`, embedded at compile time; `{{name}}`,
//! `{{crate}}` and `{{sdk}}` in them are replaced. The SDKs are not published to registries, so a
//! project points at the SDKs of a kubewasm checkout, by absolute path: a path dependency (Rust),
//! a path in `requirements.txt` (Python), a `file:` dependency (JS), a `replace` line (Go), the
//! headers' directory for editors (C; `kubewasm build` has the C SDK built in). Which
//! checkout is explicit (`--sdk`, `$KUBEWASM_SDK_DIR`, else the one this binary was built from),
//! checked (the language's SDK must be there), and said in the summary. Owns only the files it
//! writes; never overwrites anything.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::resource::is_dns_label;

/// The languages a project can be scaffolded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
    Go,
    C,
}

impl Lang {
    pub const ALL: [Lang; 5] = [Lang::Rust, Lang::Python, Lang::Js, Lang::Go, Lang::C];

    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::Go => "go",
            Lang::C => "c",
        }
    }

    /// Whether the language's SDK builds declarative plugins.
    pub fn declarative(self) -> bool {
        self != Lang::C
    }

    /// The SDK's directory under the SDKs directory (`plugins/` of a checkout), and a file that
    /// must be in it.
    fn sdk(self) -> (&'static str, &'static str) {
        match self {
            Lang::Rust => ("rust", "Cargo.toml"),
            Lang::Python => ("python", "pyproject.toml"),
            Lang::Js => ("js", "package.json"),
            Lang::Go => ("go", "go.mod"),
            Lang::C => ("c", "src/kubewasm.h"),
        }
    }

    /// Every file of a project in `mode`: the language's own, then the mode's.
    fn templates(self, mode: Mode) -> impl Iterator<Item = &'static Template> {
        let (common, controller, declarative) = match self {
            Lang::Rust => (RUST, RUST_CONTROLLER, RUST_DECLARATIVE),
            Lang::Python => (PYTHON, PYTHON_CONTROLLER, PYTHON_DECLARATIVE),
            Lang::Js => (JS, JS_CONTROLLER, JS_DECLARATIVE),
            Lang::Go => (GO, GO_CONTROLLER, GO_DECLARATIVE),
            Lang::C => (C, C_CONTROLLER, &[][..]),
        };
        let own = match mode {
            Mode::Controller => controller,
            Mode::Declarative => declarative,
        };
        common.iter().chain(own)
    }

    /// The file that holds the controller.
    fn source(self) -> &'static str {
        match self {
            Lang::Rust => "src/lib.rs",
            Lang::Python => "app.py",
            Lang::Js => "app.js",
            Lang::Go => "main.go",
            Lang::C => "app.c",
        }
    }
}

/// What a project's controller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// It reconciles: reads and writes through the host itself.
    #[default]
    Controller,
    /// It answers which children a parent should have; the host makes them (`composite`).
    Declarative,
}

impl Mode {
    /// What the README says the controller does.
    fn what(self) -> &'static str {
        match self {
            Mode::Controller => {
                "Every ConfigMap labeled `{{name}}.example.com/enabled=true` gets a summary ConfigMap, `<name>-summary`, that lists the keys of its data and is owned by it, so Kubernetes deletes the summary with it."
            }
            Mode::Declarative => {
                "Every Namespace labeled `{{name}}.example.com/enabled=true` gets a summary ConfigMap in it, `<namespace>-summary`, that lists the keys of the namespace's labels and is owned by the namespace: the ConfigMap is the namespace's child, kept as the plugin answers."
            }
        }
    }

    /// How the README says to try it on a cluster.
    fn try_it(self) -> &'static str {
        match self {
            Mode::Controller => {
                "kubectl create configmap demo --from-literal=color=blue --from-literal=zone=eu-west-1\nkubectl label configmap demo {{name}}.example.com/enabled=true\nkubectl get configmap demo-summary -o yaml"
            }
            Mode::Declarative => {
                "kubectl create namespace demo\nkubectl label namespace demo team=blue {{name}}.example.com/enabled=true\nkubectl get configmap demo-summary -n demo -o yaml"
            }
        }
    }

    /// What the README says of the controller's logic.
    fn logic(self, lang: Lang) -> String {
        let file = lang.source();
        let (manifest, reconcile, sync) = match lang {
            Lang::Go => ("Manifest", "Reconcile", "Sync"),
            Lang::C => ("describe", "reconcile", "sync"),
            _ => ("manifest", "reconcile", "sync"),
        };
        match self {
            Mode::Controller => format!(
                "The whole controller is [`{file}`]({file}): `{manifest}` says what it reconciles and what it may do (the host enforces it), `{reconcile}` is the logic. The host owns watches, caches, queues, retries, leader election and metrics."
            ),
            Mode::Declarative => format!(
                "The whole controller is [`{file}`]({file}), declarative: `{manifest}` says that labeled Namespaces are parents and ConfigMaps their children, and `{sync}` answers which children a parent should have (and leaves the Namespace's status alone). The host does the rest: it creates each child owned by its parent, applies changes in place, deletes children no longer answered, and owns watches, caches, queues, retries, leader election and metrics."
            ),
        }
    }
}

impl FromStr for Mode {
    type Err = ScaffoldError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "controller" => Ok(Mode::Controller),
            "declarative" => Ok(Mode::Declarative),
            _ => Err(ScaffoldError::Mode(text.into())),
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Lang {
    type Err = ScaffoldError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "rust" => Ok(Lang::Rust),
            "python" => Ok(Lang::Python),
            "js" | "javascript" => Ok(Lang::Js),
            "go" | "golang" => Ok(Lang::Go),
            "c" => Ok(Lang::C),
            _ => Err(ScaffoldError::Lang(text.into())),
        }
    }
}

/// One file of a project: where it goes (a template itself) and its text.
struct Template {
    path: &'static str,
    text: &'static str,
}

macro_rules! template {
    ($path:literal, $file:literal) => {
        Template { path: $path, text: include_str!(concat!("../../templates/", $file)) }
    };
}

const CASE: Template = template!("cases/summarizes-data.yaml", "cases/summarizes-data.yaml");
const DECLARATIVE_CASE: Template = template!("cases/summarizes-data.yaml", "declarative/cases/summarizes-data.yaml");
const REFUSED_CASE: Template = template!("cases/refuses-an-empty-suffix.yaml", "cases/refuses-an-empty-suffix.yaml");

const RUST: &[Template] = &[
    template!("Cargo.toml", "rust/Cargo.toml.tmpl"),
    template!("README.md", "rust/README.md"),
    template!("Makefile", "rust/Makefile"),
    template!(".gitignore", "rust/gitignore"),
    REFUSED_CASE,
];
const RUST_CONTROLLER: &[Template] = &[template!("src/lib.rs", "rust/src/lib.rs"), CASE];
const RUST_DECLARATIVE: &[Template] = &[template!("src/lib.rs", "declarative/rust/lib.rs"), DECLARATIVE_CASE];

const PYTHON: &[Template] = &[
    template!("requirements.txt", "python/requirements.txt"),
    template!("README.md", "python/README.md"),
    template!("Makefile", "python/Makefile"),
    template!(".gitignore", "python/gitignore"),
    REFUSED_CASE,
];
const PYTHON_CONTROLLER: &[Template] = &[template!("app.py", "python/app.py"), CASE];
const PYTHON_DECLARATIVE: &[Template] = &[template!("app.py", "declarative/python/app.py"), DECLARATIVE_CASE];

const JS: &[Template] = &[
    template!("package.json", "js/package.json.tmpl"),
    template!("README.md", "js/README.md"),
    template!("Makefile", "js/Makefile"),
    template!(".gitignore", "js/gitignore"),
    REFUSED_CASE,
];
const JS_CONTROLLER: &[Template] = &[template!("app.js", "js/app.js"), CASE];
const JS_DECLARATIVE: &[Template] = &[template!("app.js", "declarative/js/app.js"), DECLARATIVE_CASE];

const GO: &[Template] = &[
    template!("go.mod", "go/go.mod.tmpl"),
    template!("README.md", "go/README.md"),
    template!("Makefile", "go/Makefile"),
    template!(".gitignore", "go/gitignore"),
    REFUSED_CASE,
];
const GO_CONTROLLER: &[Template] = &[template!("main.go", "go/main.go"), template!("main_test.go", "go/main_test.go"), CASE];
const GO_DECLARATIVE: &[Template] =
    &[template!("main.go", "declarative/go/main.go"), template!("main_test.go", "declarative/go/main_test.go"), DECLARATIVE_CASE];

const C: &[Template] = &[
    template!("Makefile", "c/Makefile"),
    template!("README.md", "c/README.md"),
    template!(".gitignore", "c/gitignore"),
    template!("compile_flags.txt", "c/compile_flags.txt"),
    REFUSED_CASE,
];
const C_CONTROLLER: &[Template] = &[template!("app.c", "c/app.c"), CASE];

/// The environment variable naming the SDKs directory when `--sdk` is not given (it wins over the
/// checkout this binary was built from).
pub const SDK_ENV: &str = "KUBEWASM_SDK_DIR";

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("unknown language {0:?}: use rust, python, js, go or c")]
    Lang(String),
    #[error("unknown mode {0:?}: use controller (it reconciles) or declarative (it answers the children a parent should have)")]
    Mode(String),
    #[error("the {0} SDK builds reconciling plugins only: use --mode controller, or another language for a declarative one")]
    NotDeclarative(Lang),
    #[error(
        "{0:?} is not a valid plugin name: use a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit)"
    )]
    Name(String),
    #[error("{} already exists and is not empty: choose another --dir, or remove it", .0.display())]
    NotEmpty(PathBuf),
    #[error(
        "no kubewasm SDKs found (the checkout kubewasm was built from is gone): pass --sdk DIR (the plugins/ directory of a kubewasm checkout) or set ${SDK_ENV}"
    )]
    NoSdk,
    #[error("{}: no {lang} SDK there (expected {}); --sdk takes the plugins/ directory of a kubewasm checkout", .dir.display(), .expected.display())]
    SdkMissing { dir: PathBuf, lang: Lang, expected: PathBuf },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct Options {
    pub lang: Lang,
    pub mode: Mode,
    /// The plugin's name: a DNS-1123 label.
    pub name: String,
    /// Where the project goes (created; must not exist or be empty).
    pub dir: PathBuf,
    /// The SDKs directory (`plugins/` of a checkout); see [`sdk_dir`].
    pub sdks: PathBuf,
}

/// A scaffolded project.
#[derive(Debug)]
pub struct Created {
    pub dir: PathBuf,
    /// The files written, relative to `dir`.
    pub files: Vec<PathBuf>,
    /// The language's SDK the project points at.
    pub sdk: PathBuf,
    /// Things the user should know, one line each (e.g. that the project sits in another kubewasm
    /// checkout than the one whose SDK it uses).
    pub notes: Vec<String>,
}

/// The SDKs directory: `explicit` (`--sdk`) if given; else `$KUBEWASM_SDK_DIR`; else the
/// `plugins/` directory of the checkout this binary was built from, if it still exists.
pub fn sdk_dir(explicit: Option<PathBuf>) -> Result<PathBuf, ScaffoldError> {
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    let from_env = std::env::var_os(SDK_ENV).filter(|v| !v.is_empty()).map(PathBuf::from);
    explicit.or(from_env).or_else(|| built_from.is_dir().then_some(built_from)).ok_or(ScaffoldError::NoSdk)
}

/// The kubewasm checkout `dir` is in (the nearest parent with `wit/world.wit` and `plugins/`).
fn checkout_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.join("wit/world.wit").is_file() && d.join("plugins").is_dir()).map(Path::to_path_buf)
}

/// The Rust package name: the plugin name, unless cargo refuses it (a leading digit).
fn package_name(name: &str) -> String {
    if name.starts_with(|c: char| c.is_ascii_digit()) { format!("plugin-{name}") } else { name.to_string() }
}

/// The Rust library name (and so the `.wasm` file's stem): the package name with `_`, prefixed
/// when it would be a keyword or shadow a built-in crate.
fn crate_name(name: &str) -> String {
    const TAKEN: &[&str] = &[
        "as",
        "async",
        "await",
        "break",
        "const",
        "continue",
        "crate",
        "dyn",
        "else",
        "enum",
        "extern",
        "false",
        "fn",
        "for",
        "gen",
        "if",
        "impl",
        "in",
        "let",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "pub",
        "ref",
        "return",
        "self",
        "static",
        "struct",
        "super",
        "trait",
        "true",
        "try",
        "type",
        "unsafe",
        "use",
        "where",
        "while",
        "abstract",
        "become",
        "box",
        "do",
        "final",
        "macro",
        "override",
        "priv",
        "typeof",
        "unsized",
        "virtual",
        "yield",
        "std",
        "core",
        "alloc",
        "proc_macro",
        "test",
    ];
    let name = package_name(name).replace('-', "_");
    if TAKEN.contains(&name.as_str()) { format!("plugin_{name}") } else { name }
}

/// The component a built project makes, relative to the project directory (for Rust, relative
/// to the cargo target directory).
pub fn artifact(lang: Lang, name: &str) -> PathBuf {
    match lang {
        Lang::Rust => Path::new("wasm32-wasip2/release").join(format!("{}.wasm", crate_name(name))),
        Lang::Python | Lang::Js | Lang::Go | Lang::C => PathBuf::from(format!("{name}.wasm")),
    }
}

/// Fills in a template. Paths go into TOML, JSON and Go strings, so `\` and `"` are escaped.
fn render(text: &str, options: &Options, sdk: &Path) -> String {
    let name = &options.name;
    let sdk = sdk.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
    let logic = textwrap(&options.mode.logic(options.lang), 100);
    let what = textwrap(options.mode.what(), 100);
    // The mode's texts first: they name the plugin too.
    let text = text.replace("{{logic}}", &logic).replace("{{what}}", &what).replace("{{try}}", options.mode.try_it());
    text.replace("{{name}}", name).replace("{{crate}}", &crate_name(name)).replace("{{sdk}}", &sdk)
}

/// `text` broken into lines of at most `width` characters, at spaces.
fn textwrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split(' ') {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}

/// Whether `dir` can take a new project: it does not exist, or is an empty directory.
fn check_target(dir: &Path) -> Result<(), ScaffoldError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(ScaffoldError::NotEmpty(dir.into())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(ScaffoldError::NotEmpty(dir.into())),
        Err(source) => Err(ScaffoldError::Write { path: dir.into(), source }),
    }
}

/// Writes a new project.
pub fn create(options: &Options) -> Result<Created, ScaffoldError> {
    if !is_dns_label(&options.name) {
        return Err(ScaffoldError::Name(options.name.clone()));
    }
    if options.mode == Mode::Declarative && !options.lang.declarative() {
        return Err(ScaffoldError::NotDeclarative(options.lang));
    }
    let (sdk_sub, marker) = options.lang.sdk();
    let sdk = options.sdks.join(sdk_sub);
    if !sdk.join(marker).is_file() {
        return Err(ScaffoldError::SdkMissing { dir: options.sdks.clone(), lang: options.lang, expected: sdk.join(marker) });
    }
    // Generated files name the SDK by an absolute path: the project may move, the checkout not.
    let sdk = sdk.canonicalize().unwrap_or(sdk);
    check_target(&options.dir)?;

    let write = |path: &Path, text: &str| -> Result<(), ScaffoldError> {
        let fail = |source| ScaffoldError::Write { path: path.into(), source };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        std::fs::write(path, text).map_err(fail)
    };
    std::fs::create_dir_all(&options.dir).map_err(|source| ScaffoldError::Write { path: options.dir.clone(), source })?;
    let mut files = Vec::new();
    for template in options.lang.templates(options.mode) {
        write(&options.dir.join(template.path), &render(template.text, options, &sdk))?;
        files.push(PathBuf::from(template.path));
    }
    // Rust: start from the lockfile of the SDK's workspace, so the project builds with the
    // dependency versions the SDK is tested with (cargo drops what the project does not use).
    if options.lang == Lang::Rust
        && let Some(lock) = sdk.parent().and_then(Path::parent).map(|root| root.join("Cargo.lock"))
        && let Ok(text) = std::fs::read_to_string(&lock)
    {
        write(&options.dir.join("Cargo.lock"), &text)?;
        files.push(PathBuf::from("Cargo.lock"));
    }
    // Working in one checkout with the SDK of another is a classic way to test the wrong code.
    let mut notes = Vec::new();
    let project = options.dir.canonicalize().unwrap_or_else(|_| options.dir.clone());
    if let (Some(here), Some(sdk_checkout)) = (checkout_of(&project), checkout_of(&sdk))
        && here != sdk_checkout
    {
        notes.push(format!(
            "the project is inside the kubewasm checkout {}, but uses the SDK of {}: pass --sdk {} to use this one's",
            here.display(),
            sdk_checkout.display(),
            here.join("plugins").display()
        ));
    }
    Ok(Created { dir: options.dir.clone(), files, sdk, notes })
}

/// What `kubewasm new` prints: the files written and the commands that come next.
pub fn summary(options: &Options, created: &Created) -> String {
    use std::fmt::Write;
    let name = &options.name;
    let kind = match options.mode {
        Mode::Controller => "",
        Mode::Declarative => " declarative",
    };
    let mut out = format!("Created {}{kind} plugin {name:?} in {}:\n", options.lang, created.dir.display());
    for file in &created.files {
        let _ = writeln!(out, "  {}", file.display());
    }
    let dir = created.dir.display();
    let sdk = created.sdk.display();
    let steps = match options.lang {
        Lang::Rust => format!("cd {dir}\n  cargo build --release --target wasm32-wasip2\n  cp target/{} {name}.wasm", artifact(Lang::Rust, name).display()),
        Lang::Python => format!("cd {dir}\n  pip install -r requirements.txt\n  kubewasm-py build app.py -o {name}.wasm"),
        Lang::Js => format!("cd {dir}\n  npm install --prefix {sdk}\n  npm install\n  npm run build"),
        Lang::Go => format!("cd {dir}\n  go test ./...\n  kubewasm build --lang go . -o {name}.wasm"),
        Lang::C => format!("cd {dir}\n  kubewasm build --lang c . -o {name}.wasm"),
    };
    let _ = writeln!(out, "\nIt uses the {} SDK at {sdk} (--sdk DIR for another kubewasm checkout's plugins/).", options.lang);
    for note in &created.notes {
        let _ = writeln!(out, "Note: {note}");
    }
    let _ = write!(
        out,
        "\nNext (README.md says more; `make`, `make test` and `make check` do the same):\n  {steps}\n  kubewasm check {name}.wasm\n  kubewasm test {name}.wasm cases\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdks() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins")
    }

    fn options(lang: Lang, name: &str, dir: &Path) -> Options {
        Options { lang, mode: Mode::Controller, name: name.into(), dir: dir.into(), sdks: sdks() }
    }

    #[test]
    fn every_language_renders_every_placeholder() {
        for (lang, mode) in Lang::ALL
            .into_iter()
            .flat_map(|lang| [(lang, Mode::Controller), (lang, Mode::Declarative)])
            .filter(|(lang, mode)| *mode == Mode::Controller || lang.declarative())
        {
            let dir = tempfile::tempdir().unwrap();
            let project = dir.path().join("cm-summary");
            let created = create(&Options { mode, ..options(lang, "cm-summary", &project) }).unwrap();
            let source = std::fs::read_to_string(project.join(lang.source())).unwrap();
            let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
            match mode {
                Mode::Controller => {
                    assert!(source.to_lowercase().contains("fn reconcile") || source.contains("reconcile(") || source.contains("Reconcile("), "{lang}")
                }
                Mode::Declarative => {
                    assert!(source.contains("sync") || source.contains("Sync"), "{lang}: {source}");
                    assert!(readme.contains("declarative"), "{lang}: {readme}");
                }
            }
            assert!(created.files.iter().any(|f| f == Path::new("README.md")), "{lang}: {:?}", created.files);
            assert!(created.files.iter().any(|f| f == Path::new("Makefile")), "{lang}: {:?}", created.files);
            let makefile = std::fs::read_to_string(project.join("Makefile")).unwrap();
            for target in ["build:", "test:", "check:", "kubewasm test cm-summary.wasm cases", "kubewasm check cm-summary.wasm"] {
                let target = target.replace("kubewasm ", "$(KUBEWASM) ");
                assert!(makefile.contains(&target), "{lang}: the Makefile has no {target:?}:\n{makefile}");
            }
            assert!(created.files.iter().any(|f| f.starts_with("cases")), "{lang}: {:?}", created.files);
            for file in &created.files {
                let text = std::fs::read_to_string(project.join(file)).unwrap();
                assert!(!text.contains("{{"), "{lang}: {} keeps a placeholder", file.display());
            }
            let case = std::fs::read_to_string(project.join("cases/summarizes-data.yaml")).unwrap();
            assert!(case.contains("cm-summary.example.com/enabled: \"true\""), "{case}");
            assert!(summary(&options(lang, "cm-summary", &project), &created).contains("kubewasm test cm-summary.wasm cases"));
        }
    }

    #[test]
    fn projects_point_at_the_sdk_by_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        let rust = create(&options(Lang::Rust, "a", &dir.path().join("r"))).unwrap();
        assert!(rust.sdk.is_absolute() && rust.sdk.join("Cargo.toml").is_file(), "{}", rust.sdk.display());
        let cargo = std::fs::read_to_string(dir.path().join("r/Cargo.toml")).unwrap();
        assert!(cargo.contains(&format!("kubewasm-sdk = {{ path = \"{}\" }}", rust.sdk.display())), "{cargo}");
        assert!(cargo.contains("\n[workspace]\n"), "a scaffold is its own workspace: {cargo}");
        create(&options(Lang::Js, "a", &dir.path().join("j"))).unwrap();
        let package: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("j/package.json")).unwrap()).unwrap();
        let dependency = package["dependencies"]["@kubewasm/sdk"].as_str().unwrap();
        assert!(dependency.starts_with("file:/") && dependency.ends_with("plugins/js"), "{dependency}");
        let go = create(&options(Lang::Go, "a", &dir.path().join("g"))).unwrap();
        let go_mod = std::fs::read_to_string(dir.path().join("g/go.mod")).unwrap();
        assert!(go_mod.contains(&format!("replace github.com/kubewasm/kubewasm/plugins/go => \"{}\"", go.sdk.display())), "{go_mod}");
        assert!(go.sdk.is_absolute() && go.sdk.join("go.mod").is_file(), "{}", go.sdk.display());
        let c = create(&options(Lang::C, "a", &dir.path().join("c"))).unwrap();
        let flags = std::fs::read_to_string(dir.path().join("c/compile_flags.txt")).unwrap();
        assert!(flags.contains(&format!("-I{}/src", c.sdk.display())) && c.sdk.join("src/kubewasm.h").is_file(), "{flags}");
    }

    #[test]
    fn a_declarative_c_project_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let error = create(&Options { mode: Mode::Declarative, ..options(Lang::C, "a", &dir.path().join("a")) }).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotDeclarative(Lang::C)), "{error}");
        assert!(error.to_string().contains("--mode controller") && !error.to_string().contains('\n'), "{error}");
        assert!(!dir.path().join("a").exists());
    }

    #[test]
    fn the_summary_names_the_sdk_and_warns_about_another_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let created = create(&options(Lang::Go, "a", &dir.path().join("a"))).unwrap();
        let summary = summary(&options(Lang::Go, "a", &dir.path().join("a")), &created);
        assert!(summary.contains(&format!("It uses the go SDK at {}", created.sdk.display())), "{summary}");
        assert!(created.notes.is_empty() && !summary.contains("Note:"), "{summary}");
        // A project inside another checkout (a directory with wit/world.wit and plugins/).
        let other = dir.path().join("other-checkout");
        std::fs::create_dir_all(other.join("wit")).unwrap();
        std::fs::create_dir_all(other.join("plugins")).unwrap();
        std::fs::write(other.join("wit/world.wit"), "").unwrap();
        let created = create(&options(Lang::Go, "b", &other.join("b"))).unwrap();
        assert_eq!(created.notes.len(), 1, "{:?}", created.notes);
        assert!(created.notes[0].contains("--sdk") && created.notes[0].contains("other-checkout"), "{}", created.notes[0]);
    }

    #[test]
    fn names_must_be_dns_labels() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", "Upper", "under_score", "-lead", "trail-", "a.b", &"x".repeat(64)] {
            let error = create(&options(Lang::Rust, bad, &dir.path().join("p"))).unwrap_err();
            assert!(matches!(error, ScaffoldError::Name(_)), "{bad:?}: {error}");
            assert!(!error.to_string().contains('\n'), "one line: {error}");
        }
        assert!(!dir.path().join("p").exists(), "nothing is written for a bad name");
    }

    #[test]
    fn rust_names_that_cargo_refuses_are_adjusted() {
        assert_eq!((package_name("1st"), crate_name("1st")), ("plugin-1st".to_string(), "plugin_1st".to_string()));
        assert_eq!((package_name("cm-summary"), crate_name("cm-summary")), ("cm-summary".to_string(), "cm_summary".to_string()));
        assert_eq!(crate_name("test"), "plugin_test");
        assert_eq!(artifact(Lang::Rust, "my-plugin"), Path::new("wasm32-wasip2/release/my_plugin.wasm"));
    }

    #[test]
    fn refuses_a_non_empty_directory_and_takes_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = create(&options(Lang::Python, "p", dir.path())).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotEmpty(_)), "{error}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing was written");
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        create(&options(Lang::Python, "p", &empty)).unwrap();
        assert!(empty.join("app.py").is_file());
    }

    #[test]
    fn a_directory_without_the_sdk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options { lang: Lang::Js, mode: Mode::Controller, name: "p".into(), dir: dir.path().join("p"), sdks: dir.path().into() };
        let error = create(&options).unwrap_err();
        assert!(matches!(error, ScaffoldError::SdkMissing { .. }), "{error}");
        assert!(error.to_string().contains("--sdk"), "{error}");
    }

    #[test]
    fn the_sdk_directory_defaults_to_this_checkout() {
        assert_eq!(sdk_dir(Some("/x".into())).unwrap(), Path::new("/x"));
        if std::env::var_os(SDK_ENV).is_none() {
            assert!(sdk_dir(None).unwrap().join("rust/Cargo.toml").is_file());
        }
        assert_eq!("golang".parse::<Lang>().unwrap(), Lang::Go);
        assert!("cobol".parse::<Lang>().unwrap_err().to_string().contains("go"));
    }
}
