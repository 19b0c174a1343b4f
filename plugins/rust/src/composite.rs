//! Declarative controllers: a [`Composite`] answers, for a parent object, which children should
//! exist and what the parent's status is ([`SyncResponse`]); the host claims, applies, prunes and
//! writes the status (the WIT's `composite` interface).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::exports::kubewasm::controller::composite as wit;
use crate::error::Result;
use crate::object::{DynamicObject, Gvk, Object, gvk_of};
use crate::{Action, Context, Manifest};

pub use wit::{ChildSelector, UpdateStrategy};

/// A declarative controller plugin: the parent kind is the manifest's primary, each child kind
/// is declared with [`Manifest::child`].
///
/// The host calls [`Composite::sync`] for a parent (and [`Composite::finalize`] for one being
/// deleted, when the manifest has a finalizer) with the children it owns, and makes the world
/// match the answer: it creates what is missing, updates per the kind's [`UpdateStrategy`],
/// deletes what is no longer answered (only once every create and update succeeded), and
/// replaces the parent's status (with `observedGeneration`). `sync` may read the cache and log
/// through `ctx`; its writes and Events are refused (`forbidden`): every write is the host's.
/// A panic is a fault, as in [`crate::Controller`]; an [`crate::Error`] retries with backoff.
pub trait Composite: Sized + 'static {
    /// The parent kind: a k8s-openapi type or [`DynamicObject`].
    type Parent: Object;
    /// The plugin's settings, as for [`crate::Controller::Settings`].
    type Settings: DeserializeOwned + Default + 'static;

    fn new(settings: Self::Settings) -> std::result::Result<Self, String>;

    /// The parent kind ([`Manifest::primary`]), the child kinds ([`Manifest::child`]) and what
    /// else the plugin needs.
    fn manifest(&self) -> Manifest;

    /// The related objects a parent needs besides its children (handed in
    /// [`SyncRequest::related`]); asked once per parent and generation.
    fn customize(&self, parent: &Self::Parent, ctx: &Context) -> Result<Vec<RelatedRule>> {
        let _ = (parent, ctx);
        Ok(Vec::new())
    }

    /// The children and status the parent should have.
    fn sync(&self, request: &SyncRequest<Self::Parent>, ctx: &Context) -> Result<SyncResponse>;

    /// The same for a parent being deleted: by default no children and finalized.
    fn finalize(&self, request: &SyncRequest<Self::Parent>, ctx: &Context) -> Result<SyncResponse> {
        let _ = (request, ctx);
        Ok(SyncResponse::new().finalized(true))
    }
}

/// One parent and what it has.
pub struct SyncRequest<P> {
    pub parent: P,
    /// Whether the parent is being deleted (a `finalize` call).
    pub finalizing: bool,
    children: Vec<(Gvk, Vec<String>)>,
    related: Vec<(Gvk, Vec<String>)>,
}

impl<P> SyncRequest<P> {
    /// A request as the host would make it (for tests): children and related objects as JSON.
    pub fn new(parent: P, children: Vec<(Gvk, Vec<String>)>, related: Vec<(Gvk, Vec<String>)>, finalizing: bool) -> Self {
        SyncRequest { parent, finalizing, children, related }
    }

    /// The parent's children of `K`'s kind.
    pub fn children<K: Object + k8s_openapi::Resource>(&self) -> Result<Vec<K>> {
        of(&self.children, &gvk_of::<K>())
    }

    /// The parent's children of a kind without a k8s-openapi type.
    pub fn children_of(&self, gvk: &Gvk) -> Result<Vec<DynamicObject>> {
        of(&self.children, gvk)
    }

    /// The related objects of `K`'s kind, over every rule that named the kind.
    pub fn related<K: Object + k8s_openapi::Resource>(&self) -> Result<Vec<K>> {
        of(&self.related, &gvk_of::<K>())
    }

    pub fn related_of(&self, gvk: &Gvk) -> Result<Vec<DynamicObject>> {
        of(&self.related, gvk)
    }
}

