//! What a plugin declares about itself — resources, mappings, permissions, limits — and the
//! checks on it: validation at load time (with the counts the host admits: entries per list,
//! namespaces and names per permission), the capability check on every host call, and the
//! watches the host opens for it ([`Manifest::watch_plan`]).
//!
//! Plain data, no I/O: a leaf that `runtime` (which converts the WIT manifest into this) and
//! `plugin`, `controller` and `rbac` (which act on it) all read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use std::sync::Arc;

use crate::hooks::Hooks;
use crate::projection::Fields;
use crate::resource::{Gvk, is_dns_label, is_dns_subdomain};
use crate::selector::LabelSelector;

/// Kubernetes API verbs, with RBAC's meaning. The first seven are what the host's calls do
/// (reads served from the cache or the API, writes through the client); the rest are verbs a
/// plugin's identity may need for the API server to accept a write (`bind` to create a
/// RoleBinding to a role it does not hold, `approve` for CertificateSigningRequests, ...): the
/// host never checks them on a call, it asks RBAC for them at admission and prints them in
/// `kubewasm rbac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    Bind,
    Escalate,
    Impersonate,
    Approve,
    Sign,
    Use,
}

impl Verb {
    pub const READ: [Verb; 3] = [Verb::Get, Verb::List, Verb::Watch];
    pub const ALL: [Verb; 14] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Bind,
        Verb::Escalate,
        Verb::Impersonate,
        Verb::Approve,
        Verb::Sign,
        Verb::Use,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Bind => "bind",
            Verb::Escalate => "escalate",
            Verb::Impersonate => "impersonate",
            Verb::Approve => "approve",
            Verb::Sign => "sign",
            Verb::Use => "use",
        }
    }
}

impl std::str::FromStr for Verb {
    type Err = String;

    /// RBAC's spelling. `*` is refused: a plugin names what it needs.
    fn from_str(text: &str) -> Result<Self, String> {
        Verb::ALL.into_iter().find(|v| v.as_str() == text).ok_or_else(|| {
            let known: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
            format!("{text:?} is not an RBAC verb kubewasm knows (one of {})", known.join(", "))
        })
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The subresource the status calls (`apply-status`, `update-status`) write.
pub const STATUS: &str = "status";

/// Entries the host admits in `owns` and in `watches`.
pub const MAX_ENTRIES: usize = 1000;
/// Permissions the host admits: the manifest's and the `access` rules, each list at most
/// [`MAX_ENTRIES`].
pub const MAX_PERMISSIONS: usize = 2 * MAX_ENTRIES;
/// Namespaces one permission may name. Each is a watch (for a list grant) and an access review
/// per verb at admission: past a hundred, a grant should be cluster-wide.
pub const MAX_PERMISSION_NAMESPACES: usize = 100;
/// Object names one permission may name (RBAC `resourceNames`); each is an access review per
/// verb and namespace at admission.
pub const MAX_PERMISSION_NAMES: usize = 100;
/// A plugin's version: what fits a status entry as one field.
pub const MAX_VERSION: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    pub resource: Gvk,
    /// Any subresource (`status`, `scale`, `finalizers`, `eviction`, ...); `None` for the
    /// resource itself.
    pub subresource: Option<String>,
    pub verbs: BTreeSet<Verb>,
    /// Empty: every namespace the host serves.
    pub namespaces: BTreeSet<String>,
    /// Object names the grant is limited to (RBAC's `resourceNames`); empty for every object.
    pub names: BTreeSet<String>,
}

impl Permission {
    /// Grants `list` or `watch` on every object of the resource itself: the host caches it for
    /// the plugin and serves `get` and `list-objects` from the cache.
    pub fn lists(&self) -> bool {
        self.subresource.is_none() && self.names.is_empty() && (self.verbs.contains(&Verb::List) || self.verbs.contains(&Verb::Watch))
    }

    fn covers(&self, verb: Verb, resource: &Gvk, subresource: Option<&str>, namespace: Option<&str>, name: Option<&str>) -> bool {
        self.resource == *resource
            && self.subresource.as_deref() == subresource
            && self.verbs.contains(&verb)
            && (self.namespaces.is_empty() || namespace.is_some_and(|ns| self.namespaces.contains(ns)))
            && (self.names.is_empty() || name.is_some_and(|n| self.names.contains(n)))
    }
}

/// One RBAC rule a plugin's identity needs: what `kubewasm rbac` prints for it and what the
/// host asks the API server about before the plugin starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub resource: Gvk,
    pub subresource: Option<String>,
    pub verbs: BTreeSet<Verb>,
    /// `None`: every namespace the host serves (all of them, or those of `--namespace`).
    pub namespaces: Option<BTreeSet<String>>,
    pub names: BTreeSet<String>,
    /// Why the plugin needs it, for humans ("reads its primary", "declared", ...).
    pub why: &'static str,
}

/// Kind of the Events plugins record (events.k8s.io/v1).
pub fn event_kind() -> Gvk {
    Gvk::new("events.k8s.io", "v1", "Event")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    OwnerReferences,
    Label(String),
    MapRelated,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pub resource: Gvk,
    pub mapping: Mapping,
    pub selector: Option<LabelSelector>,
}

/// What the events of a watch the host opens for a plugin mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchRole {
    /// Objects of the primary kind: each is a key to reconcile.
    Primary,
    /// Owned objects: their controlling owner is the key.
    Owned,
    /// Watched objects, mapped to keys as declared.
    Watched(Mapping),
    /// Cached so that reads are served (a `list` or `watch` grant): no keys.
    Read,
}

/// One watch the host opens for a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedWatch {
    pub resource: Gvk,
    pub selector: Option<LabelSelector>,
    /// The namespaces it is limited to (namespace-limited grants); `None`: every one served.
    pub only: Option<BTreeSet<String>>,
    pub role: WatchRole,
    /// The plugin reads only the metadata of this kind (`views.metadata-only`).
    pub metadata_only: bool,
}

impl PlannedWatch {
    /// The namespaces of its informers on a host serving `served` (empty: all of them), `None`
    /// standing for every namespace: one informer per namespace served (or limited to), one in
    /// all for a cluster-scoped resource.
    pub fn scopes(&self, served: &[String], cluster: bool) -> Vec<Option<String>> {
        match &self.only {
            _ if cluster => vec![None],
            None if served.is_empty() => vec![None],
            None => served.iter().cloned().map(Some).collect(),
            Some(only) => only.iter().filter(|ns| served.is_empty() || served.contains(ns)).cloned().map(Some).collect(),
        }
    }
}

