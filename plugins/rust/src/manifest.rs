//! The manifest builder: what a controller reconciles and needs, in Rust terms.

use std::time::Duration;

use crate::bindings::exports::kubewasm::controller::access::Rule;
use crate::bindings::exports::kubewasm::controller::clusters::{ClusterScope, Members as WitMembers};
use crate::bindings::exports::kubewasm::controller::composite::{ChildRule, ChildSelector, Composition, UpdateStrategy};
use crate::bindings::exports::kubewasm::controller::plugin as wit;
use crate::bindings::exports::kubewasm::controller::projections::Projection;
use crate::bindings::exports::kubewasm::controller::webhooks::Declaration;
use crate::bindings::kubewasm::controller::types::Gvk as WitGvk;
use crate::object::{Gvk, gvk_of};
use crate::webhook::Webhook;

pub use wit::Verb;

/// How an event on a watched object becomes primary keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// The object's owners of the primary kind.
    OwnerReferences,
    /// The primary named by this label's value, in the object's namespace.
    Label(String),
    /// [`crate::Controller::map_related`] decides.
    MapRelated,
}

/// A choice of member clusters (contract 0.1.4): the clusters a host engages besides its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Members {
    None,
    /// Every engaged member.
    All,
    /// The members whose labels match this label selector, e.g. `"env=prod"`.
    Matching(String),
}

impl From<Members> for WitMembers {
    fn from(m: Members) -> Self {
        match m {
            Members::None => WitMembers::None,
            Members::All => WitMembers::All,
            Members::Matching(selector) => WitMembers::Matching(selector),
        }
    }
}

/// What the exports the host calls right after `describe` answer: `access.rules`,
/// `views.metadata-only`, `projections.fields`.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct Declared {
    pub rules: Vec<Rule>,
    pub metadata_only: Vec<WitGvk>,
    pub projections: Vec<Projection>,
    /// `None` until described.
    pub hooks: Option<Declaration>,
}

/// Limits the plugin asks for; `None` takes the host's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub deadline: Option<Duration>,
    pub memory_bytes: Option<u64>,
}

/// What a controller reconciles and needs. Start with [`Manifest::new`], then chain.
///
/// Everything declared here is what the plugin's identity needs: the host refuses to start a
/// plugin whose ServiceAccount RBAC does not grant it, and `kubewasm rbac` prints Roles that do.
#[derive(Debug, Clone)]
pub struct Manifest {
    inner: wit::Manifest,
    /// Grants the 0.1 `permission` record cannot hold (other RBAC verbs, object names).
    rules: Vec<Rule>,
    /// Owned or watched kinds read as metadata only (`views.metadata-only`).
    metadata_only: Vec<WitGvk>,
    /// Kinds read projected to some fields (`projections.fields`).
    projections: Vec<Projection>,
    /// A declarative plugin's child kinds and selector (`composite.describe-composition`).
    composition: Composition,
    /// The clusters it serves and reaches (`clusters.scope`).
    scope: ClusterScope,
    /// Its admission hooks and the custom resources it converts (`webhooks.declare`).
    webhooks: Vec<Webhook>,
    conversions: Vec<Gvk>,
}

fn wit_gvk(gvk: &Gvk) -> WitGvk {
    gvk.into()
}

impl Manifest {
    /// A manifest with one worker, the host's default limits and resync, and no primary yet.
    pub fn new(name: &str, version: &str) -> Self {
        Manifest {
            inner: wit::Manifest {
                name: name.into(),
                version: version.into(),
                primary: wit_gvk(&Gvk::new("", "", "")),
                primary_selector: None,
                owns: Vec::new(),
                watches: Vec::new(),
                finalizer: None,
                resync_seconds: None,
                max_concurrency: 1,
                limits: wit::Limits { deadline_ms: None, memory_bytes: None },
                permissions: Vec::new(),
            },
            rules: Vec::new(),
            metadata_only: Vec::new(),
            projections: Vec::new(),
            composition: Composition { children: Vec::new(), selector: ChildSelector::Generated },
            scope: ClusterScope { serve_local: true, serve: WitMembers::None, reach: WitMembers::None },
            webhooks: Vec::new(),
            conversions: Vec::new(),
        }
    }

