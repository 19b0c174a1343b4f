//! The command line: `kubewasm run | check | rbac | webhooks | push | pull | new | build | test | record | finalizers | rollout`, with
//! help that reads like kubectl's. Parses flags into plain values and calls the library; no logic
//! of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tracing::level_filters::LevelFilter;

use crate::logging::Levels;
use crate::manifest::{LimitPolicy, Manifest};
use crate::plugin::artifact::ArtifactCache;
use crate::plugin::{LoadedPlugin, Loader};
use crate::runtime::{Runtime, RuntimeConfig};
use crate::supervisor::ControllerFilter;

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

// Parsed once per process: the size of `run`'s arguments costs nothing.
#[allow(clippy::large_enum_variant)]
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
    /// Print the webhook configurations and CRD conversion stanzas for the plugins in a directory
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # For a host behind the Service kubewasm/kubewasm-webhooks, with a cert-manager CA, into Git\n  \
                      kubewasm webhooks --plugins ./plugins --webhook-service kubewasm/kubewasm-webhooks --ca-bundle ca.crt > webhooks.yaml\n\n  \
                      # Applied directly (server-side, as the host's own writer would)\n  \
                      kubewasm webhooks --plugins ./plugins --webhook-url https://10.0.0.5:9443 --ca-bundle ca.crt \\\n    \
                      | kubectl apply --server-side --field-manager=kubewasm-webhooks -f -\n\n  \
                      Kinds are resolved without a cluster: a custom kind is taken as namespaced, its CRD named PLURAL.GROUP."
    )]
    Webhooks(WebhooksArgs),
    /// Take a removed plugin's finalizer off the objects it still holds
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # A plugin was removed while objects still carry its finalizer (they stay Terminating)\n  \
                      kubewasm finalizers release sample-controller\n\n  \
                      # Without the host's status ConfigMap: name the finalizer and the kind\n  \
                      kubewasm finalizers release sample-controller --finalizer example.com/cleanup --resource Foo.v1alpha1.samplecontroller.k8s.io"
    )]
    Finalizers(FinalizersArgs),
    /// See how a candidate version (NAME.next.wasm) compares in its shadow run, and promote it
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Copy a new version beside the live one: the host runs it in the shadow (dry runs only)\n  \
                      cp sample-controller.wasm ./plugins/sample-controller.next.wasm\n\n  \
                      # How its reconciles compared with the live version's, and the first diffs\n  \
                      kubewasm rollout status sample-controller\n\n  \
                      # Make it the live version (the host reloads it, and rolls it back if it fails)\n  \
                      kubewasm rollout promote sample-controller --plugins ./plugins"
    )]
    Rollout(RolloutArgs),
    /// Show the ring of sharded replicas: each shard's state, its Lease and the objects it has
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # The replicas of the ring `kubewasm` in kube-system, and who assigns\n  \
                      kubewasm shards --ring kubewasm --lease-namespace kube-system --lease-name kubewasm"
    )]
    Shards(ShardsArgs),
    /// Create a plugin project: a small working controller, a README and a table-test case
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # A Rust plugin in ./cm-summary\n  \
                      kubewasm new --lang rust cm-summary\n\n  \
                      # A Python plugin in another directory\n  \
                      kubewasm new --lang python cm-summary --dir ~/src/cm-summary\n\n  \
                      # A JavaScript plugin using the SDKs of a kubewasm checkout\n  \
                      kubewasm new --lang js cm-summary --sdk ~/src/kubewasm/plugins\n\n  \
                      # A Go plugin (built with `kubewasm build --lang go`)\n  \
                      kubewasm new --lang go cm-summary\n\n  \
                      # A C plugin (built with `kubewasm build --lang c`)\n  \
                      kubewasm new --lang c cm-summary"
    )]
    New(NewArgs),
    /// Build a Go or C plugin into a component: the language's compiler for WebAssembly, then the WIT world embedded
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Build the Go plugin in the current directory into my-controller.wasm\n  \
                      kubewasm build --lang go . -o my-controller.wasm\n\n  \
                      # Build the C plugin in ./my-controller (clang-16 and wasi-libc; $CC and $CFLAGS apply)\n  \
                      kubewasm build --lang c my-controller\n\n  \
                      # Other languages build with their own tools:\n  \
                      #   Rust: cargo build --release --target wasm32-wasip2\n  \
                      #   Python: kubewasm-py build app.py -o NAME.wasm    JavaScript: kubewasm-js build app.js -o NAME.wasm"
    )]
    Build(BuildArgs),
    /// Run table tests (YAML cases) against a plugin, without a cluster
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = TEST_HELP
    )]
    Test(TestArgs),
    /// Record what a plugin reads and does for objects in the cluster as table-test cases
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Turn what the plugin does with Foo team-a/web now into a case, replayable offline\n  \
                      kubewasm record sample-controller.wasm team-a/web -o cases/\n  \
                      kubewasm test sample-controller.wasm cases/\n\n  \
                      # Check a new version against recorded cases\n  \
                      kubewasm test sample-controller-v2.wasm cases/\n\n  \
                      The plugin runs against a snapshot of what it may read, listed as the kubeconfig's user;\n  \
                      its writes and Events are recorded, never sent. Secrets' values are never written out."
    )]
    Record(RecordArgs),
    /// Check a plugin file and print what it declares
    #[command(help_template = COMMAND_TEMPLATE, after_help = "  # Check a plugin and print its manifest\n  kubewasm check ./plugins/sample-controller.wasm")]
    Check(CheckArgs),
    /// Push a plugin to an OCI registry (the Wasm artifact layout), checked first
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Push, then run it from a Plugin resource that names ghcr.io/team/sample-controller:1.0\n  \
                      kubewasm push sample-controller.wasm ghcr.io/team/sample-controller:1.0\n\n  \
                      # Credentials come from the docker config file (docker login, or $DOCKER_CONFIG)"
    )]
    Push(PushArgs),
    /// Pull a plugin from an OCI registry into a directory, verified by digest
    #[command(
        help_template = COMMAND_TEMPLATE,
        after_help = "  # Into the plugin directory of a host run with --plugins ./plugins\n  \
                      kubewasm pull ghcr.io/team/sample-controller:1.0 -o ./plugins"
    )]
    Pull(PullArgs),
    /// What `kubewasm run` runs to compile a plugin: the module on stdin, into an artifact cache
    #[command(name = "compile-artifact", hide = true)]
    CompileArtifact(CompileArtifactArgs),
}

#[derive(Args)]
struct CompileArtifactArgs {
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// Compile for an engine without deadlines (epoch interruption off)
    #[arg(long)]
    no_deadlines: bool,
}

/// How registries are reached.
#[derive(Args)]
struct RegistryArgs {
    /// A registry (HOST or HOST:PORT) spoken to over plain HTTP; loopback registries always
    /// are (repeatable)
    #[arg(long, value_name = "HOST[:PORT]")]
    insecure_registry: Vec<String>,

    /// The longest a pull may take as a whole (token, tag, manifest and module), however the
    /// registry trickles
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pull_timeout: Duration,

    /// The largest module pulled, counted as it arrives (e.g. 256Mi); a larger one is refused
    /// (a Plugin's condition: TooLarge)
    #[arg(long, value_name = "QUANTITY", default_value = "256Mi", value_parser = parse_bytes)]
    max_module_bytes: u64,
}