/// Limits as the plugin asked for them; `None` means the host default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestedLimits {
    pub deadline: Option<Duration>,
    pub memory_bytes: Option<u64>,
}

/// The host's defaults and maxima for plugin limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitPolicy {
    pub default_deadline: Duration,
    pub max_deadline: Duration,
    pub default_memory_bytes: u64,
    pub max_memory_bytes: u64,
    pub max_concurrency: u32,
}

impl Default for LimitPolicy {
    fn default() -> Self {
        LimitPolicy {
            default_deadline: Duration::from_secs(5),
            max_deadline: Duration::from_secs(300),
            default_memory_bytes: 64 << 20,
            max_memory_bytes: 4 << 30,
            max_concurrency: 64,
        }
    }
}

/// Limits in force for a plugin: what it asked for, or the host default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub deadline: Duration,
    pub memory_bytes: u64,
}

/// What a declarative plugin's host does with an existing child whose desired state changed
/// (`composite.update-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateStrategy {
    /// Never updated; created again once gone.
    #[default]
    OnDelete,
    /// Deleted, and created as desired once gone.
    Recreate,
    /// Server-side applied over.
    InPlace,
}

/// The WIT's spelling.
impl std::fmt::Display for UpdateStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UpdateStrategy::OnDelete => "on-delete",
            UpdateStrategy::Recreate => "recreate",
            UpdateStrategy::InPlace => "in-place",
        })
    }
}

/// One kind of a declarative plugin's children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRule {
    pub resource: Gvk,
    pub update: UpdateStrategy,
}

/// Which objects are a parent's children to claim (`composite.child-selector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildSelector {
    /// The host's label `kubewasm.io/controller-uid: <parent uid>`.
    Generated,
    /// The parent's `spec.selector`.
    ParentSpec,
}

/// How a declarative plugin's parents (its primaries) and children (its `owns` kinds) relate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composition {
    pub children: Vec<ChildRule>,
    pub selector: ChildSelector,
}

impl Composition {
    /// Every child kind with its strategy: the rules' kinds in their order, then the other
    /// `owns` kinds (`on-delete`).
    pub fn child_kinds(&self, owns: &[Gvk]) -> Vec<ChildRule> {
        let mut kinds = self.children.clone();
        kinds.extend(
            owns.iter()
                .filter(|g| !self.children.iter().any(|r| r.resource == **g))
                .map(|g| ChildRule { resource: g.clone(), update: UpdateStrategy::OnDelete }),
        );
        kinds
    }

    /// What managing children takes, granted on top of the manifest's own permissions:
    /// applying, adopting, releasing and deleting every child kind, replacing the parent's
    /// status, and patching the parent for its finalizer.
    pub fn grants(&self, manifest: &Manifest) -> Vec<Permission> {
        let grant = |resource: &Gvk, subresource: Option<&str>, verbs: &[Verb]| Permission {
            resource: resource.clone(),
            subresource: subresource.map(Into::into),
            verbs: verbs.iter().copied().collect(),
            namespaces: BTreeSet::new(),
            names: BTreeSet::new(),
        };
        let mut grants: Vec<Permission> = manifest.owns.iter().map(|child| grant(child, None, &[Verb::Create, Verb::Patch, Verb::Delete])).collect();
        grants.push(grant(&manifest.primary, Some(STATUS), &[Verb::Update]));
        if manifest.finalizer.is_some() {
            grants.push(grant(&manifest.primary, None, &[Verb::Patch]));
        }
        grants
    }
}

/// A choice of member clusters (`clusters.members`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Members {
    #[default]
    None,
    All,
    /// Those whose labels match.
    Matching(LabelSelector),
}

impl Members {
    pub fn includes(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Members::None => false,
            Members::All => true,
            Members::Matching(selector) => selector.matches(|key| labels.get(key).map(String::as_str)),
        }
    }
}

/// Which clusters a plugin serves and which it only reaches (`clusters.scope`). A plugin that
/// says nothing serves the host's own cluster alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterScope {
    pub serve_local: bool,
    pub serve: Members,
    pub reach: Members,
}

impl Default for ClusterScope {
    fn default() -> Self {
        ClusterScope { serve_local: true, serve: Members::None, reach: Members::None }
    }
}

/// What a plugin does in one member cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Watches and reconciles its primaries there.
    Serve,
    /// Reads and writes there through `fleet` calls only.
    Reach,
}

impl ClusterScope {
    /// What the plugin does in a member cluster of these labels, if anything.
    pub fn role(&self, labels: &BTreeMap<String, String>) -> Option<Role> {
        if self.serve.includes(labels) {
            Some(Role::Serve)
        } else if self.reach.includes(labels) {
            Some(Role::Reach)
        } else {
            None
        }
    }

    /// Whether the plugin works with member clusters at all.
    pub fn is_local(&self) -> bool {
        self.serve == Members::None && self.reach == Members::None
    }
}

/// Without a `resync-seconds`, primaries are re-reconciled this often (controller-runtime's
/// default SyncPeriod).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(10 * 3600);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub primary: Gvk,
    pub primary_selector: Option<LabelSelector>,
    pub owns: Vec<Gvk>,
    pub watches: Vec<Watch>,
    pub finalizer: Option<String>,
    /// `None`: periodic resync disabled.
    pub resync: Option<Duration>,
    pub max_concurrency: u32,
    pub limits: RequestedLimits,
    pub permissions: Vec<Permission>,
    /// Owned or watched kinds the plugin is handed only the metadata of (`views.metadata-only`).
    pub metadata_only: Vec<Gvk>,
    /// Kinds the plugin is handed only some fields of (`projections.fields`).
    pub projections: Vec<Projection>,
    /// A declarative plugin's children (`composite.describe-composition`); `None` for a
    /// plugin that reconciles itself.
    pub composition: Option<Composition>,
    /// The clusters it serves and reaches (`clusters.scope`).
    pub clusters: ClusterScope,
    /// The admission and conversion hooks it serves (`webhooks.declare`).
    pub hooks: Hooks,
}

/// The fields of one kind a plugin reads (`projections.fields`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    pub resource: Gvk,
    pub fields: Arc<Fields>,
}