    /// Also reconciles the primaries of these member clusters, each where it lives: reads,
    /// writes and Events of a call act in its object's cluster ([`crate::Context::cluster`]
    /// names it). The plugin's identity needs the same RBAC in each.
    pub fn serve_members(mut self, members: Members) -> Self {
        self.scope.serve = members.into();
        self
    }

    /// Whether it reconciles the primaries of the host's own cluster (yes, unless said here).
    pub fn serve_local(mut self, serve: bool) -> Self {
        self.scope.serve_local = serve;
        self
    }

    /// Reads and writes in these member clusters through [`crate::Context::in_cluster`],
    /// reconciling nothing there: a hub writing into members. When one is engaged, every
    /// primary is reconciled once.
    pub fn reach_members(mut self, members: Members) -> Self {
        self.scope.reach = members.into();
        self
    }

    /// What `clusters.scope` answers.
    #[doc(hidden)]
    pub fn cluster_scope(&self) -> ClusterScope {
        self.scope.clone()
    }

    /// A declarative plugin's child kind ([`crate::Composite`]): owned by the parent (the
    /// primary), created, updated per `strategy` and deleted by the host as the plugin's
    /// answers say.
    pub fn child<K: k8s_openapi::Resource>(self, strategy: UpdateStrategy) -> Self {
        self.child_gvk(&gvk_of::<K>(), strategy)
    }

    pub fn child_gvk(mut self, gvk: &Gvk, strategy: UpdateStrategy) -> Self {
        let wit = wit_gvk(gvk);
        let same = |g: &WitGvk| g.group == wit.group && g.version == wit.version && g.kind == wit.kind;
        if !self.inner.owns.iter().any(same) {
            self.inner.owns.push(wit.clone());
        }
        self.composition.children.retain(|r| !same(&r.resource));
        self.composition.children.push(ChildRule { resource: wit, update_strategy: strategy });
        self
    }

    /// Which objects are a parent's children: by default the host labels them with the parent's
    /// uid ([`ChildSelector::Generated`]); [`ChildSelector::ParentSpecSelector`] uses the
    /// parent's `spec.selector` and adopts matching orphans.
    pub fn child_selector(mut self, selector: ChildSelector) -> Self {
        self.composition.selector = selector;
        self
    }

    /// The reconciled resource, from a k8s-openapi type.
    pub fn primary<K: k8s_openapi::Resource>(self) -> Self {
        self.primary_gvk(&gvk_of::<K>())
    }

    /// The reconciled resource, by kind (custom resources).
    pub fn primary_gvk(mut self, gvk: &Gvk) -> Self {
        self.inner.primary = wit_gvk(gvk);
        self
    }

    /// Reconcile only primaries matching this label selector.
    pub fn primary_selector(mut self, selector: &str) -> Self {
        self.inner.primary_selector = Some(selector.into());
        self
    }

    /// Objects this controller creates with an owner reference to the primary.
    pub fn owns<K: k8s_openapi::Resource>(self) -> Self {
        self.owns_gvk(&gvk_of::<K>())
    }

    pub fn owns_gvk(mut self, gvk: &Gvk) -> Self {
        self.inner.owns.push(wit_gvk(gvk));
        self
    }

    /// Hand this plugin only the metadata of `K`'s objects (an owned or watched kind): every
    /// object of it that a cache read or `map_related` gets carries `apiVersion`, `kind` and
    /// `metadata` alone — typed reads get default `spec`s and `data`. The host then caches only
    /// the kind's metadata, unless another plugin needs whole objects of it. For controllers
    /// that only map a kind's events or count their children. Writes are unaffected.
    pub fn metadata_only<K: k8s_openapi::Resource>(self) -> Self {
        self.metadata_only_gvk(&gvk_of::<K>())
    }

    pub fn metadata_only_gvk(mut self, gvk: &Gvk) -> Self {
        self.metadata_only.push(wit_gvk(gvk));
        self
    }