impl RegistryArgs {
    fn options(&self) -> crate::oci::RegistryOptions {
        crate::oci::RegistryOptions {
            insecure: self.insecure_registry.clone(),
            pull_timeout: self.pull_timeout,
            max_module_bytes: self.max_module_bytes,
            ..Default::default()
        }
    }
}

#[derive(Args)]
struct PushArgs {
    /// The plugin file (a WebAssembly component)
    #[arg(value_name = "PLUGIN.wasm")]
    file: PathBuf,

    /// Where to push: REGISTRY/REPOSITORY:TAG
    #[arg(value_name = "REFERENCE")]
    reference: String,

    #[command(flatten)]
    registry: RegistryArgs,

    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Args)]
struct PullArgs {
    /// What to pull: REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST
    #[arg(value_name = "REFERENCE")]
    reference: String,

    /// Directory to write REPOSITORY.wasm into
    #[arg(long, short = 'o', value_name = "DIR", default_value = ".")]
    output: PathBuf,

    #[command(flatten)]
    registry: RegistryArgs,

    #[command(flatten)]
    cache: CacheArgs,
}

/// Where plugins come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PluginSource {
    /// The files of --plugins DIR
    Directory,
    /// Plugin resources (plugins.kubewasm.io) in --identity-namespace, pulled from registries
    Resources,
}

/// Where the cluster is: every command that talks to one.
#[derive(Args)]
struct ClusterArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster config)
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

/// The ConfigMap a host keeps its plugins' status in, unless told otherwise.
const DEFAULT_STATUS_CONFIGMAP: &str = "default/kubewasm-plugins";

/// Which host's status the command reads.
#[derive(Args)]
struct StatusArgs {
    /// The host's status ConfigMap (NAMESPACE/NAME)
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = DEFAULT_STATUS_CONFIGMAP)]
    status_configmap: String,
}

#[derive(Args)]
struct RunArgs {
    /// Directory of plugins: NAME.wasm files, each with optional settings in NAME.toml
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,

    /// Where plugins come from: directory (--plugins DIR), resources (Plugin resources in
    /// --identity-namespace), or both (default: directory)
    #[arg(long, value_name = "SOURCE", value_enum, value_delimiter = ',')]
    plugin_source: Vec<PluginSource>,

    #[command(flatten)]
    registry: RegistryArgs,

    #[command(flatten)]
    cluster: ClusterArgs,

    /// Serve only this namespace (repeatable; default: all namespaces)
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    namespaces: Vec<String>,

    /// Plugins to run: '*' for all, 'name' to enable one, '-name' to disable one
    #[arg(long, value_name = "LIST", default_value = "*")]
    controllers: ControllerFilter,

    #[command(flatten)]
    identity: IdentityArgs,

    #[command(flatten)]
    tenancy: TenancyArgs,

    #[command(flatten)]
    webhooks: WebhookArgs,

    /// Timeout of every request the host makes (Lease, finalizers, Events, status, discovery)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    request_timeout: Duration,

    /// How long a plugin's watches may take to list everything before the version is rejected
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    sync_timeout: Duration,

    /// Host-wide budget of plugin memory: the sum of the memory limits of all plugin instances
    /// that exist (each plugin reserves its first at load, the rest as they are made; e.g. 4Gi,
    /// 512Mi)
    #[arg(long, value_name = "QUANTITY", default_value = "4Gi", value_parser = parse_bytes)]
    plugin_memory_budget: u64,

    /// The most of the plugin memory budget one plugin may hold with instances made as its
    /// calls need them (a fraction; its first instance needs only room in the budget), so one
    /// busy plugin leaves room for others to load and grow
    #[arg(long, value_name = "SHARE", default_value = "0.25")]
    plugin_max_budget_share: crate::budget::Share,

    /// Memory a plugin's compilation may take (it runs in a process of its own); one that needs
    /// more is refused
    #[arg(long, value_name = "QUANTITY", default_value = "1Gi", value_parser = parse_bytes)]
    compile_memory: u64,

    /// Time a plugin's compilation may take; one that takes longer is stopped and refused
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    compile_timeout: Duration,

    /// Release a plugin's instances after they have been idle this long
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    idle_instances: Duration,

    /// Quarantine an object after this many plugin faults in a row on it (trap, deadline,
    /// memory): it is not reconciled by that plugin again until it changes or the plugin is
    /// reloaded. 0 never quarantines
    #[arg(long, value_name = "N", default_value_t = crate::controller::DEFAULT_QUARANTINE_AFTER)]
    quarantine_after: u32,

    /// Serve a key queued by a list or a resync in turn with live changes once it has waited
    /// this long: live changes go first, but never starve background work
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    max_queue_wait: Duration,

    /// Roll a hot-reloaded version back to the one before when it fails (faults or errors) on
    /// at least this share of its objects, and on a quarter more of them than the version
    /// before did. 0 never rolls back; `rollback-threshold` in a plugin's [kubewasm] options
    /// overrides it
    #[arg(long, value_name = "SHARE", default_value_t = crate::supervisor::rollout::DEFAULT_THRESHOLD, value_parser = parse_rollback_threshold)]
    rollback_threshold: f64,

    /// How long a hot-reloaded version is watched for a rollback (the version before is kept
    /// in memory meanwhile)
    // The default is rollout::DEFAULT_WINDOW, which runs without a command line (a test keeps them
    // equal).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    rollback_window: Duration,

    /// Promote a candidate (`NAME.next.wasm`, run in the shadow of `NAME.wasm`) once it has
    /// agreed with the live version on this many reconciles and never differed, erred or
    /// faulted: the host renames it over `NAME.wasm`. 0 leaves promotion to `kubewasm rollout
    /// promote`; `promote-after` in the candidate's [kubewasm] options overrides it
    #[arg(long, value_name = "N", default_value_t = 0)]
    promote_after: u64,

    /// Log format: text (one line per record) or json
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,

    /// Level of the host's log, and of the plugins' records (target kubewasm::plugin): trace,
    /// debug, info, warn, error or off. RUST_LOG, when set, replaces it with its directives
    /// (e.g. RUST_LOG=info,kubewasm::client=debug)
    #[arg(long, value_name = "LEVEL", default_value = "info", value_parser = crate::logging::parse_level)]
    log_level: LevelFilter,

    /// Level of one plugin's records (its log records, stdout and stderr), in place of
    /// --log-level or RUST_LOG: e.g. my-plugin=debug to see its debug records, or
    /// noisy-plugin=warn to quiet it. Repeatable
    #[arg(long, value_name = "NAME=LEVEL", value_parser = crate::logging::parse_plugin_level)]
    plugin_log_level: Vec<(String, LevelFilter)>,

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

    /// Namespace of the leader election Lease (and of the shard Leases)
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    lease_namespace: String,

    /// Shard every plugin's objects across the replicas of this ring (needs --leader-elect):
    /// each replica holds a Lease named after itself, reconciles the objects labelled
    /// shard.alpha.sharding.timebertt.dev/RING=<itself>, and the leader assigns them; a plugin
    /// with `sharding = false` in its [kubewasm] options runs on the leader only
    #[arg(long, value_name = "RING")]
    shard_ring: Option<String>,

    /// Who assigns the ring's objects: builtin (the leader) or external (another sharder, such
    /// as kubernetes-controller-sharding's with a ControllerRing)
    #[arg(long, value_name = "WHO", default_value = "builtin")]
    shard_assigner: crate::shard::AssignerMode,