/// Projections a plugin may declare, paths per projection, field names per path.
pub const MAX_PROJECTIONS: usize = 100;
pub const MAX_PROJECTED_PATHS: usize = 64;
pub const MAX_PATH_NAMES: usize = 8;

/// A manifest field that is not acceptable. The message names the field and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("manifest field `{field}`: {problem}")]
pub struct ManifestError {
    pub field: String,
    pub problem: String,
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ManifestError {
    ManifestError { field: field.into(), problem: problem.into() }
}

impl Manifest {
    /// Checks every field, returning the first problem found.
    pub fn validate(&self, policy: &LimitPolicy) -> Result<Limits, ManifestError> {
        if !is_dns_label(&self.name) {
            return Err(invalid("name", format!("{:?} must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters", self.name)));
        }
        validate_version(&self.version)?;
        for (field, len, max) in [
            ("owns", self.owns.len(), MAX_ENTRIES),
            ("watches", self.watches.len(), MAX_ENTRIES),
            ("permissions", self.permissions.len(), MAX_PERMISSIONS),
            ("views.metadata-only", self.metadata_only.len(), MAX_ENTRIES),
            ("projections.fields", self.projections.len(), MAX_PROJECTIONS),
        ] {
            if len > max {
                return Err(invalid(field, format!("{len} entries; at most {max}")));
            }
        }
        self.hooks.validate().map_err(|e| invalid(format!("webhooks.{}", e.field), e.problem))?;
        if !self.clusters.serve_local && self.clusters.serve == Members::None {
            return Err(invalid("clusters.scope", "it serves no cluster: set serve-local, or serve some members"));
        }
        validate_gvk("primary", &self.primary)?;
        let mut seen = BTreeSet::from([&self.primary]);
        for (i, gvk) in self.owns.iter().enumerate() {
            validate_gvk(&format!("owns[{i}]"), gvk)?;
            if !seen.insert(gvk) {
                return Err(invalid(format!("owns[{i}]"), format!("{gvk} is listed twice (or is the primary)")));
            }
        }
        for (i, watch) in self.watches.iter().enumerate() {
            validate_gvk(&format!("watches[{i}].resource"), &watch.resource)?;
            if let Mapping::Label(key) = &watch.mapping {
                crate::selector::label_key(key).map_err(|e| invalid(format!("watches[{i}].mapping"), e))?;
            }
        }
        // Metadata-only reads only make sense where the host watches the kind for the plugin
        // anyway; the primary is always handed whole (the plugin reconciles it).
        for (i, gvk) in self.metadata_only.iter().enumerate() {
            validate_gvk(&format!("views.metadata-only[{i}]"), gvk)?;
            if *gvk == self.primary {
                return Err(invalid(format!("views.metadata-only[{i}]"), format!("{gvk} is the primary kind, which is always handed whole")));
            }
            if !self.owns.contains(gvk) && !self.watches.iter().any(|w| w.resource == *gvk) {
                return Err(invalid(format!("views.metadata-only[{i}]"), format!("{gvk} is neither an `owns` kind nor the kind of a `watches` entry")));
            }
        }
        // Projections are of kinds the plugin is handed: what it reconciles, owns or watches.
        let mut projected = BTreeSet::new();
        for (i, Projection { resource: gvk, .. }) in self.projections.iter().enumerate() {
            let field = format!("projections.fields[{i}]");
            validate_gvk(&field, gvk)?;
            if *gvk != self.primary && !self.owns.contains(gvk) && !self.watches.iter().any(|w| w.resource == *gvk) {
                return Err(invalid(field, format!("{gvk} is neither the primary kind, an `owns` kind nor the kind of a `watches` entry")));
            }
            if self.metadata_only.contains(gvk) {
                return Err(invalid(field, format!("{gvk} is metadata-only (`views.metadata-only`), a projection to no fields already")));
            }
            if !projected.insert(gvk) {
                return Err(invalid(field, format!("{gvk} has a projection already")));
            }
            if self.composition.is_some() {
                return Err(invalid(field, "a declarative plugin is handed whole objects: the host compares its parents and children whole"));
            }
        }
        if let Some(composition) = &self.composition {
            if composition.children.len() > MAX_ENTRIES {
                return Err(invalid("composite.children", format!("{} entries; at most {MAX_ENTRIES}", composition.children.len())));
            }
            if let Some(kind) = self.metadata_only.iter().find(|k| self.owns.contains(k)) {
                return Err(invalid("views.metadata-only", format!("{kind} is a child kind of a declarative plugin, whose children the host compares whole")));
            }
            let mut ruled = BTreeSet::new();
            for (i, rule) in composition.children.iter().enumerate() {
                let field = format!("composite.children[{i}]");
                if !self.owns.contains(&rule.resource) {
                    return Err(invalid(field, format!("{} is not one of the manifest's `owns` kinds", rule.resource)));
                }
                if !ruled.insert(&rule.resource) {
                    return Err(invalid(field, format!("{} has a rule already", rule.resource)));
                }
            }
        }
        if let Some(finalizer) = &self.finalizer {
            validate_finalizer(finalizer)?;
        }
        if self.max_concurrency == 0 || self.max_concurrency > policy.max_concurrency {
            return Err(invalid("max-concurrency", format!("{} is outside 1..={} (the host's maximum)", self.max_concurrency, policy.max_concurrency)));
        }
        for (i, p) in self.permissions.iter().enumerate() {
            let field = format!("permissions[{i}]");
            validate_gvk(&field, &p.resource)?;
            if p.verbs.is_empty() {
                return Err(invalid(format!("{field}.verbs"), "must name at least one verb"));
            }
            if let Some(sub) = p.subresource.as_deref().filter(|s| !is_dns_label(s)) {
                return Err(invalid(format!("{field}.subresource"), format!("{sub:?} is not a subresource name such as \"status\"")));
            }
            for (what, len, max) in [("namespaces", p.namespaces.len(), MAX_PERMISSION_NAMESPACES), ("resource-names", p.names.len(), MAX_PERMISSION_NAMES)] {
                if len > max {
                    return Err(invalid(format!("{field}.{what}"), format!("{len} entries; at most {max}")));
                }
            }
            if let Some(ns) = p.namespaces.iter().find(|ns| !is_dns_label(ns)) {
                return Err(invalid(format!("{field}.namespaces"), format!("{ns:?} is not a namespace name")));
            }
            if let Some(name) = p.names.iter().find(|n| n.is_empty() || n.len() > 253 || n.contains('/')) {
                return Err(invalid(format!("{field}.resource-names"), format!("{name:?} is not an object name")));
            }
        }
        if let Some(finalizer) = &self.finalizer
            && !self.permissions.iter().any(|p| p.resource == self.primary && p.subresource.is_none() && p.names.is_empty() && p.verbs.contains(&Verb::Patch))
        {
            return Err(invalid(
                "finalizer",
                format!(
                    "{finalizer:?} needs a `patch` permission on the primary {} (the host adds and removes the finalizer with a patch, as the plugin): add one to the manifest's permissions",
                    self.primary
                ),
            ));
        }
        self.granted_limits(policy)
    }