/// The objects of `gvk`'s group and kind in `groups`, parsed.
fn of<T: DeserializeOwned>(groups: &[(Gvk, Vec<String>)], gvk: &Gvk) -> Result<Vec<T>> {
    let same = |g: &Gvk| g.group == gvk.group && g.kind == gvk.kind;
    groups.iter().filter(|(g, _)| same(g)).flat_map(|(_, items)| items).map(|json| Ok(serde_json::from_str(json)?)).collect()
}

/// What should be. Start with [`SyncResponse::new`], then chain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncResponse {
    status: Option<serde_json::Value>,
    children: Vec<serde_json::Value>,
    resync_after: Option<Duration>,
    finalized: bool,
}

impl SyncResponse {
    pub fn new() -> Self {
        SyncResponse::default()
    }

    /// The parent's whole status (the host adds `observedGeneration`); without one the host
    /// leaves the status as it is.
    pub fn status(mut self, status: impl Serialize) -> Self {
        self.status = Some(serde_json::to_value(status).expect("a status serializes to JSON"));
        self
    }

    /// A child that should exist, whole: a k8s-openapi object, a [`DynamicObject`] or any
    /// serializable value with `apiVersion`, `kind` and `metadata.name`.
    pub fn child(mut self, child: impl Serialize) -> Self {
        self.children.push(serde_json::to_value(child).expect("an object serializes to JSON"));
        self
    }

    pub fn children(mut self, children: impl IntoIterator<Item = impl Serialize>) -> Self {
        self.children.extend(children.into_iter().map(|c| serde_json::to_value(c).expect("an object serializes to JSON")));
        self
    }

    /// Sync again after this long even if nothing changes (whole milliseconds, rounded up).
    pub fn resync_after(mut self, after: Duration) -> Self {
        self.resync_after = Some(after);
        self
    }

    /// From `finalize`: the finalizer may go.
    pub fn finalized(mut self, done: bool) -> Self {
        self.finalized = done;
        self
    }

    pub fn status_value(&self) -> Option<&serde_json::Value> {
        self.status.as_ref()
    }

    pub fn child_values(&self) -> &[serde_json::Value] {
        &self.children
    }

    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    pub fn resync(&self) -> Option<Duration> {
        self.resync_after
    }

    pub(crate) fn into_wit(self) -> wit::SyncResponse {
        wit::SyncResponse {
            status: self.status.map(|s| s.to_string()),
            children: self.children.iter().map(ToString::to_string).collect(),
            resync_after: self.resync_after.map(Action::requeue_millis),
            finalized: self.finalized,
        }
    }
}

/// Objects a parent depends on besides its children: of one kind, by `names` or by label
/// selector, in one namespace or all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedRule {
    pub resource: Gvk,
    pub namespace: Option<String>,
    pub names: Vec<String>,
    pub label_selector: Option<String>,
}

impl RelatedRule {
    /// Objects of `K`'s kind named `names` in `namespace` (any namespace when `None`).
    pub fn named<K: k8s_openapi::Resource>(namespace: Option<&str>, names: &[&str]) -> Self {
        RelatedRule {
            resource: gvk_of::<K>(),
            namespace: namespace.map(Into::into),
            names: names.iter().map(|n| n.to_string()).collect(),
            label_selector: None,
        }
    }

    /// Objects of `K`'s kind matching `selector` (e.g. `"env=prod"`; `""` for all) in
    /// `namespace` (every namespace when `None`).
    pub fn selected<K: k8s_openapi::Resource>(namespace: Option<&str>, selector: &str) -> Self {
        RelatedRule { resource: gvk_of::<K>(), namespace: namespace.map(Into::into), names: Vec::new(), label_selector: Some(selector.into()) }
    }

    pub(crate) fn into_wit(self) -> wit::RelatedRule {
        wit::RelatedRule {
            resource: (&self.resource).into(),
            namespace: self.namespace,
            names: self.names,
            label_selector: self.label_selector.filter(|s| !s.is_empty()),
        }
    }
}