    /// Label writes per second of the built-in assigner (its burst is twice that)
    #[arg(long, value_name = "QPS", default_value_t = 200.0)]
    shard_assign_qps: f64,

    /// Engage member clusters from a directory of kubeconfig files, one per cluster, named by
    /// the file's stem, labelled by the current context's kubewasm.io/labels extension; files
    /// added, changed and removed while the host runs engage and disengage their clusters.
    /// Plugins serve or reach member clusters as their `clusters` export says
    #[arg(long, value_name = "DIR")]
    clusters: Option<PathBuf>,

    /// Engage member clusters from kubeconfig Secrets in --identity-namespace labelled
    /// kubewasm.io/cluster=true (the kubeconfig under the key `value` or `kubeconfig`; the
    /// Secret's name names the cluster, its other labels are the cluster's)
    #[arg(long)]
    cluster_secrets: bool,

    /// UNSAFE: let member kubeconfigs (--clusters, --cluster-secrets) name plain http://
    /// servers and set insecure-skip-tls-verify. Whoever is on the network path then reads the
    /// member credentials and answers for the member; for local test clusters only
    #[arg(long)]
    unsafe_member_clusters_allow_insecure: bool,

    /// The largest response body read from a member cluster's API server (a list page, an
    /// error), counted as it arrives; a larger one fails its request and marks the member
    /// unreachable for a while
    #[arg(long, value_name = "QUANTITY", default_value = "16Mi", value_parser = parse_bytes)]
    member_max_body: u64,

    /// The longest line of a member cluster's watch (one event), counted as it arrives; a
    /// longer one fails the watch (retried) and marks the member unreachable for a while
    #[arg(long, value_name = "QUANTITY", default_value = "4Mi", value_parser = parse_bytes)]
    member_max_watch_line: u64,

    /// Follow the plugin directory and hot-reload added, replaced and removed plugins
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    watch: bool,

    /// ConfigMap (NAMESPACE/NAME) listing the running plugins; plugin load Events are about it
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = DEFAULT_STATUS_CONFIGMAP)]
    status_configmap: String,

    /// How long a graceful shutdown may take before the host stops at once
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    grace_period: Duration,

    #[command(flatten)]
    cache: CacheArgs,

    /// Size limit of the cache directory (compiled plugins, pulled modules, the Plugins' files):
    /// the least recently used compiled plugins and modules are evicted past it (e.g. 1536Mi;
    /// the chart's emptyDir is 2Gi)
    #[arg(long, value_name = "QUANTITY", default_value = "1536Mi", value_parser = parse_bytes)]
    cache_max_bytes: u64,
}

/// Plugins' admission and conversion hooks.
#[derive(clap::Args)]
struct WebhookArgs {
    /// Serve plugins' admission and conversion hooks over HTTPS on this address, on every
    /// replica (hooks need no leader); not served when unset
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    webhook_bind_address: Option<SocketAddr>,

    /// The serving certificate: a directory with tls.crt and tls.key (a mounted cert-manager
    /// Secret; its ca.crt, if there, is the CA bundle the configurations carry), reloaded when it
    /// changes. Without it, the host makes its own CA and certificate, keeps them in the Secret
    /// --webhook-cert-secret of --identity-namespace, shared by the replicas, and rotates them
    /// before they expire
    #[arg(long, value_name = "DIR")]
    webhook_cert_dir: Option<PathBuf>,

    /// The Secret the host keeps its own webhook CA and certificate in
    #[arg(long, value_name = "NAME", default_value = "kubewasm-webhook-certs")]
    webhook_cert_secret: String,

    /// How the API server reaches the hooks (--webhook-url or --webhook-service): the leader
    /// writes the webhook configurations and CRD conversion stanzas pointing there. Without
    /// either, nothing is written: apply what `kubewasm webhooks` prints
    #[command(flatten)]
    endpoint: EndpointArgs,
}

impl WebhookArgs {
    /// The webhook server's configuration, if hooks are served; the host's own certificate in
    /// `namespace`.
    fn config(self, namespace: &str) -> Result<Option<crate::app::WebhookConfig>, String> {
        let endpoint = self.endpoint.endpoint()?;
        let Some(bind) = self.webhook_bind_address else {
            if endpoint.is_some() {
                return Err("--webhook-url and --webhook-service need --webhook-bind-address: the address this host serves hooks on".into());
            }
            return Ok(None);
        };
        let certs = match self.webhook_cert_dir {
            Some(dir) if !dir.is_dir() => return Err(format!("--webhook-cert-dir {}: not a directory", dir.display())),
            Some(dir) => crate::app::WebhookCerts::Dir(dir),
            None => crate::app::WebhookCerts::Secret { namespace: namespace.into(), name: self.webhook_cert_secret },
        };
        let dns_names = endpoint.as_ref().map_or_else(|| vec!["localhost".into()], |e| e.dns_names());
        Ok(Some(crate::app::WebhookConfig { bind, certs, endpoint, dns_names }))
    }
}

/// Go-style listen addresses: `:8080` means every interface.
fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse().map_err(|_| format!("{text:?} is not an address such as :8080 or 127.0.0.1:8080"))
}

/// Byte quantities as Kubernetes writes them: `4Gi`, `512Mi`, `1G`, or plain bytes.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is not a quantity such as 4Gi or 512Mi"))?;
    let scale: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => return Err(format!("{text:?}: the unit must be one of Ki, Mi, Gi, Ti, k, M, G")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("{text:?} is too large"))
}

fn parse_rollback_threshold(text: &str) -> Result<f64, String> {
    let threshold: f64 = text.parse().map_err(|_| format!("{text:?} is not a number such as 0.5"))?;
    crate::plugin::check_rollback_threshold(threshold)
}

/// Durations as kubectl and Go write them: `500ms`, `30s`, `5m`, `1h30m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::duration::parse(text).map_err(|e| e.to_string())
}

/// How plugins act toward the API server.
#[derive(Args)]
struct IdentityArgs {
    /// Who plugins act as: serviceaccount (each its own ServiceAccount kubewasm-plugin-NAME,
    /// impersonated by the host; RBAC decides what it may do) or host (the host's identity)
    #[arg(long, value_name = "MODE", default_value = "serviceaccount")]
    plugin_identity: crate::identity::IdentityMode,

    /// Namespace of the plugins' ServiceAccounts
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    identity_namespace: String,
}

/// What one plugin may take of the host and of the API server, whatever it asks for.
#[derive(Args)]
struct TenancyArgs {
    /// The most requests per second a plugin's rate limit allows (its writes, live reads and
    /// Events); a plugin asking for more (`qps` in its [kubewasm] options) gets this
    #[arg(long, value_name = "QPS", default_value_t = crate::client::DEFAULT_CEILING.qps, value_parser = parse_rate)]
    max_plugin_qps: f64,

    /// The most requests a plugin's rate limit allows at once (`burst` in its options)
    #[arg(long, value_name = "N", default_value_t = crate::client::DEFAULT_CEILING.burst, value_parser = clap::value_parser!(u32).range(1..))]
    max_plugin_burst: u32,

    /// The most watches one plugin may open (one per resource and namespace it reads); a plugin
    /// needing more is refused at admission
    #[arg(long, value_name = "N", default_value_t = crate::identity::AdmissionLimits::default().max_watches)]
    max_plugin_watches: usize,

    /// The most access reviews (SelfSubjectAccessReviews: one per verb, namespace and name of
    /// its rules) one plugin's admission may need; a plugin needing more is refused
    #[arg(long, value_name = "N", default_value_t = crate::identity::AdmissionLimits::default().max_reviews)]
    max_admission_reviews: usize,

