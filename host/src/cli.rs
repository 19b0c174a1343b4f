//! The command line: `kubewasm run | check | rbac | new | test | version`, with help that reads
//! like kubectl's. Parses flags into plain values and calls the library; no logic of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::manifest::{LimitPolicy, Manifest};
use crate::plugin::artifact::ArtifactCache;
use crate::plugin::{LoadedPlugin, Loader};
use crate::runtime::{Runtime, RuntimeConfig};

const ROOT_TEMPLATE: &str = "\
{about}

Basic Commands:
{subcommands}

Usage:
  {usage}

Use \"kubewasm <command> --help\" for more information about a given command.
";

const COMMAND_TEMPLATE: &str = "\
{about}

Examples:{after-help}

Options:
{options}

Usage:
  {usage}
";

#[derive(Parser)]
#[command(
    name = "kubewasm",
    version,
    about = "kubewasm runs Kubernetes controllers written as WebAssembly components.\n\n \
             One host process owns the watches, caches, workqueues, leader election, metrics and events;\n \
             each controller's reconcile logic is a sandboxed plugin, written in any language.",
    help_template = ROOT_TEMPLATE,
    disable_help_subcommand = true,
    subcommand_help_heading = "Basic Commands",
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers in a plugin directory against a cluster
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Run every plugin in ./plugins against the cluster of the current kubeconfig context\n  \
                      kubewasm run --plugins ./plugins\n\n  \
                      # Two replicas: one leads, the other keeps warm caches and takes over\n  \
                      kubewasm run --plugins ./plugins --leader-elect --lease-namespace kube-system\n\n  \
                      # Only some plugins, in some namespaces\n  \
                      kubewasm run --plugins ./plugins --controllers 'sample-controller,-noisy' --namespace team-a --namespace team-b"
    )]
    Run(RunArgs),
    /// Print the RBAC roles and bindings the plugins in a directory (and the host) need
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Roles for the service account kubewasm/kubewasm, applied directly\n  \
                      kubewasm rbac --plugins ./plugins | kubectl apply -f -\n\n  \
                      # With leader election in kube-system, for a user\n  \
                      kubewasm rbac --plugins ./plugins --lease-namespace kube-system --user alice"
    )]
    Rbac(RbacArgs),
    /// Create a plugin project: a small working controller, a README and a table-test case
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # A Rust plugin in ./cm-summary\n  \
                      kubewasm new --lang rust cm-summary\n\n  \
                      # A Python plugin in another directory\n  \
                      kubewasm new --lang python cm-summary --dir ~/src/cm-summary\n\n  \
                      # A JavaScript plugin using the SDKs of a kubewasm checkout\n  \
                      kubewasm new --lang js cm-summary --sdk ~/src/kubewasm/plugins"
    )]
    New(NewArgs),
    /// Run table tests (YAML cases) against a plugin, without a cluster
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Run every case in ./cases against the plugin\n  \
                      kubewasm test sample-controller.wasm ./cases"
    )]
    Test(TestArgs),
    /// Check a plugin file and print what it declares
    #[command(help_template = COMMAND_TEMPLATE, after_help = "  # Check a plugin and print its manifest\n  kubewasm check ./plugins/sample-controller.wasm")]
    Check(CheckArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Directory of plugins: NAME.wasm files, each with optional settings in NAME.toml
    #[arg(long, value_name = "DIR")]
    plugins: PathBuf,

    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config)
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,

    /// Serve only this namespace (repeatable; default: all namespaces)
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    namespaces: Vec<String>,

    /// Plugins to run: '*' for all, 'name' to enable one, '-name' to disable one
    #[arg(long, value_name = "LIST", default_value = "*")]
    controllers: crate::app::ControllerFilter,

    /// Address of the /metrics endpoint
    #[arg(long, value_name = "ADDR", default_value = ":8080", value_parser = parse_addr)]
    metrics_addr: SocketAddr,

    /// Address of the /healthz and /readyz endpoints
    #[arg(long, value_name = "ADDR", default_value = ":8081", value_parser = parse_addr)]
    health_addr: SocketAddr,

    /// Elect a leader among replicas with a Lease; standbys keep caches warm and do not write
    #[arg(long)]
    leader_elect: bool,

    /// Name of the leader election Lease
    #[arg(long, value_name = "NAME", default_value = "kubewasm")]
    lease_name: String,

    /// Namespace of the leader election Lease
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    lease_namespace: String,

    /// Follow the plugin directory and hot-reload added, replaced and removed plugins
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    watch: bool,

    /// ConfigMap (NAMESPACE/NAME) listing the running plugins; plugin load Events are about it
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = "default/kubewasm-plugins")]
    status_configmap: String,

    /// How long a graceful shutdown may take before the host stops at once
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    grace_period: Duration,

    #[command(flatten)]
    cache: CacheArgs,
}