    fn granted_limits(&self, policy: &LimitPolicy) -> Result<Limits, ManifestError> {
        let deadline = self.limits.deadline.unwrap_or(policy.default_deadline);
        if deadline < Duration::from_millis(10) || deadline > policy.max_deadline {
            return Err(invalid(
                "limits.deadline-ms",
                format!("{} ms is outside 10..={} ms (the host's maximum)", deadline.as_millis(), policy.max_deadline.as_millis()),
            ));
        }
        let memory_bytes = self.limits.memory_bytes.unwrap_or(policy.default_memory_bytes);
        if memory_bytes < (1 << 20) || memory_bytes > policy.max_memory_bytes {
            return Err(invalid("limits.memory-bytes", format!("{memory_bytes} is outside 1 MiB..={} bytes (the host's maximum)", policy.max_memory_bytes)));
        }
        Ok(Limits { deadline, memory_bytes })
    }

    /// Every resource the host watches for this plugin: primary, owned, watched, and any
    /// resource granted `list` or `watch` (so that cache reads of it are served).
    pub fn cached_resources(&self) -> BTreeSet<&Gvk> {
        let mut all: BTreeSet<&Gvk> = BTreeSet::from([&self.primary]);
        all.extend(&self.owns);
        all.extend(self.watches.iter().map(|w| &w.resource));
        all.extend(self.permissions.iter().filter(|p| p.lists()).map(|p| &p.resource));
        all
    }

    /// The fields of `resource` the plugin reads, when it declared a projection of the kind.
    pub fn projection(&self, resource: &Gvk) -> Option<&Arc<Fields>> {
        self.projections.iter().find(|p| p.resource == *resource).map(|p| &p.fields)
    }

    /// What the plugin reads of `resource`'s objects, when not the whole: no fields for a
    /// metadata-only kind, the declared ones for a projected kind. What cache reads and
    /// `map-related` hand it.
    pub fn reads(&self, resource: &Gvk) -> Option<&Fields> {
        if self.metadata_only.contains(resource) {
            return Some(&crate::projection::METADATA_ONLY);
        }
        self.projection(resource).map(|fields| &**fields)
    }

    /// The namespaces the host caches `resource` in for this plugin: `None` for every served
    /// namespace; `Some(set)` when only namespace-limited `list`/`watch` grants ask for it.
    pub fn cached_namespaces(&self, resource: &Gvk) -> Option<BTreeSet<&str>> {
        self.readable_namespaces(resource, Verb::List).and_then(|list| {
            let watch = self.readable_namespaces(resource, Verb::Watch)?;
            Some(list.union(&watch).copied().collect())
        })
    }

    /// Every watch the host opens for this plugin: the primary (with its selector), what it owns
    /// and watches, and a watch triggering nothing for each other resource it may list, limited
    /// to the namespaces of its grants. A primary selector also bounds what the plugin reads of
    /// its primary's kind: the primary watch serves those reads, unless a grant to list the kind
    /// asks for all of it (a second, unfiltered watch would cache every selected object twice).
    pub fn watch_plan(&self) -> Vec<PlannedWatch> {
        let plain = |resource: &Gvk, role| PlannedWatch {
            resource: resource.clone(),
            selector: None,
            only: None,
            role,
            metadata_only: self.metadata_only.contains(resource),
        };
        let mut plan = vec![PlannedWatch { selector: self.primary_selector.clone(), ..plain(&self.primary, WatchRole::Primary) }];
        plan.extend(self.owns.iter().map(|owned| plain(owned, WatchRole::Owned)));
        plan.extend(self.watches.iter().map(|w| PlannedWatch { selector: w.selector.clone(), ..plain(&w.resource, WatchRole::Watched(w.mapping.clone())) }));
        for resource in self.cached_resources() {
            let served = plan.iter().any(|w| w.resource == *resource && w.selector.is_none());
            let selected_primary = *resource == self.primary && self.primary_selector.is_some() && !self.lists(resource);
            if !served && !selected_primary {
                let only = self.cached_namespaces(resource).map(|set| set.into_iter().map(String::from).collect());
                plan.push(PlannedWatch { only, ..plain(resource, WatchRole::Read) });
            }
        }
        plan
    }

    /// Whether a grant lets the plugin list or watch `resource` (beyond what its own watches of
    /// it select).
    pub fn lists(&self, resource: &Gvk) -> bool {
        self.permissions.iter().any(|p| &p.resource == resource && p.lists())
    }

    /// The capability check: may this plugin do `verb` on `resource` (or its `subresource`) in
    /// `namespace`, on the object `name`? `None` as the namespace asks for every namespace (a
    /// list across namespaces, or a cluster-scoped object); `None` as the name, for every object
    /// (a list). Reading the primary, owned and watched resources is implied.
    pub fn allows(&self, verb: Verb, resource: &Gvk, subresource: Option<&str>, namespace: Option<&str>, name: Option<&str>) -> bool {
        if subresource.is_none() && Verb::READ.contains(&verb) && self.implies_read(resource) {
            return true;
        }
        // A `list` or `watch` grant caches the resource: `get` is served from the cache too.
        let in_grant = |p: &Permission| p.namespaces.is_empty() || namespace.is_some_and(|ns| p.namespaces.contains(ns));
        if verb == Verb::Get && subresource.is_none() && self.permissions.iter().any(|p| p.resource == *resource && p.lists() && in_grant(p)) {
            return true;
        }
        self.permissions.iter().any(|p| p.covers(verb, resource, subresource, namespace, name))
    }