    /// Access and rules reviews per second, all admissions together (twice as many at once)
    #[arg(long, value_name = "QPS", default_value_t = crate::identity::AdmissionLimits::default().qps, value_parser = parse_rate)]
    admission_qps: f64,

    /// The ValidatingAdmissionPolicy (and binding of the same name) that must be in force before
    /// a host serving Plugin resources admits any plugin: it lets only users allowed to `use`
    /// identities.kubewasm.io NAME create Plugin NAME. Empty: no such check
    #[arg(long, value_name = "NAME", default_value = "kubewasm-plugin-identity")]
    plugin_identity_policy: String,
}

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!("{text:?} is not a positive number of requests per second")),
    }
}

#[derive(Args)]
struct RbacArgs {
    /// Directory of plugins (NAME.wasm with optional NAME.toml)
    #[arg(long, value_name = "DIR")]
    plugins: PathBuf,

    /// Plugins to include: '*' for all, 'name' to include one, '-name' to leave one out
    #[arg(long, value_name = "LIST", default_value = "*")]
    controllers: ControllerFilter,

    /// Print only this plugin's part (its ServiceAccount, Roles and bindings), to hand to an admin
    #[arg(long, value_name = "NAME")]
    plugin: Option<String>,

    /// Print the Helm chart's values instead: the `plugins` list with each plugin's name and
    /// rules (`kubewasm rbac --plugins DIR --values > v.yaml && helm install kubewasm
    /// charts/kubewasm -f v.yaml`); with --plugin, that plugin's only
    #[arg(long, conflicts_with_all = ["lease", "user", "service_account", "name"])]
    values: bool,

    #[command(flatten)]
    identity: IdentityArgs,

    /// The host runs in a shard ring (`--shard-ring`, the chart's default): also let each plugin's
    /// identity `patch` its primary and owned kinds, which the host labels for their shard
    #[arg(long)]
    sharded: bool,

    /// Namespaces the host serves (repeatable; default: all namespaces)
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    namespaces: Vec<String>,

    /// Also grant the leader election Lease (NAMESPACE/NAME)
    #[arg(long, value_name = "NAMESPACE/NAME")]
    lease: Option<String>,

    /// Also grant writing the status ConfigMap (NAMESPACE/NAME) that `kubewasm run` keeps
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = DEFAULT_STATUS_CONFIGMAP)]
    status_configmap: String,

    /// Bind the host's roles to this service account (NAMESPACE:NAME)
    #[arg(long, value_name = "NAMESPACE:NAME", default_value = "kubewasm:kubewasm", conflicts_with = "user")]
    service_account: String,

    /// Bind the host's roles to this user instead of a service account
    #[arg(long, value_name = "NAME")]
    user: Option<String>,

    /// Name of the host's roles and bindings
    #[arg(long, value_name = "NAME", default_value = "kubewasm")]
    name: String,

    #[command(flatten)]
    webhooks: RbacWebhookArgs,

    #[command(flatten)]
    cache: CacheArgs,
}

/// How the API server reaches the host's hooks, when the configurations point there.
#[derive(Args)]
struct EndpointArgs {
    /// The hooks' base URL (https://HOST[:PORT])
    #[arg(long, value_name = "URL", conflicts_with = "webhook_service")]
    webhook_url: Option<String>,

    /// The Service in front of the replicas: NAMESPACE/NAME[:PORT] (port 443 unless given)
    #[arg(long, value_name = "NAMESPACE/NAME[:PORT]")]
    webhook_service: Option<String>,
}

impl EndpointArgs {
    fn endpoint(&self) -> Result<Option<crate::webhook::configuration::Endpoint>, String> {
        use crate::webhook::configuration::Endpoint;
        match (&self.webhook_url, &self.webhook_service) {
            (Some(url), _) => Endpoint::url(url).map(Some).map_err(|e| format!("--webhook-url: {e}")),
            (None, Some(service)) => Endpoint::service(service).map(Some).map_err(|e| format!("--webhook-service: {e}")),
            (None, None) => Ok(None),
        }
    }
}

/// How the host serves plugins' hooks, as `kubewasm run`'s flags say; granted only when some
/// plugin declares hooks.
#[derive(Args)]
struct RbacWebhookArgs {
    /// With --webhook-url or --webhook-service the host writes the webhook configurations and
    /// CRD conversion stanzas itself, and is granted that
    #[command(flatten)]
    endpoint: EndpointArgs,

    /// The host's webhook certificate is mounted from this directory (cert-manager): no Secret
    /// of its own is granted
    #[arg(long, value_name = "DIR", conflicts_with = "webhook_cert_secret")]
    webhook_cert_dir: Option<PathBuf>,

    /// The Secret of --identity-namespace the host keeps its own webhook CA and certificate in
    #[arg(long, value_name = "NAME", default_value = "kubewasm-webhook-certs")]
    webhook_cert_secret: String,
}

#[derive(Args)]
struct WebhooksArgs {
    /// Directory of plugins (NAME.wasm with optional NAME.toml)
    #[arg(long, value_name = "DIR")]
    plugins: PathBuf,

    /// Plugins to include: '*' for all, 'name' to include one, '-name' to leave one out
    #[arg(long, value_name = "LIST", default_value = "*")]
    controllers: ControllerFilter,

    #[command(flatten)]
    endpoint: EndpointArgs,

    /// The CA bundle (PEM) the API server trusts the host's serving certificate by (a
    /// cert-manager Secret's ca.crt); without it, none is written
    #[arg(long, value_name = "FILE")]
    ca_bundle: Option<PathBuf>,

    /// The host's name (its --lease-name): the configurations are named NAME-PLUGIN
    #[arg(long, value_name = "NAME", default_value = "kubewasm")]
    name: String,

    /// Namespaces the host serves (repeatable; default: all namespaces): the hooks' namespaceSelector
    #[arg(long = "namespace", short = 'n', value_name = "NAMESPACE")]
    namespaces: Vec<String>,

    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Args)]
struct FinalizersArgs {
    #[command(subcommand)]
    command: FinalizersCommand,
}

#[derive(Subcommand)]
enum FinalizersCommand {
    /// Remove a plugin's finalizer from every object that carries it
    Release(ReleaseArgs),
}

#[derive(Args)]
struct ReleaseArgs {
    /// The removed plugin's name (its finalizer and kind are read from the status ConfigMap)
    #[arg(value_name = "NAME")]
    plugin: String,

    #[command(flatten)]
    cluster: ClusterArgs,

    #[command(flatten)]
    status: StatusArgs,

    /// The finalizer to remove (instead of the status ConfigMap's record)
    #[arg(long, value_name = "FINALIZER", requires = "resource")]
    finalizer: Option<String>,

    /// The kind carrying it, as Kind.version.group (instead of the status ConfigMap's record)
    #[arg(long, value_name = "KIND", requires = "finalizer")]
    resource: Option<String>,
}

#[derive(Args)]
struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(Subcommand)]
enum RolloutCommand {
    /// Print how the candidate's shadow reconciles compared with the live version's: counts,
    /// the keys that did not agree, and the first diffs (from the host's status ConfigMap)
    Status(RolloutStatusArgs),
    /// Make the candidate the live version: renames NAME.next.wasm (and NAME.next.toml, if any)
    /// over NAME.wasm in the plugin directory, or sets a Plugin resource's module to its
    /// candidate
    Promote(PromoteArgs),
}