/// Go-style listen addresses: `:8080` means every interface.
fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse().map_err(|_| format!("{text:?} is not an address such as :8080 or 127.0.0.1:8080"))
}

/// Durations as kubectl writes them: `500ms`, `30s`, `5m`, `1h`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is not a duration such as 30s"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{text:?} is not a duration such as 500ms, 30s, 5m or 1h")),
    }
}

#[derive(Args)]
struct RbacArgs {
    /// Directory of plugins (NAME.wasm with optional NAME.toml)
    #[arg(long, value_name = "DIR")]
    plugins: PathBuf,

    /// Plugins to include: '*' for all, 'name' to include one, '-name' to leave one out
    #[arg(long, value_name = "LIST", default_value = "*")]
    controllers: crate::app::ControllerFilter,

    /// Also grant the leader election Lease in this namespace
    #[arg(long, value_name = "NAMESPACE")]
    lease_namespace: Option<String>,

    /// Also grant writing the status ConfigMap (NAMESPACE/NAME) that `kubewasm run` keeps
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = "default/kubewasm-plugins")]
    status_configmap: String,

    /// Bind the roles to this service account (NAMESPACE:NAME)
    #[arg(long, value_name = "NAMESPACE:NAME", default_value = "kubewasm:kubewasm", conflicts_with = "user")]
    service_account: String,

    /// Bind the roles to this user instead of a service account
    #[arg(long, value_name = "NAME")]
    user: Option<String>,

    /// Name of the roles and bindings
    #[arg(long, value_name = "NAME", default_value = "kubewasm")]
    name: String,

    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Args)]
struct NewArgs {
    /// The plugin's name: a DNS-1123 label (lowercase letters, digits and '-')
    #[arg(value_name = "NAME")]
    name: String,

    /// The language of the plugin
    #[arg(long, value_name = "LANG", value_parser = ["rust", "python", "js"])]
    lang: String,

    /// Directory to create the project in; must not exist or be empty (default: ./NAME)
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// The plugins/ directory of a kubewasm checkout, holding the SDKs the project uses
    /// (default: the checkout kubewasm was built from, else $KUBEWASM_SDK_DIR)
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

#[derive(Args)]
struct TestArgs {
    /// The plugin file (a WebAssembly component)
    #[arg(value_name = "PLUGIN.wasm")]
    plugin: PathBuf,

    /// Directory of test cases (*.yaml)
    #[arg(value_name = "CASES_DIR")]
    cases: PathBuf,

    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Args)]
struct CacheArgs {
    /// Directory for precompiled plugins (default: $XDG_CACHE_HOME/kubewasm/artifacts)
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,

    /// Compile every time instead of using precompiled plugins
    #[arg(long)]
    no_cache: bool,
}

impl CacheArgs {
    fn dir(&self) -> Option<PathBuf> {
        if self.no_cache { None } else { self.cache_dir.clone().or_else(ArtifactCache::default_dir) }
    }
}

#[derive(Args)]
struct CheckArgs {
    /// The plugin file (a WebAssembly component); settings are read from NAME.toml beside it
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,