    /// Hand this plugin only these fields of `K`'s objects (the primary kind, an owned or a
    /// watched kind; contract 0.1.5), each a dotted path from the object's top:
    /// `&["spec.replicas", "status"]`. Every object of `K` the plugin is handed — the object it
    /// reconciles, cache reads, `map_related`'s, and the answers of its writes — carries
    /// `apiVersion`, `kind`, `metadata` and, of the rest, only these fields; typed reads get
    /// defaults for the others. It spares the plugin parsing what it never reads. A path
    /// through a list keeps the list; a field whose name holds a dot is named by its parent.
    /// The host then refuses [`crate::Context::update`] of `K` (the object lacks fields):
    /// apply or patch it.
    pub fn reads_fields<K: k8s_openapi::Resource>(self, fields: &[&str]) -> Self {
        self.reads_fields_gvk(&gvk_of::<K>(), fields)
    }

    pub fn reads_fields_gvk(mut self, gvk: &Gvk, fields: &[&str]) -> Self {
        let fields = fields.iter().map(|path| path.split('.').map(String::from).collect());
        let resource = wit_gvk(gvk);
        let same = |g: &WitGvk| (&g.group, &g.version, &g.kind) == (&resource.group, &resource.version, &resource.kind);
        match self.projections.iter_mut().find(|p| same(&p.resource)) {
            Some(declared) => declared.fields.extend(fields),
            None => self.projections.push(Projection { resource, fields: fields.collect() }),
        }
        self
    }

    /// React to events on another resource.
    pub fn watches<K: k8s_openapi::Resource>(self, mapping: Mapping) -> Self {
        self.watches_gvk(&gvk_of::<K>(), mapping, None)
    }

    pub fn watches_gvk(mut self, gvk: &Gvk, mapping: Mapping, label_selector: Option<&str>) -> Self {
        self.inner.watches.push(wit::Watch {
            resource: wit_gvk(gvk),
            mapping: match mapping {
                Mapping::OwnerReferences => wit::Mapping::OwnerReferences,
                Mapping::Label(key) => wit::Mapping::Label(key),
                Mapping::MapRelated => wit::Mapping::MapRelated,
            },
            label_selector: label_selector.map(Into::into),
        });
        self
    }

    /// The finalizer the host adds to primaries so that `finalize` runs before they go. The
    /// host adds and removes it with a patch made as the plugin: the manifest grants `patch` on
    /// the primary for it.
    pub fn finalizer(mut self, name: &str) -> Self {
        self.inner.finalizer = Some(name.into());
        self
    }

    /// Reconcile every primary at least this often; `Duration::ZERO` disables resync.
    pub fn resync(mut self, every: Duration) -> Self {
        self.inner.resync_seconds = Some(every.as_secs().try_into().unwrap_or(u32::MAX));
        self
    }

    pub fn max_concurrency(mut self, workers: u32) -> Self {
        self.inner.max_concurrency = workers;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.inner.limits =
            wit::Limits { deadline_ms: limits.deadline.map(|d| d.as_millis().try_into().unwrap_or(u32::MAX)), memory_bytes: limits.memory_bytes };
        self
    }

    /// Grants `verbs` on a resource in every namespace.
    pub fn permission<K: k8s_openapi::Resource>(self, verbs: &[Verb]) -> Self {
        self.grant(&gvk_of::<K>(), None, verbs, &[])
    }

    /// Grants `verbs` on the status subresource.
    pub fn status_permission<K: k8s_openapi::Resource>(self, verbs: &[Verb]) -> Self {
        self.grant(&gvk_of::<K>(), Some("status"), verbs, &[])
    }

    /// The general form: a resource by kind, an optional subresource, verbs, and namespaces
    /// (empty for all).
    pub fn grant(mut self, gvk: &Gvk, subresource: Option<&str>, verbs: &[Verb], namespaces: &[&str]) -> Self {
        self.inner.permissions.push(wit::Permission {
            resource: wit_gvk(gvk),
            subresource: subresource.map(Into::into),
            verbs: verbs.to_vec(),
            namespaces: namespaces.iter().map(|ns| ns.to_string()).collect(),
        });
        self
    }

    /// Grants `verbs` on the named objects of a resource only (RBAC's `resourceNames`), in
    /// `namespaces` (empty for every namespace). Reads of such objects go to the API server.
    pub fn grant_named(self, gvk: &Gvk, verbs: &[&str], namespaces: &[&str], names: &[&str]) -> Self {
        self.rule(gvk, None, verbs, namespaces, names)
    }