#[derive(Args)]
struct RolloutStatusArgs {
    /// The plugin's name
    #[arg(value_name = "NAME")]
    plugin: String,

    #[command(flatten)]
    cluster: ClusterArgs,

    #[command(flatten)]
    status: StatusArgs,
}

#[derive(Args)]
struct ShardsArgs {
    /// The ring (`kubewasm run --shard-ring`)
    #[arg(long, value_name = "RING", default_value = "kubewasm")]
    ring: String,

    /// Namespace of the shard Leases (`kubewasm run --lease-namespace`)
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    lease_namespace: String,

    /// The leader election Lease: its holder is the ring's assigner
    #[arg(long, value_name = "NAME", default_value = "kubewasm")]
    lease_name: String,

    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args)]
struct PromoteArgs {
    /// The plugin's name
    #[arg(value_name = "NAME")]
    plugin: String,

    /// The host's plugin directory (for a plugin from a directory)
    #[arg(long, value_name = "DIR", required_unless_present = "resource", conflicts_with = "resource")]
    plugins: Option<PathBuf>,

    /// The namespace of the Plugin resource (for a plugin from one): its module becomes its
    /// candidate
    #[arg(long, value_name = "NAMESPACE")]
    resource: Option<String>,

    /// Path to the kubeconfig file, with --resource
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

#[derive(Args)]
struct NewArgs {
    /// The plugin's name: a DNS-1123 label (lowercase letters, digits and '-')
    #[arg(value_name = "NAME")]
    name: String,

    /// The language of the plugin
    #[arg(long, value_name = "LANG", value_parser = ["rust", "python", "js", "go", "c"])]
    lang: String,

    /// What the controller is: `controller` reconciles (reads and writes through the host);
    /// `declarative` answers which children a parent should have, and the host creates, updates
    /// and deletes them
    #[arg(long, value_name = "MODE", value_parser = ["controller", "declarative"], default_value = "controller")]
    mode: String,

    /// Directory to create the project in; must not exist or be empty (default: ./NAME)
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// The plugins/ directory of a kubewasm checkout, holding the SDKs the project uses
    /// (default: $KUBEWASM_SDK_DIR, else the checkout kubewasm was built from)
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

#[derive(Args)]
struct BuildArgs {
    /// The plugin's directory: a Go main package in a Go module, or the .c files of a C plugin
    #[arg(value_name = "DIR", default_value = ".")]
    dir: PathBuf,

    /// The plugin's language (Go or C; Rust, Python and JavaScript build with cargo, kubewasm-py and kubewasm-js)
    #[arg(long, value_name = "LANG", default_value = "go", value_parser = ["go", "c"])]
    lang: String,

    /// The component to write (default: DIR/NAME.wasm, NAME being the directory's name)
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `kubewasm test --help`: the examples and the case format, which is documented nowhere else.
const TEST_HELP: &str = "  # Run every case in ./cases against the plugin
  kubewasm test sample-controller.wasm ./cases

A case is one YAML file:

  description: A Foo gets a Deployment it owns
  settings: {replicas: 2}          # optional: instead of NAME.toml beside the plugin
  now: 2026-01-02T03:04:05Z        # optional: the plugin's wall clock stands still at this time
  cache:                           # what the host's cache holds; every kind the plugin reads
    - {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo,
       metadata: {name: a, namespace: ns, uid: u1}, spec: {deploymentName: a-web, replicas: 1}}
  reconcile: {namespace: ns, name: a}   # the key; no namespace for a cluster-scoped kind
  # or  finalize: {namespace: ns, name: a}
  # or  map: OBJECT                     (map-related of a watched object; expect keys:)
  expect:
    result: done                   # or {requeueAfter: MS}, or {error: CODE, message: SUBSTRING},
                                   # or {fault: trap} (also deadline, memory, oversized)
    calls:                         # every client call, in order, compared exactly (match: fields
                                   # compares each on the fields it gives, see below)
      - apply: OBJECT              # server-side apply (forced); applyStatus: OBJECT
      - create: OBJECT             # also update: OBJECT, updateStatus: OBJECT
      - patch: {apiVersion: v1, kind: Node, name: n1, type: merge, body: {...}}
                                   # type: merge, json or strategic
      - delete: {apiVersion: v1, kind: ConfigMap, namespace: ns, name: x}   # uid: U, on the condition of its UID
    events:                        # compared on the fields given
      - {type: Warning, reason: ErrResourceExists, action: Reconcile, note: \"...\",
         regarding: Foo/ns/a}     # KIND/NAMESPACE/NAME, or KIND/NAME when cluster-scoped
    keys: [ns/a]                   # map cases: the primary keys returned (or result: {fault: trap})
    match: fields                  # optional (default exact): each expected call, and each of a
                                   # declarative answer's children, is compared on the fields it
                                   # gives, at every depth: a map on its keys, a list item by item
                                   # (as many items); so `metadata: {}` or `resources: {}` a typed
                                   # object writes need not be spelled

What is compared: the result always (an error by its code and a substring of its message, a
fault by its kind); the calls, in order, whole unless `match: fields`; the Events and a
declarative answer on the fields each gives; the keys of a map case as a list.

The plugin's writes are stored in the case's cache as an API server stores them, so that a
read after a write sees it: each stored write gets the next resourceVersion (after the highest
in the cache), a created object uid-N and generation 1, a change of spec generation + 1; apply
merges into the object (status apart), create refuses an existing one (already-exists), update
a missing one (not-found) or a stale resourceVersion (conflict), patches merge (JSON patches
apply), delete removes. Field ownership, defaulting and admission are the API server's and are
not modelled.

A declarative plugin's case may expect its answer for the parent (sync, or finalize for a
finalize case) instead of, or besides, the calls the host then makes:
  expect:
    desired:                       # compared on the fields given
      children: [OBJECT, ...]      # as answered, in order
      status: {...}                # as answered (the host adds observedGeneration)
      resyncAfter: 30000           # milliseconds, or null
      finalized: true              # finalize cases

A case that checks a refusal gives settings, no reconcile, finalize or map, and
  expect: {refused: \"suffix must be\"}   # describe must refuse them, saying this";

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
struct RecordArgs {
    /// The plugin file (a WebAssembly component)
    #[arg(value_name = "PLUGIN.wasm")]
    plugin: PathBuf,

    /// The primary objects to record, as NAMESPACE/NAME (NAME for a cluster-scoped kind)
    #[arg(value_name = "KEY", required = true)]
    keys: Vec<String>,

    /// Directory to write the cases to (one KEY.yaml each)
    #[arg(short, long, value_name = "DIR", default_value = "cases")]
    out: PathBuf,

    #[command(flatten)]
    cluster: ClusterArgs,

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
    let (levels, json) = match &cli.command {
        Command::Run(args) => (Levels::from_env(args.log_level, args.plugin_log_level.iter().cloned()), args.log_format == "json"),
        _ => (Levels::from_env(LevelFilter::WARN, []), false),
    };
    levels.init(json);
    if let Command::CompileArtifact(args) = &cli.command {
        let config = RuntimeConfig { deadlines: !args.no_deadlines, ..RuntimeConfig::default() };
        return match crate::plugin::compiler::compile_into(&args.cache_dir, config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => fail(message),
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Check(args) => check(args).await,
            Command::Run(args) => run(args).await,
            Command::Rbac(args) => rbac(args).await,
            Command::Webhooks(args) => webhooks(args).await,
            Command::Finalizers(FinalizersArgs { command: FinalizersCommand::Release(args) }) => release_finalizers(args).await,
            Command::Rollout(RolloutArgs { command: RolloutCommand::Status(args) }) => rollout_status(args).await,
            Command::Rollout(RolloutArgs { command: RolloutCommand::Promote(args) }) => promote(args).await,
            Command::Shards(args) => shards(args).await,
            Command::Test(args) => test(args).await,
            Command::Record(args) => record(args).await,
            Command::New(args) => new(args),
            Command::Build(args) => build(args),
            Command::Push(args) => push(args).await,
            Command::Pull(args) => pull(args).await,
            Command::CompileArtifact(_) => unreachable!("run before the async runtime starts"),
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

fn new_loader(cache: &CacheArgs) -> Result<Loader, String> {
    let runtime = Runtime::new(RuntimeConfig::default()).map_err(|e| e.to_string())?;
    Ok(Loader::new(Arc::new(runtime), cache.dir().map(ArtifactCache::new), LimitPolicy::default()))
}

/// `NAMESPACE/NAME` as a flag gives it.
fn namespaced_name(flag: &str, text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok((ns.into(), name.into())),
        _ => Err(format!("--{flag} {text:?}: write it as NAMESPACE/NAME")),
    }
}

async fn run(args: RunArgs) -> Result<ExitCode, String> {
    let (namespace, name) = namespaced_name("status-configmap", &args.status_configmap)?;
    let sources = if args.plugin_source.is_empty() { vec![PluginSource::Directory] } else { args.plugin_source.clone() };
    let directory = sources.contains(&PluginSource::Directory);
    match (&args.plugins, directory) {
        (None, true) => return Err("give the plugin directory with --plugins DIR, or serve Plugin resources with --plugin-source resources".into()),
        (Some(_), false) => {
            return Err("--plugins DIR is given but --plugin-source leaves out `directory`: add it (--plugin-source directory,resources)".into());
        }
        _ => {}
    }
    if let Some(ring) = &args.shard_ring {
        if !args.leader_elect {
            return Err("--shard-ring needs --leader-elect: the ring's leader assigns the objects and runs the plugins that are not sharded".into());
        }
        crate::selector::label_key(&crate::shard::shard_label(ring)).map_err(|e| format!("--shard-ring {ring:?}: {e}"))?;
    }
    if let Some(dir) = &args.clusters {
        crate::cluster::files::check(dir).map_err(|e| e.to_string())?;
    }
    if args.shard_assign_qps.is_nan() || args.shard_assign_qps <= 0.0 {
        return Err(format!("--shard-assign-qps {}: must be positive", args.shard_assign_qps));
    }
    let webhooks = args.webhooks.config(&args.identity.identity_namespace)?;
    let config = crate::app::RunConfig {
        webhooks,
        clusters: args.clusters,
        cluster_secrets: args.cluster_secrets,
        member_transport: match args.unsafe_member_clusters_allow_insecure {
            true => crate::cluster::kubeconfig::Transport::AllowInsecure,
            false => crate::cluster::kubeconfig::Transport::Verified,
        },
        member_answers: crate::cluster::answers::Caps { max_body: args.member_max_body, max_watch_line: args.member_max_watch_line },
        shard_ring: args.shard_ring,
        shard_assigner: args.shard_assigner,
        shard_assign_limits: crate::client::ClientLimits {
            qps: args.shard_assign_qps,
            burst: (args.shard_assign_qps * 2.0).ceil().min(f64::from(u32::MAX)) as u32,
        },
        plugin_resources: sources.contains(&PluginSource::Resources),
        registries: crate::oci::RegistryOptions { timeout: args.request_timeout, ..args.registry.options() },
        watch: args.watch,
        status: crate::supervisor::StatusObject { namespace, name },
        artifacts: args.cache.dir(),
        cache_max_bytes: args.cache_max_bytes,
        plugins: args.plugins,
        kubeconfig: args.cluster.kubeconfig,
        namespaces: args.namespaces,
        controllers: args.controllers,
        metrics_addr: args.metrics_addr,
        health_addr: args.health_addr,
        leader_elect: args.leader_elect,
        lease_name: args.lease_name,
        lease_namespace: args.lease_namespace,
        grace_period: args.grace_period,
        plugin_identity: args.identity.plugin_identity,
        identity_namespace: args.identity.identity_namespace,
        client_ceiling: crate::client::ClientLimits { qps: args.tenancy.max_plugin_qps, burst: args.tenancy.max_plugin_burst },
        admission: crate::identity::AdmissionLimits {
            max_reviews: args.tenancy.max_admission_reviews,
            max_watches: args.tenancy.max_plugin_watches,
            qps: args.tenancy.admission_qps,
        },
        identity_policy: Some(args.tenancy.plugin_identity_policy).filter(|p| !p.is_empty()),
        request_timeout: args.request_timeout,
        sync_timeout: args.sync_timeout,
        plugin_memory_budget: args.plugin_memory_budget,
        plugin_budget_share: args.plugin_max_budget_share,
        compile: crate::plugin::compiler::ChildCompiler {
            program: std::env::current_exe().map_err(|e| format!("cannot find the kubewasm binary to compile plugins with: {e}"))?,
            memory_bytes: args.compile_memory,
            timeout: args.compile_timeout,
        },
        idle_instances: args.idle_instances,
        quarantine_after: args.quarantine_after,
        max_queue_wait: args.max_queue_wait,
        rollback: crate::supervisor::rollout::Policy {
            threshold: args.rollback_threshold,
            window: args.rollback_window,
            promote_after: args.promote_after,
            ..Default::default()
        },
    };
    crate::app::run(config).await.map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

async fn rbac(args: RbacArgs) -> Result<ExitCode, String> {
    let grantee = match args.user {
        Some(user) => crate::tools::rbac::Grantee::User(user),
        None => match args.service_account.split_once(':') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                crate::tools::rbac::Grantee::ServiceAccount { namespace: namespace.into(), name: name.into() }
            }
            _ => return Err(format!("--service-account {:?}: write it as NAMESPACE:NAME", args.service_account)),
        },
    };
    let mut manifests = manifests(&args.plugins, &args.controllers, &args.cache).await?;
    let per_plugin = args.identity.plugin_identity == crate::identity::IdentityMode::ServiceAccount;
    let host = crate::tools::rbac::HostNeeds {
        lease: args.lease.as_deref().map(|l| namespaced_name("lease", l)).transpose()?,
        status: Some(namespaced_name("status-configmap", &args.status_configmap)?),
        identity_namespace: per_plugin.then(|| args.identity.identity_namespace.clone()),
        namespaces: args.namespaces,
        sharded: args.sharded,
        webhooks: Some(crate::tools::rbac::WebhookNeeds {
            writes: args.webhooks.endpoint.endpoint()?.is_some(),
            cert_secret: args
                .webhooks
                .webhook_cert_dir
                .is_none()
                .then(|| (args.identity.identity_namespace.clone(), args.webhooks.webhook_cert_secret.clone())),
        }),
    };
    if let Some(name) = &args.plugin {
        if !manifests.iter().any(|m| m.name == *name) {
            return Err(format!("--plugin {name:?}: no such plugin in {}", args.plugins.display()));
        }
        if !per_plugin {
            return Err("--plugin prints a plugin's own identity: it needs --plugin-identity=serviceaccount".into());
        }
        manifests.retain(|m| m.name == *name);
    }
    let output = match (&args.plugin, args.values) {
        (_, true) if !per_plugin => return Err("--values prints the chart's per-plugin identities: it needs --plugin-identity=serviceaccount".into()),
        (_, true) => crate::tools::rbac::render_values(&manifests, &host.namespaces, host.sharded),
        (Some(_), false) => crate::tools::rbac::render_plugin(&manifests[0], &host),
        (None, false) => crate::tools::rbac::render(&manifests, &host, &grantee, &args.name),
    };
    for warning in crate::tools::rbac::host_object_overlaps(&manifests, &host) {
        eprintln!("warning: {warning}");
    }
    print!("{output}");
    Ok(ExitCode::SUCCESS)
}

/// The manifests of the plugins in `dir` that `controllers` enables, loaded without a cluster.
async fn manifests(dir: &std::path::Path, controllers: &ControllerFilter, cache: &CacheArgs) -> Result<Vec<Manifest>, String> {
    let loader = new_loader(cache)?;
    let mut manifests = Vec::new();
    for path in crate::supervisor::plugin_files(dir).map_err(|e| e.to_string())? {
        let plugin = loader.load(&path).await.map_err(|e| format!("{}: {e}", path.display()))?;
        if controllers.enables(&plugin.described.manifest.name) {
            manifests.push(plugin.described.manifest);
        }
    }
    Ok(manifests)
}

async fn webhooks(args: WebhooksArgs) -> Result<ExitCode, String> {
    let endpoint = args.endpoint.endpoint()?.ok_or("say how the API server reaches the hooks: --webhook-service NAMESPACE/NAME[:PORT] or --webhook-url URL")?;
    let ca = match &args.ca_bundle {
        Some(file) => {
            let pem = std::fs::read(file).map_err(|e| format!("--ca-bundle {}: {e}", file.display()))?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(format!("--ca-bundle {}: not a PEM certificate bundle", file.display()));
            }
            Some(pem)
        }
        None => None,
    };
    let manifests = manifests(&args.plugins, &args.controllers, &args.cache).await?;
    if !manifests.iter().any(|m| !m.hooks.is_empty()) {
        eprintln!("warning: no plugin in {} declares hooks", args.plugins.display());
    }
    let options = crate::tools::webhooks::Options { host: args.name, endpoint, ca, namespaces: args.namespaces };
    print!("{}", crate::tools::webhooks::render(&manifests, &options));
    Ok(ExitCode::SUCCESS)
}

async fn release_finalizers(args: ReleaseArgs) -> Result<ExitCode, String> {
    let (namespace, name) = namespaced_name("status-configmap", &args.status.status_configmap)?;
    let client = crate::client::connect(args.cluster.kubeconfig.as_deref(), "finalizers-release").await.map_err(|e| e.to_string())?;
    let target = match (args.finalizer, args.resource) {
        (Some(finalizer), Some(resource)) => {
            crate::tools::finalizers::Leftover { finalizer, primary: resource.parse().map_err(|e: String| format!("--resource: {e}"))? }
        }
        _ => crate::tools::finalizers::recorded(&client, &namespace, &name, &args.plugin).await.map_err(|e| e.to_string())?,
    };
    let released = crate::tools::finalizers::release(&client, &target).await.map_err(|e| e.to_string())?;
    for key in &released {
        println!("released {} {key}", target.primary.kind);
    }
    println!("{} object(s) no longer carry {}", released.len(), target.finalizer);
    Ok(ExitCode::SUCCESS)
}

async fn rollout_status(args: RolloutStatusArgs) -> Result<ExitCode, String> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (namespace, name) = namespaced_name("status-configmap", &args.status.status_configmap)?;
    let client = crate::client::connect(args.cluster.kubeconfig.as_deref(), "rollout-status").await.map_err(|e| e.to_string())?;
    let configmap = kube::Api::<ConfigMap>::namespaced(client, &namespace)
        .get(&name)
        .await
        .map_err(|e| format!("cannot read the status ConfigMap {namespace}/{name}: {e} (is --status-configmap the host's?)"))?;
    print!("{}", crate::supervisor::status::rollout_of(&configmap.data.unwrap_or_default(), &args.plugin, &format!("{namespace}/{name}"))?);
    Ok(ExitCode::SUCCESS)
}

async fn shards(args: ShardsArgs) -> Result<ExitCode, String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let client = crate::client::connect(args.cluster.kubeconfig.as_deref(), "shards").await.map_err(|e| e.to_string())?;
    let api = kube::Api::<Lease>::namespaced(client, &args.lease_namespace);
    let selector = format!("{}={}", crate::shard::RING_LABEL, args.ring);
    let leases = api
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("cannot list the shard Leases in {}: {e}", args.lease_namespace))?
        .items;
    let leader = api.get_opt(&args.lease_name).await.map_err(|e| format!("cannot read the leader Lease {}: {e}", args.lease_name))?;
    let leader = leader.and_then(|l| l.spec).and_then(|s| s.holder_identity);
    print!("{}", crate::shard::lease::table(&args.ring, &leases, leader.as_deref(), k8s_openapi::jiff::Timestamp::now()));
    Ok(ExitCode::SUCCESS)
}