    #[command(flatten)]
    cache: CacheArgs,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // A host logs what it does; one-shot commands only what went wrong (RUST_LOG overrides).
    init_logging(if matches!(cli.command, Command::Run(_)) { "info" } else { "warn" });
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Check(args) => check(args).await,
            Command::Run(args) => run(args).await,
            Command::Rbac(args) => rbac(args).await,
            Command::Test(args) => test(args).await,
            Command::New(args) => new(args),
        }
    });
    match result {
        Ok(code) => code,
        Err(message) => fail(message),
    }
}

fn fail(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

/// Logs go to stderr; `RUST_LOG` (e.g. `kubewasm=debug`) sets the level.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    use std::io::IsTerminal;
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal()).init();
}

fn new_loader(cache: &CacheArgs) -> Result<Loader, String> {
    let runtime = Runtime::new(RuntimeConfig::default()).map_err(|e| e.to_string())?;
    Ok(Loader::new(Arc::new(runtime), cache.dir().map(ArtifactCache::new), LimitPolicy::default()))
}

async fn run(args: RunArgs) -> Result<ExitCode, String> {
    let Some((status_namespace, status_name)) = args.status_configmap.split_once('/') else {
        return Err(format!("--status-configmap {:?}: write it as NAMESPACE/NAME", args.status_configmap));
    };
    let config = crate::app::RunConfig {
        watch: args.watch,
        status_namespace: status_namespace.into(),
        status_name: status_name.into(),
        artifacts: args.cache.dir(),
        plugins: args.plugins,
        kubeconfig: args.kubeconfig,
        namespaces: args.namespaces,
        controllers: args.controllers,
        metrics_addr: args.metrics_addr,
        health_addr: args.health_addr,
        leader_elect: args.leader_elect,
        lease_name: args.lease_name,
        lease_namespace: args.lease_namespace,
        grace_period: args.grace_period,
    };
    crate::app::run(config).await.map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

async fn rbac(args: RbacArgs) -> Result<ExitCode, String> {
    let grantee = match args.user {
        Some(user) => crate::rbac::Grantee::User(user),
        None => match args.service_account.split_once(':') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                crate::rbac::Grantee::ServiceAccount { namespace: namespace.into(), name: name.into() }
            }
            _ => return Err(format!("--service-account {:?}: write it as NAMESPACE:NAME", args.service_account)),
        },
    };
    let loader = new_loader(&args.cache)?;
    let mut manifests = Vec::new();
    for path in crate::app::plugin_files(&args.plugins).map_err(|e| e.to_string())? {
        let plugin = loader.load(&path).await.map_err(|e| format!("{}: {e}", path.display()))?;
        if args.controllers.enables(&plugin.described.manifest.name) {
            manifests.push(plugin.described.manifest);
        }
    }
    let status_namespace = args.status_configmap.split_once('/').map(|(ns, _)| ns.to_string());
    let host = crate::rbac::HostNeeds { lease_namespace: args.lease_namespace, status_namespace };
    print!("{}", crate::rbac::render(&manifests, &host, &grantee, &args.name));
    Ok(ExitCode::SUCCESS)
}

fn new(args: NewArgs) -> Result<ExitCode, String> {
    use crate::scaffold;
    let lang: scaffold::Lang = args.lang.parse().map_err(|e: scaffold::ScaffoldError| e.to_string())?;
    let options = scaffold::Options {
        lang,
        dir: args.dir.unwrap_or_else(|| PathBuf::from(&args.name)),
        name: args.name,
        sdks: scaffold::sdk_dir(args.sdk).map_err(|e| e.to_string())?,
    };
    let created = scaffold::create(&options).map_err(|e| e.to_string())?;
    print!("{}", scaffold::summary(&options, &created));
    Ok(ExitCode::SUCCESS)
}