    /// Namespaces a read of `resource` across namespaces may see: `None` for all of them,
    /// `Some(set)` for only those (the union of the matching grants).
    pub fn readable_namespaces(&self, resource: &Gvk, verb: Verb) -> Option<BTreeSet<&str>> {
        if self.implies_read(resource) {
            return None;
        }
        let mut namespaces = BTreeSet::new();
        for p in self.permissions.iter().filter(|p| p.resource == *resource && p.subresource.is_none() && p.names.is_empty() && p.verbs.contains(&verb)) {
            if p.namespaces.is_empty() {
                return None;
            }
            namespaces.extend(p.namespaces.iter().map(String::as_str));
        }
        Some(namespaces)
    }

    /// Whether the plugin may only `get` objects of `resource` (a `get` grant, no `list` or
    /// `watch`): those reads go to the API server as the plugin, not to a cache.
    pub fn reads_live(&self, resource: &Gvk) -> bool {
        !self.cached_resources().contains(resource)
            && self.permissions.iter().any(|p| p.resource == *resource && p.subresource.is_none() && p.verbs.contains(&Verb::Get))
    }

    /// What a sharded plugin's identity must itself be allowed: the ring's assigner labels its
    /// primaries and its children as the host, so that a plugin never gets through the host a
    /// write on objects RBAC does not let it write.
    pub fn sharding_rules(&self) -> Vec<Rule> {
        std::iter::once(&self.primary)
            .chain(&self.owns)
            .map(|resource| Rule {
                resource: resource.clone(),
                subresource: None,
                verbs: [Verb::Patch].into(),
                namespaces: None,
                names: BTreeSet::new(),
                why: "sharded: the host labels its primaries and children for their shard",
            })
            .collect()
    }

    /// Every RBAC rule the plugin's identity needs: reading what the host caches or fetches for
    /// it, every declared grant, `update` on the primary's `finalizers` subresource when it owns
    /// objects or writes any (clusters enforcing `OwnerReferencesPermissionEnforcement` require
    /// it to set `blockOwnerDeletion` on an owner reference to a primary, which the SDKs'
    /// controller owner references do), and recording Events.
    pub fn rules(&self) -> Vec<Rule> {
        let read = || Verb::READ.into_iter().collect::<BTreeSet<_>>();
        let mut rules = Vec::new();
        let mut implied: Vec<&Gvk> = vec![&self.primary];
        implied.extend(&self.owns);
        implied.extend(self.watches.iter().map(|w| &w.resource));
        let mut seen = BTreeSet::new();
        for gvk in implied.into_iter().filter(|g| seen.insert(*g)) {
            let why = if *gvk == self.primary { "reads its primary" } else { "reads what it owns or watches" };
            rules.push(Rule { resource: gvk.clone(), subresource: None, verbs: read(), namespaces: None, names: BTreeSet::new(), why });
        }
        for p in &self.permissions {
            let mut verbs = p.verbs.clone();
            if p.lists() {
                // Served from the host's cache: the identity must be allowed the whole read.
                verbs.extend(Verb::READ);
            }
            rules.push(Rule {
                resource: p.resource.clone(),
                subresource: p.subresource.clone(),
                verbs,
                namespaces: (!p.namespaces.is_empty()).then(|| p.namespaces.clone()),
                names: p.names.clone(),
                why: "declared in its manifest",
            });
        }
        let writes = self.permissions.iter().any(|p| p.verbs.iter().any(|v| matches!(v, Verb::Create | Verb::Update | Verb::Patch)));
        if !self.owns.is_empty() || writes {
            rules.push(Rule {
                resource: self.primary.clone(),
                subresource: Some("finalizers".into()),
                verbs: [Verb::Update].into(),
                namespaces: None,
                names: BTreeSet::new(),
                why: "sets blockOwnerDeletion on owner references to its primaries",
            });
        }
        rules.push(Rule {
            resource: event_kind(),
            subresource: None,
            verbs: [Verb::Create, Verb::Patch].into(),
            namespaces: None,
            names: BTreeSet::new(),
            why: "records Events",
        });
        rules
    }

    fn implies_read(&self, resource: &Gvk) -> bool {
        self.primary == *resource || self.owns.contains(resource) || self.watches.iter().any(|w| w.resource == *resource)
    }

    /// The field manager for this plugin's writes.
    pub fn field_manager(&self) -> String {
        format!("kubewasm/{}", self.name)
    }
}

/// A version is one field of the host's status entries (`version=1.2.0 digest=...`): letters,
/// digits and `.`, `_`, `+`, `-` only (SemVer fits), so that no version can add a field to the
/// entry that `kubewasm finalizers release` or a reader of the status would trust.
fn validate_version(version: &str) -> Result<(), ManifestError> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-');
    let rule = format!("1 to {MAX_VERSION} letters, digits, '.', '_', '+' or '-' (such as \"1.2.0\" or \"0.3.0-rc.1+build.7\")");
    if version.len() > MAX_VERSION {
        return Err(invalid("version", format!("is {} bytes; it must be {rule}", version.len())));
    }
    if version.is_empty() || !version.chars().all(safe) {
        return Err(invalid("version", format!("{version:?} must be {rule}")));
    }
    Ok(())
}

fn validate_gvk(field: &str, gvk: &Gvk) -> Result<(), ManifestError> {
    if !gvk.group.is_empty() && !is_dns_subdomain(&gvk.group) {
        return Err(invalid(format!("{field}.group"), format!("{:?} is not a DNS subdomain", gvk.group)));
    }
    if !is_dns_label(&gvk.version) {
        return Err(invalid(format!("{field}.version"), format!("{:?} is not an API version such as \"v1\"", gvk.version)));
    }
    let kind_ok = gvk.kind.starts_with(|c: char| c.is_ascii_uppercase()) && gvk.kind.chars().all(|c| c.is_ascii_alphanumeric());
    if !kind_ok {
        return Err(invalid(format!("{field}.kind"), format!("{:?} is not a kind such as \"ConfigMap\"", gvk.kind)));
    }
    Ok(())
}