    /// Lets the plugin create RoleBindings and ClusterRoleBindings to the ClusterRole `name`
    /// without holding its permissions itself (RBAC's `bind` verb), e.g. `edit` for a
    /// namespace-onboarding controller.
    pub fn bind_cluster_role(self, name: &str) -> Self {
        self.rule(&Gvk::new("rbac.authorization.k8s.io", "v1", "ClusterRole"), None, &["bind"], &[], &[name])
    }

    /// The most general grant: any subresource, any RBAC verb (`get` ... `delete`,
    /// `deletecollection`, `bind`, `escalate`, `impersonate`, `approve`, `sign`, `use`),
    /// namespaces and object names (empty for all).
    pub fn rule(mut self, gvk: &Gvk, subresource: Option<&str>, verbs: &[&str], namespaces: &[&str], names: &[&str]) -> Self {
        self.rules.push(Rule {
            resource: wit_gvk(gvk),
            subresource: subresource.map(Into::into),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            namespaces: namespaces.iter().map(|ns| ns.to_string()).collect(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
        });
        self
    }

    /// The owned kinds, and whether the plugin may delete each (for the default `released`).
    pub(crate) fn owned(&self) -> Vec<(Gvk, bool)> {
        let deletes = |gvk: &crate::bindings::kubewasm::controller::types::Gvk| {
            self.inner
                .permissions
                .iter()
                .any(|p| p.resource.group == gvk.group && p.resource.kind == gvk.kind && p.subresource.is_none() && p.verbs.contains(&Verb::Delete))
        };
        self.inner.owns.iter().map(|g| (Gvk::from(g.clone()), deletes(g))).collect()
    }

    /// Serves an admission hook, answered by [`Controller::validate`](crate::Controller::validate)
    /// or [`Controller::mutate`](crate::Controller::mutate).
    pub fn webhook(mut self, hook: Webhook) -> Self {
        self.webhooks.push(hook);
        self
    }

    /// Converts the versions of the custom resource `K` (its CRD's conversion webhook), through
    /// [`Controller::convert`](crate::Controller::convert).
    pub fn converts<K: k8s_openapi::Resource>(self) -> Self {
        self.converts_gvk(&gvk_of::<K>())
    }

    pub fn converts_gvk(mut self, gvk: &Gvk) -> Self {
        self.conversions.push(gvk.clone());
        self
    }

    /// What a declarative plugin's `describe`, the exports called right after it and
    /// `composite.describe-composition` answer.
    #[doc(hidden)]
    pub fn into_wit_composite(self) -> (wit::Manifest, Declared, Composition) {
        let composition = self.composition.clone();
        let (manifest, declared) = self.into_wit();
        (manifest, declared, composition)
    }

    /// What `describe` and the exports called right after it answer.
    #[doc(hidden)]
    pub fn into_wit(mut self) -> (wit::Manifest, Declared) {
        let primary = self.inner.primary.clone();
        let patches_primary = self
            .inner
            .permissions
            .iter()
            .any(|p| p.resource.group == primary.group && p.resource.kind == primary.kind && p.subresource.is_none() && p.verbs.contains(&Verb::Patch));
        if self.inner.finalizer.is_some() && !patches_primary {
            self = self.grant(&Gvk::from(primary), None, &[Verb::Patch], &[]);
        }
        let hooks = crate::webhook::declaration(self.webhooks, self.conversions);
        (self.inner, Declared { rules: self.rules, metadata_only: self.metadata_only, projections: self.projections, hooks: Some(hooks) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_of_one_kind_make_one_projection_of_split_paths() {
        let deployment = Gvk::new("apps", "v1", "Deployment");
        let manifest = Manifest::new("p", "0.1.0").reads_fields_gvk(&deployment, &["spec.replicas"]).reads_fields_gvk(&deployment, &["status"]);
        let (_, declared) = manifest.into_wit();
        let projections: Vec<(String, Vec<Vec<String>>)> = declared.projections.into_iter().map(|p| (p.resource.kind, p.fields)).collect();
        assert_eq!(projections, [("Deployment".to_string(), vec![vec!["spec".to_string(), "replicas".to_string()], vec!["status".to_string()]])]);
    }
}