/// Exports a [`Composite`] as the plugin's implementation of the kubewasm contract.
#[macro_export]
macro_rules! export_composite {
    ($composite:ty) => {
        #[doc(hidden)]
        struct __KubewasmGuest;

        impl $crate::bindings::exports::kubewasm::controller::plugin::Guest for __KubewasmGuest {
            fn describe(settings: String) -> ::std::result::Result<$crate::bindings::exports::kubewasm::controller::plugin::Manifest, String> {
                $crate::__private::describe_composite::<$composite>(&settings)
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::composite::Guest for __KubewasmGuest {
            fn describe_composition() -> Option<$crate::bindings::exports::kubewasm::controller::composite::Composition> {
                $crate::__private::composition()
            }

            fn customize(
                parent: String,
            ) -> ::std::result::Result<
                Vec<$crate::bindings::exports::kubewasm::controller::composite::RelatedRule>,
                $crate::bindings::kubewasm::controller::types::Error,
            > {
                $crate::__private::customize::<$composite>(&parent)
            }

            fn sync(
                request: $crate::bindings::exports::kubewasm::controller::composite::SyncRequest,
            ) -> ::std::result::Result<
                $crate::bindings::exports::kubewasm::controller::composite::SyncResponse,
                $crate::bindings::kubewasm::controller::types::Error,
            > {
                $crate::__private::sync::<$composite>(request)
            }

            fn finalize(
                request: $crate::bindings::exports::kubewasm::controller::composite::SyncRequest,
            ) -> ::std::result::Result<
                $crate::bindings::exports::kubewasm::controller::composite::SyncResponse,
                $crate::bindings::kubewasm::controller::types::Error,
            > {
                $crate::__private::sync::<$composite>(request)
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::reconciler::Guest for __KubewasmGuest {
            fn reconcile(
                _: $crate::bindings::exports::kubewasm::controller::reconciler::Request,
            ) -> ::std::result::Result<$crate::bindings::kubewasm::controller::types::Action, $crate::bindings::kubewasm::controller::types::Error> {
                $crate::__private::not_this_kind("a declarative plugin's reconcile")
            }

            fn finalize(
                _: $crate::bindings::exports::kubewasm::controller::reconciler::Request,
            ) -> ::std::result::Result<$crate::bindings::kubewasm::controller::types::Action, $crate::bindings::kubewasm::controller::types::Error> {
                $crate::__private::not_this_kind("a declarative plugin's reconciler finalize")
            }

            fn map_related(_: $crate::bindings::kubewasm::controller::types::Gvk, _: String) -> Vec<$crate::bindings::kubewasm::controller::types::ObjectKey> {
                $crate::__private::not_this_kind("a declarative plugin's map-related")
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::release::Guest for __KubewasmGuest {
            fn released(
                _: $crate::bindings::exports::kubewasm::controller::reconciler::Request,
            ) -> ::std::result::Result<$crate::bindings::kubewasm::controller::types::Action, $crate::bindings::kubewasm::controller::types::Error> {
                $crate::__private::not_this_kind("a declarative plugin's released")
            }
        }

        // A declarative plugin serves no hooks (its manifest declares none).
        impl $crate::bindings::exports::kubewasm::controller::webhooks::Guest for __KubewasmGuest {
            fn declare() -> $crate::bindings::exports::kubewasm::controller::webhooks::Declaration {
                $crate::__private::hooks()
            }

            fn validate(
                _: $crate::bindings::exports::kubewasm::controller::webhooks::AdmissionRequest,
            ) -> ::std::result::Result<Vec<String>, $crate::bindings::exports::kubewasm::controller::webhooks::Denial> {
                $crate::__private::not_this_kind("a declarative plugin's validate")
            }

            fn mutate(
                _: $crate::bindings::exports::kubewasm::controller::webhooks::AdmissionRequest,
            ) -> ::std::result::Result<
                $crate::bindings::exports::kubewasm::controller::webhooks::Mutation,
                $crate::bindings::exports::kubewasm::controller::webhooks::Denial,
            > {
                $crate::__private::not_this_kind("a declarative plugin's mutate")
            }

            fn convert(_: Vec<String>, _: String) -> ::std::result::Result<Vec<String>, String> {
                $crate::__private::not_this_kind("a declarative plugin's convert")
            }
        }

        $crate::__export_common!();
    };
}