/// Finalizers must be domain-qualified (`example.com/cleanup`), as Kubernetes asks.
fn validate_finalizer(finalizer: &str) -> Result<(), ManifestError> {
    let problem = match finalizer.split_once('/') {
        None => Some("must be qualified with a domain, such as \"example.com/cleanup\""),
        Some((domain, _)) if !is_dns_subdomain(domain) => Some("the part before '/' must be a DNS subdomain"),
        Some((_, name)) if crate::selector::label_key(name).is_err() => Some("the part after '/' must be at most 63 letters, digits, '-', '_' or '.'"),
        _ => None,
    };
    match problem {
        Some(problem) => Err(invalid("finalizer", format!("{finalizer:?} {problem}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_cluster_scope_says_what_the_plugin_does_in_each_member() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> { pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
        let (prod, dev) = (labels(&[("env", "prod")]), labels(&[("env", "dev")]));
        assert!(ClusterScope::default().is_local());
        assert_eq!(ClusterScope::default().role(&prod), None);
        let hub = ClusterScope { serve_local: true, serve: Members::None, reach: Members::Matching("env=prod".parse().unwrap()) };
        assert_eq!((hub.role(&prod), hub.role(&dev)), (Some(Role::Reach), None));
        // Serving wins over reaching: a member served is reached too.
        let both = ClusterScope { serve_local: false, serve: Members::Matching("env in (prod)".parse().unwrap()), reach: Members::All };
        assert_eq!((both.role(&prod), both.role(&dev)), (Some(Role::Serve), Some(Role::Reach)));
        assert!(!both.is_local());
    }

    #[test]
    fn a_plugin_serving_no_cluster_is_refused() {
        let mut manifest = sample();
        manifest.clusters = ClusterScope { serve_local: false, serve: Members::None, reach: Members::All };
        let e = manifest.validate(&LimitPolicy::default()).unwrap_err();
        assert_eq!(e.field, "clusters.scope");
        manifest.clusters.serve = Members::All;
        manifest.validate(&LimitPolicy::default()).unwrap();
    }

    pub(crate) fn sample() -> Manifest {
        Manifest {
            name: "sample".into(),
            version: "1.0.0".into(),
            primary: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
            primary_selector: None,
            owns: vec![Gvk::new("apps", "v1", "Deployment")],
            watches: vec![],
            finalizer: None,
            resync: Some(DEFAULT_RESYNC),
            max_concurrency: 2,
            limits: RequestedLimits::default(),
            permissions: vec![
                Permission {
                    resource: Gvk::new("apps", "v1", "Deployment"),
                    subresource: None,
                    verbs: [Verb::Create, Verb::Patch].into(),
                    namespaces: BTreeSet::new(),
                    names: BTreeSet::new(),
                },
                Permission {
                    resource: Gvk::new("", "v1", "Secret"),
                    subresource: None,
                    verbs: [Verb::Get].into(),
                    namespaces: ["team-a".to_string()].into(),
                    names: BTreeSet::new(),
                },
                Permission {
                    resource: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
                    subresource: Some(STATUS.to_string()),
                    verbs: [Verb::Update].into(),
                    namespaces: BTreeSet::new(),
                    names: BTreeSet::new(),
                },
            ],
            metadata_only: vec![],
            projections: vec![],
            composition: None,
            clusters: Default::default(),
            hooks: Default::default(),
        }
    }

    #[test]
    fn metadata_only_kinds_are_owned_or_watched_never_the_primary() {
        let deployment = Gvk::new("apps", "v1", "Deployment");
        let pod = Gvk::new("", "v1", "Pod");
        let valid = Manifest { metadata_only: vec![deployment.clone()], ..sample() };
        assert!(valid.validate(&LimitPolicy::default()).is_ok(), "an owned kind");
        let watched = Manifest {
            watches: vec![Watch { resource: pod.clone(), mapping: Mapping::OwnerReferences, selector: None }],
            metadata_only: vec![deployment, pod.clone()],
            ..sample()
        };
        assert!(watched.validate(&LimitPolicy::default()).is_ok(), "and a watched one");
        let err = Manifest { metadata_only: vec![pod], ..sample() }.validate(&LimitPolicy::default()).unwrap_err();
        assert_eq!(err.field, "views.metadata-only[0]");
        assert!(err.problem.contains("neither an `owns` kind nor the kind of a `watches` entry"), "{err}");
        let err = Manifest { metadata_only: vec![sample().primary], ..sample() }.validate(&LimitPolicy::default()).unwrap_err();
        assert!(err.problem.contains("the primary kind"), "{err}");
        let plan = valid.watch_plan();
        assert!(plan.iter().all(|w| w.metadata_only == (w.role == WatchRole::Owned)), "only the owned watch is planned metadata-only");
    }

    #[test]
    fn projections_are_of_handed_kinds_once_and_never_metadata_only() {
        let deployment = Gvk::new("apps", "v1", "Deployment");
        let fields = Arc::new(Fields::new([["status", "availableReplicas"]]));
        let projection = |resource: &Gvk| Projection { resource: resource.clone(), fields: fields.clone() };
        let valid = Manifest { projections: vec![projection(&sample().primary), projection(&deployment)], ..sample() };
        assert!(valid.validate(&LimitPolicy::default()).is_ok(), "the primary and an owned kind");
        assert_eq!(valid.projection(&deployment), Some(&fields));
        assert!(valid.watch_plan().iter().all(|w| !w.metadata_only), "projected kinds are watched whole");
        for (manifest, field, problem) in [
            (Manifest { projections: vec![projection(&Gvk::new("", "v1", "Pod"))], ..sample() }, "projections.fields[0]", "neither the primary kind"),
            (Manifest { projections: vec![projection(&deployment), projection(&deployment)], ..sample() }, "projections.fields[1]", "has a projection already"),
            (
                Manifest { projections: vec![projection(&deployment)], metadata_only: vec![deployment.clone()], ..sample() },
                "projections.fields[0]",
                "metadata-only",
            ),
        ] {
            let err = manifest.validate(&LimitPolicy::default()).unwrap_err();
            assert_eq!(err.field, field);
            assert!(err.problem.contains(problem), "{err}");
        }
    }

    #[test]
    fn a_composition_rules_owned_kinds_once_and_grants_what_managing_them_takes() {
        let deployment = Gvk::new("apps", "v1", "Deployment");
        let config_map = Gvk::new("", "v1", "ConfigMap");
        let rule = |resource: &Gvk, update| ChildRule { resource: resource.clone(), update };
        let composed = |children| Manifest {
            owns: vec![deployment.clone(), config_map.clone()],
            composition: Some(Composition { children, selector: ChildSelector::Generated }),
            ..sample()
        };
        let valid = composed(vec![rule(&config_map, UpdateStrategy::InPlace)]);
        valid.validate(&LimitPolicy::default()).unwrap();
        let kinds = valid.composition.as_ref().unwrap().child_kinds(&valid.owns);
        assert_eq!(
            kinds,
            vec![rule(&config_map, UpdateStrategy::InPlace), rule(&deployment, UpdateStrategy::OnDelete)],
            "rules first, then the other owns kinds"
        );

        let err = composed(vec![rule(&Gvk::new("", "v1", "Secret"), UpdateStrategy::Recreate)]).validate(&LimitPolicy::default()).unwrap_err();
        assert_eq!((err.field.as_str(), err.problem.contains("not one of the manifest's `owns` kinds")), ("composite.children[0]", true), "{err}");
        let err = composed(vec![rule(&config_map, UpdateStrategy::Recreate), rule(&config_map, UpdateStrategy::InPlace)])
            .validate(&LimitPolicy::default())
            .unwrap_err();
        assert_eq!(err.field, "composite.children[1]");

        let with_finalizer = Manifest { finalizer: Some("example.com/cleanup".into()), ..valid.clone() };
        let grants = with_finalizer.composition.as_ref().unwrap().grants(&with_finalizer);
        let mut granted = with_finalizer.clone();
        granted.permissions.extend(grants);
        for (verb, resource, subresource) in [
            (Verb::Create, &config_map, None),
            (Verb::Patch, &deployment, None),
            (Verb::Delete, &config_map, None),
            (Verb::Update, &granted.primary.clone(), Some(STATUS)),
            (Verb::Patch, &granted.primary.clone(), None),
        ] {
            assert!(granted.allows(verb, resource, subresource, Some("ns"), Some("x")), "{verb} {resource} {subresource:?}");
        }
        assert!(!granted.allows(Verb::Update, &config_map, None, Some("ns"), Some("x")), "nothing more");
    }
    #[test]
    fn sample_is_valid_and_gets_default_limits() {
        let limits = sample().validate(&LimitPolicy::default()).unwrap();
        assert_eq!(limits, Limits { deadline: Duration::from_secs(5), memory_bytes: 64 << 20 });
        for version in ["0.3.0-rc.1+build.7", "v2", "2024_01"] {
            assert!(Manifest { version: version.into(), ..sample() }.validate(&LimitPolicy::default()).is_ok(), "{version}");
        }
        // At the caps exactly: admitted.
        let mut m = sample();
        m.permissions[1].namespaces = (0..MAX_PERMISSION_NAMESPACES).map(|i| format!("ns-{i}")).collect();
        m.permissions[1].names = (0..MAX_PERMISSION_NAMES).map(|i| format!("n-{i}")).collect();
        assert!(m.validate(&LimitPolicy::default()).is_ok());
        let err = Manifest { permissions: vec![m.permissions[0].clone(); MAX_PERMISSIONS + 1], ..sample() }.validate(&LimitPolicy::default()).unwrap_err();
        assert_eq!(err.to_string(), format!("manifest field `permissions`: {} entries; at most {MAX_PERMISSIONS}", MAX_PERMISSIONS + 1));
    }

    #[test]
    fn the_watch_plan_is_one_watch_per_resource_with_grants_limited_to_their_namespaces() {
        let mut m = sample();
        m.permissions.push(Permission {
            resource: Gvk::new("", "v1", "Secret"),
            subresource: None,
            verbs: [Verb::List].into(),
            namespaces: ["team-a".to_string(), "team-b".to_string()].into(),
            names: BTreeSet::new(),
        });
        let plan = m.watch_plan();
        let roles: Vec<(&str, &WatchRole)> = plan.iter().map(|w| (w.resource.kind.as_str(), &w.role)).collect();
        assert_eq!(roles, [("Foo", &WatchRole::Primary), ("Deployment", &WatchRole::Owned), ("Secret", &WatchRole::Read)]);
        let secrets = &plan[2];
        assert_eq!(secrets.scopes(&[], false), [Some("team-a".to_string()), Some("team-b".to_string())]);
        assert_eq!(secrets.scopes(&["team-b".into(), "team-c".into()], false), [Some("team-b".to_string())], "only where the host serves");
        assert_eq!(plan[1].scopes(&["team-b".into(), "team-c".into()], false).len(), 2, "owned kinds in every namespace served");
        assert_eq!(plan[1].scopes(&["team-b".into()], true), [None], "a cluster-scoped kind is one watch");
    }

    #[test]
    fn reads_of_declared_resources_are_implied() {
        let m = sample();
        let foo = m.primary.clone();
        let deploy = Gvk::new("apps", "v1", "Deployment");
        assert!(m.allows(Verb::List, &foo, None, None, None));
        assert!(m.allows(Verb::Get, &deploy, None, Some("x"), Some("d")));
        assert!(!m.allows(Verb::Delete, &deploy, None, Some("x"), Some("d")));
        assert!(!m.allows(Verb::Update, &foo, None, Some("x"), Some("f")), "status grant must not cover the main resource");
        assert!(m.allows(Verb::Update, &foo, Some(STATUS), Some("x"), Some("f")));
        assert!(!m.allows(Verb::Get, &Gvk::new("", "v1", "ConfigMap"), None, Some("x"), Some("c")));
    }

    #[test]
    fn namespace_scoped_grants() {
        let m = sample();
        let secret = Gvk::new("", "v1", "Secret");
        assert!(m.allows(Verb::Get, &secret, None, Some("team-a"), Some("s")));
        assert!(!m.allows(Verb::Get, &secret, None, Some("team-b"), Some("s")));
        assert!(!m.allows(Verb::Get, &secret, None, None, Some("s")), "all namespaces exceeds a namespaced grant");
        assert!(m.reads_live(&secret), "a get grant alone is served by the API server");
        assert_eq!(m.readable_namespaces(&secret, Verb::Get), Some(BTreeSet::from(["team-a"])));
        assert_eq!(m.readable_namespaces(&m.primary.clone(), Verb::List), None);
    }

    #[test]
    fn cached_resources_cover_listable_grants() {
        let mut m = sample();
        m.permissions.push(Permission {
            resource: Gvk::new("", "v1", "Node"),
            subresource: None,
            verbs: [Verb::List].into(),
            namespaces: BTreeSet::new(),
            names: BTreeSet::new(),
        });
        let cached: Vec<String> = m.cached_resources().into_iter().map(ToString::to_string).collect();
        assert_eq!(cached, ["Node.v1", "Deployment.v1.apps", "Foo.v1alpha1.samplecontroller.k8s.io"]);
        assert!(m.lists(&Gvk::new("", "v1", "Node")));
        assert!(!m.lists(&Gvk::new("apps", "v1", "Deployment")), "create and patch are not listing");
    }

    #[test]
    fn every_invalid_field_is_named() {
        let policy = LimitPolicy::default();
        type Mutation = Box<dyn Fn(&mut Manifest)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|m| m.name = "Bad_Name".into()), "`name`"),
            (Box::new(|m| m.version = "".into()), "`version`"),
            // Would add fields to the host's status entry (audit L1).
            (Box::new(|m| m.version = "0 primary=Pod.v1 finalizer=batch.kubernetes.io/job-tracking".into()), "`version`"),
            (Box::new(|m| m.version = "1=2".into()), "`version`"),
            (Box::new(|m| m.version = "1".repeat(MAX_VERSION + 1)), "`version`"),
            (Box::new(|m| m.owns = (0..=MAX_ENTRIES).map(|i| Gvk::new("example.com", "v1", &format!("K{i}"))).collect()), "`owns`"),
            (Box::new(|m| m.permissions[1].namespaces = (0..=MAX_PERMISSION_NAMESPACES).map(|i| format!("ns-{i}")).collect()), "`permissions[1].namespaces`"),
            (Box::new(|m| m.permissions[0].names = (0..=MAX_PERMISSION_NAMES).map(|i| format!("n-{i}")).collect()), "`permissions[0].resource-names`"),
            (Box::new(|m| m.primary.kind = "foo".into()), "`primary.kind`"),
            (Box::new(|m| m.primary.group = "-x".into()), "`primary.group`"),
            (Box::new(|m| m.owns.push(m.primary.clone())), "`owns[1]`"),
            (Box::new(|m| m.finalizer = Some("cleanup".into())), "`finalizer`"),
            (Box::new(|m| m.finalizer = Some("example.com/".into())), "`finalizer`"),
            (Box::new(|m| m.max_concurrency = 0), "`max-concurrency`"),
            (Box::new(|m| m.max_concurrency = 1000), "`max-concurrency`"),
            (Box::new(|m| m.limits.deadline = Some(Duration::from_secs(3600))), "`limits.deadline-ms`"),
            (Box::new(|m| m.limits.memory_bytes = Some(1024)), "`limits.memory-bytes`"),
            (Box::new(|m| m.permissions[0].verbs.clear()), "`permissions[0].verbs`"),
            (
                Box::new(|m| {
                    m.permissions[1].namespaces.insert("NS!".into());
                }),
                "`permissions[1].namespaces`",
            ),
            (
                Box::new(|m| m.watches.push(Watch { resource: Gvk::new("", "v1", "ConfigMap"), mapping: Mapping::Label("bad key!".into()), selector: None })),
                "`watches[0].mapping`",
            ),
        ];
        for (mutate, field) in cases {
            let mut m = sample();
            mutate(&mut m);
            let err = m.validate(&policy).unwrap_err().to_string();
            assert!(err.contains(field), "expected {field} in {err}");
        }
        let mut m = sample();
        m.finalizer = Some("example.com/cleanup".into());
        let err = m.validate(&policy).unwrap_err().to_string();
        assert!(err.contains("`finalizer`") && err.contains("needs a `patch` permission on the primary"), "{err}");
        m.permissions.push(Permission {
            resource: m.primary.clone(),
            subresource: None,
            verbs: [Verb::Patch].into(),
            namespaces: BTreeSet::new(),
            names: BTreeSet::new(),
        });
        assert!(m.validate(&policy).is_ok());
        for (mutate, field) in [
            (Box::new(|p: &mut Permission| p.subresource = Some("Not A Subresource".into())) as Box<dyn Fn(&mut Permission)>, ".subresource"),
            (
                Box::new(|p: &mut Permission| {
                    p.names.insert("a/b".into());
                }),
                ".resource-names",
            ),
        ] {
            let mut m = sample();
            mutate(&mut m.permissions[0]);
            assert!(m.validate(&policy).unwrap_err().to_string().contains(field));
        }
    }

    #[test]
    fn names_rbac_verbs_and_get_only_grants() {
        let mut m = sample();
        let cr = Gvk::new("rbac.authorization.k8s.io", "v1", "ClusterRole");
        m.permissions.push(Permission {
            resource: cr.clone(),
            subresource: None,
            verbs: [Verb::Bind, Verb::Get].into(),
            namespaces: BTreeSet::new(),
            names: ["edit".to_string()].into(),
        });
        assert!(m.allows(Verb::Get, &cr, None, None, Some("edit")));
        assert!(!m.allows(Verb::Get, &cr, None, None, Some("admin")), "names limit a grant");
        assert!(!m.allows(Verb::Get, &cr, None, None, None), "and a list is not a get of a name");
        assert!(!m.cached_resources().contains(&cr), "named grants are never cached");
        assert!(m.reads_live(&cr));
        assert_eq!("deletecollection".parse::<Verb>(), Ok(Verb::DeleteCollection));
        assert!("*".parse::<Verb>().unwrap_err().contains("not an RBAC verb"));
        // A watch grant caches the resource and serves get and list from it.
        let node = Gvk::new("", "v1", "Node");
        m.permissions.push(Permission {
            resource: node.clone(),
            subresource: None,
            verbs: [Verb::Watch].into(),
            namespaces: BTreeSet::new(),
            names: BTreeSet::new(),
        });
        assert!(m.cached_resources().contains(&node));
        assert!(m.allows(Verb::Get, &node, None, None, Some("n1")));
        assert!(!m.reads_live(&node));
    }

    #[test]
    fn rules_cover_reads_grants_owner_finalizers_and_events() {
        let rules = sample().rules();
        let find = |kind: &str, sub: Option<&str>| rules.iter().find(|r| r.resource.kind == kind && r.subresource.as_deref() == sub).unwrap();
        assert_eq!(find("Foo", None).verbs, Verb::READ.into());
        assert_eq!(find("Foo", Some("finalizers")).verbs, [Verb::Update].into(), "it owns Deployments");
        assert_eq!(find("Secret", None).namespaces, Some(["team-a".to_string()].into()));
        assert_eq!(find("Event", None).verbs, [Verb::Create, Verb::Patch].into());
        assert!(rules.iter().any(|r| r.resource.kind == "Deployment" && r.verbs.contains(&Verb::Create)));
    }
}