async fn promote(args: PromoteArgs) -> Result<ExitCode, String> {
    if let Some(namespace) = &args.resource {
        let client = crate::client::connect(args.kubeconfig.as_deref(), "rollout-promote").await.map_err(|e| e.to_string())?;
        let module = crate::delivery::promote(&client, namespace, &args.plugin).await.map_err(|e| e.to_string())?;
        println!("promoted {}: Plugin {namespace}/{} now runs {module}; the host reloads it and watches it for a rollback", args.plugin, args.plugin);
        return Ok(ExitCode::SUCCESS);
    }
    let live = args.plugins.unwrap_or_default().join(format!("{}.wasm", args.plugin));
    crate::plugin::promote(&live).map_err(|e| format!("cannot promote {}'s candidate: {e}", args.plugin))?;
    println!(
        "promoted {}: {} is now {}; the host reloads it and watches it for a rollback",
        args.plugin,
        crate::plugin::candidate_of(&live).display(),
        live.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn new(args: NewArgs) -> Result<ExitCode, String> {
    use crate::tools::scaffold;
    let lang: scaffold::Lang = args.lang.parse().map_err(|e: scaffold::ScaffoldError| e.to_string())?;
    let mode: scaffold::Mode = args.mode.parse().map_err(|e: scaffold::ScaffoldError| e.to_string())?;
    let options = scaffold::Options {
        lang,
        mode,
        dir: args.dir.unwrap_or_else(|| PathBuf::from(&args.name)),
        name: args.name,
        sdks: scaffold::sdk_dir(args.sdk).map_err(|e| e.to_string())?,
    };
    let created = scaffold::create(&options).map_err(|e| e.to_string())?;
    print!("{}", scaffold::summary(&options, &created));
    Ok(ExitCode::SUCCESS)
}

fn build(args: BuildArgs) -> Result<ExitCode, String> {
    let output = match args.output {
        Some(output) => output,
        None => {
            let dir = args.dir.canonicalize().map_err(|e| format!("{}: {e}", args.dir.display()))?;
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "plugin".into());
            dir.join(format!("{name}.wasm"))
        }
    };
    let (bytes, toolchain, took) = if args.lang == "c" {
        let built = crate::tools::build::c::build(&crate::tools::build::c::CBuild::new(&args.dir, &output)).map_err(|e| e.to_string())?;
        (built.component_bytes, "clang".to_string(), built.compile + built.componentize)
    } else {
        let built = crate::tools::build::go::build(&crate::tools::build::go::GoBuild::new(&args.dir, &output)).map_err(|e| e.to_string())?;
        (built.component_bytes, built.go_version, built.go_build + built.componentize)
    };
    println!("built {} ({} KiB) with {toolchain} in {:.1}s", output.display(), bytes.div_ceil(1024), took.as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

async fn test(args: TestArgs) -> Result<ExitCode, String> {
    let loader = new_loader(&args.cache)?;
    let plugin = loader.load(&args.plugin).await.map_err(|e| format!("{}: {e}", args.plugin.display()))?;
    let mut report = String::new();
    let outcome = crate::tools::tabletest::run_dir(loader.runtime(), &plugin, &LimitPolicy::default(), &args.cases, &mut report).await;
    print!("{report}");
    let (_, failed) = outcome.map_err(|e| e.to_string())?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn record(args: RecordArgs) -> Result<ExitCode, String> {
    use crate::resource::ObjectKey;
    let keys: Vec<ObjectKey> = args
        .keys
        .iter()
        .map(|key| match key.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => Ok(ObjectKey::new(Some(ns), name)),
            None if !key.is_empty() => Ok(ObjectKey::new(None, key)),
            _ => Err(format!("{key:?} is not a key: write NAMESPACE/NAME, or NAME for a cluster-scoped kind")),
        })
        .collect::<Result<_, _>>()?;
    let loader = new_loader(&args.cache)?;
    let plugin = loader.load(&args.plugin).await.map_err(|e| format!("{}: {e}", args.plugin.display()))?;
    let client = crate::client::connect(args.cluster.kubeconfig.as_deref(), "record").await.map_err(|e| e.to_string())?;
    let written = crate::tools::recording::record(loader.runtime(), &plugin, client, &keys, &args.out).await.map_err(|e| e.to_string())?;
    for path in &written {
        println!("recorded {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

async fn push(args: PushArgs) -> Result<ExitCode, String> {
    let reference = crate::oci::parse_reference(&args.reference).map_err(|e| e.to_string())?;
    // A registry should never hold what a host would refuse.
    let plugin = new_loader(&args.cache)?.load(&args.file).await.map_err(|e| format!("{}: {e}", args.file.display()))?;
    let wasm = std::fs::read(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let (registries, _scratch) = registries(&args.registry, &args.cache)?;
    let digest = registries.push(&reference, wasm).await.map_err(|e| e.to_string())?;
    let m = &plugin.described.manifest;
    println!("pushed {} {} to {} ({digest})", m.name, m.version, reference.whole());
    Ok(ExitCode::SUCCESS)
}

async fn pull(args: PullArgs) -> Result<ExitCode, String> {
    let reference = crate::oci::parse_reference(&args.reference).map_err(|e| e.to_string())?;
    let (registries, _scratch) = registries(&args.registry, &args.cache)?;
    let pulled = registries.pull(&reference).await.map_err(|e| e.to_string())?;
    let name = reference.repository().rsplit('/').next().unwrap_or("plugin");
    let target = args.output.join(format!("{name}.wasm"));
    let module = std::fs::read(&pulled.path).map_err(|e| format!("{}: {e}", pulled.path.display()))?;
    crate::oci::write_atomically(&target, &module).map_err(|e| e.to_string())?;
    println!("pulled {} ({}) to {}", reference.whole(), pulled.manifest_digest, target.display());
    Ok(ExitCode::SUCCESS)
}

/// Registries, with pulled modules cached in the artifact cache (or, without one, in a
/// directory of this command's own, removed when the returned guard drops).
fn registries(registry: &RegistryArgs, cache: &CacheArgs) -> Result<(crate::oci::Registries, Option<tempfile::TempDir>), String> {
    let (dir, scratch) = match cache.dir() {
        Some(dir) => (dir.join("oci"), None),
        None => {
            let scratch = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
            (scratch.path().to_path_buf(), Some(scratch))
        }
    };
    Ok((crate::oci::Registries::new(&registry.options(), dir), scratch))
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
    if let Some(composition) = &m.composition {
        let children = composition.child_kinds(&m.owns).iter().map(|r| format!("{} ({})", r.resource, r.update)).collect();
        let selector = match composition.selector {
            crate::manifest::ChildSelector::Generated => "generated (kubewasm.io/controller-uid)",
            crate::manifest::ChildSelector::ParentSpec => "the parent's spec.selector",
        };
        let _ = writeln!(out, "Declarative:     children {}; claimed by {selector}", list(children));
    }
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
    let _ = writeln!(out, "  {:<44} {:<12} {:<40} {:<20} NAMES", "RESOURCE", "SUBRESOURCE", "VERBS", "NAMESPACES");
    let implied = m.cached_resources().into_iter().filter(|g| **g == m.primary || m.owns.contains(g) || m.watches.iter().any(|w| &w.resource == *g));
    for gvk in implied {
        let _ = writeln!(out, "  {:<44} {:<12} {:<40} {:<20} *", gvk.to_string(), "", "get,list,watch (implied)", "*");
    }
    let join = |set: &std::collections::BTreeSet<String>| if set.is_empty() { "*".to_string() } else { set.iter().cloned().collect::<Vec<_>>().join(",") };
    for p in &m.permissions {
        let verbs: Vec<&str> = p.verbs.iter().map(|v| v.as_str()).collect();
        let sub = p.subresource.as_deref().unwrap_or("");
        let _ = writeln!(out, "  {:<44} {:<12} {:<40} {:<20} {}", p.resource.to_string(), sub, verbs.join(","), join(&p.namespaces), join(&p.names));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag's default is the one the rollout policy runs with when there is no command line.
    #[test]
    fn the_rollback_windows_default_is_the_policys() {
        let Command::Run(args) = Cli::try_parse_from(["kubewasm", "run"]).unwrap().command else { panic!("not run") };
        assert_eq!(args.rollback_window, crate::supervisor::rollout::DEFAULT_WINDOW);
    }

    #[test]
    fn log_levels_are_flags_and_a_bad_one_says_what_to_write() {
        let Command::Run(args) = Cli::try_parse_from(["kubewasm", "run"]).unwrap().command else { panic!("not run") };
        assert_eq!((args.log_level, args.plugin_log_level), (LevelFilter::INFO, vec![]));
        let parsed = Cli::try_parse_from(["kubewasm", "run", "--log-level", "warn", "--plugin-log-level", "a=debug", "--plugin-log-level", "b=off"]);
        let Command::Run(args) = parsed.unwrap().command else { panic!("not run") };
        assert_eq!(args.log_level, LevelFilter::WARN);
        assert_eq!(args.plugin_log_level, [("a".to_string(), LevelFilter::DEBUG), ("b".to_string(), LevelFilter::OFF)]);
        for (flag, value, says) in [
            ("--log-level", "verbose", "is not a log level: use one of trace, debug, info, warn, error, off"),
            ("--plugin-log-level", "a:debug", "write it as NAME=LEVEL, e.g. my-plugin=debug"),
        ] {
            let error = Cli::try_parse_from(["kubewasm", "run", flag, value]).err().expect("refused").to_string();
            let first = error.lines().next().unwrap_or_default();
            assert!(first.contains(flag) && first.contains(says), "{error}");
        }
    }
}