async fn test(args: TestArgs) -> Result<ExitCode, String> {
    let loader = new_loader(&args.cache)?;
    let plugin = loader.load(&args.plugin).await.map_err(|e| format!("{}: {e}", args.plugin.display()))?;
    let mut report = String::new();
    let outcome = crate::tabletest::run_dir(loader.runtime(), &plugin, &LimitPolicy::default(), &args.cases, &mut report).await;
    print!("{report}");
    let (_, failed) = outcome.map_err(|e| e.to_string())?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn check(args: CheckArgs) -> Result<ExitCode, String> {
    let loader = new_loader(&args.cache)?;
    let plugin = loader.load(&args.file).await.map_err(|e| format!("{}: {e}", args.file.display()))?;
    print!("{}", describe_plugin(&plugin));
    Ok(ExitCode::SUCCESS)
}

/// What `kubewasm check` prints: the plugin's identity, resources, permissions and limits.
fn describe_plugin(plugin: &LoadedPlugin) -> String {
    use std::fmt::Write;
    let m: &Manifest = &plugin.described.manifest;
    let limits = plugin.described.limits;
    let list = |items: Vec<String>| if items.is_empty() { "<none>".to_string() } else { items.join(", ") };
    let mut out = String::new();
    let _ = writeln!(out, "Name:            {}", m.name);
    let _ = writeln!(out, "Version:         {}", m.version);
    let _ = writeln!(out, "File:            {}", plugin.path.display());
    let _ = writeln!(out, "Digest:          sha256:{}", plugin.digest);
    let selector = m.primary_selector.as_ref().map(|s| format!(" (selector {s})")).unwrap_or_default();
    let _ = writeln!(out, "Primary:         {}{selector}", m.primary);
    let _ = writeln!(out, "Owns:            {}", list(m.owns.iter().map(ToString::to_string).collect()));
    let watches = m
        .watches
        .iter()
        .map(|w| {
            let mapping = match &w.mapping {
                crate::manifest::Mapping::OwnerReferences => "owner references".to_string(),
                crate::manifest::Mapping::Label(key) => format!("label {key}"),
                crate::manifest::Mapping::MapRelated => "map-related".to_string(),
            };
            let selector = w.selector.as_ref().map(|s| format!(", selector {s}")).unwrap_or_default();
            format!("{} (by {mapping}{selector})", w.resource)
        })
        .collect();
    let _ = writeln!(out, "Watches:         {}", list(watches));
    let _ = writeln!(out, "Finalizer:       {}", m.finalizer.as_deref().unwrap_or("<none>"));
    let resync = m.resync.map(|d| format!("{}s", d.as_secs())).unwrap_or_else(|| "off".into());
    let _ = writeln!(out, "Resync:          {resync}");
    let _ = writeln!(out, "Max concurrency: {}", m.max_concurrency);
    let _ = writeln!(out, "Limits:          deadline {} ms, memory {} MiB", limits.deadline.as_millis(), limits.memory_bytes >> 20);
    let _ = writeln!(out, "Permissions:");
    let _ = writeln!(out, "  {:<44} {:<12} {:<40} NAMESPACES", "RESOURCE", "SUBRESOURCE", "VERBS");
    let implied = m.cached_resources().into_iter().filter(|g| **g == m.primary || m.owns.contains(g) || m.watches.iter().any(|w| &w.resource == *g));
    for gvk in implied {
        let _ = writeln!(out, "  {:<44} {:<12} {:<40} *", gvk.to_string(), "", "get,list,watch (implied)");
    }
    for p in &m.permissions {
        let verbs: Vec<&str> = p.verbs.iter().map(|v| v.as_str()).collect();
        let namespaces = if p.namespaces.is_empty() { "*".to_string() } else { p.namespaces.iter().cloned().collect::<Vec<_>>().join(",") };
        let sub = p.subresource.map(|s| s.as_str()).unwrap_or("");
        let _ = writeln!(out, "  {:<44} {:<12} {:<40} {namespaces}", p.resource.to_string(), sub, verbs.join(","));
    }
    out
}
