//! # kubewasm SDK for Rust
//!
//! A controller plugin is a type implementing [`Controller`], exported with
//! [`export_controller!`] and built with `cargo build --target wasm32-wasip2 --release`:
//!
//! ```ignore
//! use kubewasm_sdk::prelude::*;
//! use kubewasm_sdk::k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Echo;
//!
//! impl Controller for Echo {
//!     type Primary = ConfigMap;
//!     type Settings = ();
//!
//!     fn new(_: ()) -> Result<Self, String> {
//!         Ok(Echo)
//!     }
//!
//!     fn manifest(&self) -> Manifest {
//!         Manifest::new("echo", env!("CARGO_PKG_VERSION")).primary::<ConfigMap>()
//!     }
//!
//!     fn reconcile(&self, cm: ConfigMap, ctx: &Context) -> Result<Action> {
//!         ctx.info(&format!("saw {}", cm.name()));
//!         Ok(Action::Done)
//!     }
//! }
//!
//! kubewasm_sdk::export_controller!(Echo);
//! ```
//!
//! Objects are k8s-openapi types, or [`DynamicObject`] for custom resources without generated
//! types. Everything the host offers — cache reads, writes, events, logs — is a method of
//! [`Context`].

pub mod bounds;
mod builtins;
mod composite;
mod context;
mod error;
mod manifest;
mod object;
pub mod webhook;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "controller",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_controller_bindings",
        default_bindings_module: "kubewasm_sdk::bindings",
    });
}

pub use composite::{ChildSelector, Composite, RelatedRule, SyncRequest, SyncResponse, UpdateStrategy};
pub use context::{Cluster, Context, EventType, LogLevel, PatchType};
pub use error::{Error, ErrorCode, Result};
pub use k8s_openapi;
pub use manifest::{Limits, Manifest, Mapping, Members, Verb};
pub use object::{DynamicObject, Gvk, Object, ObjectKey, ResourceExt, StatusCondition, gvk_of};
pub use serde_json;
pub use webhook::{Denial, Mutation, Review, Warnings, Webhook};

/// The usual imports for writing a controller.
pub mod prelude {
    pub use crate::{
        Action, ChildSelector, Composite, Context, Controller, Denial, DynamicObject, Error, ErrorCode, EventType, Gvk, Manifest, Mapping, Members, Mutation,
        Object, ObjectKey, RelatedRule, ResourceExt, Result, Review, StatusCondition, SyncRequest, SyncResponse, UpdateStrategy, Verb, Warnings, Webhook,
    };
}

use std::time::Duration;

/// What the host does with the key after a successful reconcile or finalize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more until something changes (or the periodic resync).
    Done,
    /// Reconcile again after this long even if nothing changes, in whole milliseconds rounded
    /// up. Under a second it means "again soon": rate limited like a failure (per-key backoff
    /// from 5 ms and the plugin's token bucket), so ask for a second or more for a fixed delay.
    RequeueAfter(Duration),
}

impl Action {
    /// The WIT's milliseconds: rounded up, so that no positive delay becomes 0, and saturating.
    fn requeue_millis(after: Duration) -> u64 {
        after.as_nanos().div_ceil(1_000_000).try_into().unwrap_or(u64::MAX)
    }
}

/// A controller plugin.
///
/// The host creates a fresh instance of the plugin now and then (on load, for concurrency, after
/// a fault); each one builds its controller once with [`Controller::new`] from the settings in
/// `NAME.toml` beside `NAME.wasm`, then handles many calls, one at a time.
///
/// A panic is a fault, never an error value: the call traps, the instance is replaced, the key
/// is retried with backoff, and an object the plugin keeps faulting on is quarantined (set
/// aside until it changes). Return an [`Error`] for what the plugin means to report.
pub trait Controller: Sized + 'static {
    /// The resource reconciled: a k8s-openapi type or [`DynamicObject`].
    type Primary: Object;
    /// The plugin's settings, read from `NAME.toml` (use `()` for none). A key that `Settings`
    /// does not declare refuses the plugin (`settings: unknown field "KEY"`); with `()` any key
    /// does. Missing keys take `Default`'s values when the type says so (`#[serde(default)]`).
    type Settings: serde::de::DeserializeOwned + Default + 'static;

    /// Builds the controller from its settings; `Err` refuses to load, saying what is wrong.
    fn new(settings: Self::Settings) -> std::result::Result<Self, String>;

    /// What the plugin reconciles and what it needs.
    fn manifest(&self) -> Manifest;

    /// Moves the world towards what `object` asks for. Level-triggered: read current state
    /// through `ctx`, don't assume what changed.
    fn reconcile(&self, object: Self::Primary, ctx: &Context) -> Result<Action>;

    /// Cleans up before an object carrying the manifest's finalizer goes away.
    fn finalize(&self, object: Self::Primary, ctx: &Context) -> Result<Action> {
        let _ = (object, ctx);
        Ok(Action::Done)
    }

    /// Maps an event on a watched object (mapping [`Mapping::MapRelated`]) to primary keys.
    /// The WIT's `map-related` has no error value: an `Err` (like a panic) traps, and the host
    /// retries the watched object like a faulting reconcile (quarantining it after as many
    /// faults in a row). An empty list means no keys.
    fn map_related(&self, resource: &Gvk, object: DynamicObject, ctx: &Context) -> Result<Vec<ObjectKey>> {
        let _ = (resource, object, ctx);
        Ok(Vec::new())
    }

    /// Lets go of a primary that stopped matching the manifest's primary selector (its labels
    /// changed): this controller no longer manages it, but what it made for it is still there.
    /// By default, deletes the objects of the `owns` kinds it controls (those the manifest may
    /// delete), as the garbage collector would had it been deleted; override to hand them over
    /// instead.
    fn released(&self, object: Self::Primary, ctx: &Context) -> Result<Action> {
        ctx.delete_controlled(&object, &self.manifest().owned())?;
        Ok(Action::Done)
    }

    /// Answers a validating hook of the manifest ([`Manifest::webhook`]; `review.hook` says
    /// which): `Ok` allows the change, with warnings for the user; a [`Denial`] refuses it —
    /// controller-runtime's `CustomValidator`. `ctx` reads the cache; writes are refused.
    /// A panic is a fault: the host answers by the hook's failure policy.
    fn validate(&self, review: &Review, ctx: &Context) -> std::result::Result<Warnings, Denial> {
        let _ = ctx;
        Err(Denial::new(500, format!("the plugin declares hook {:?} but does not implement Controller::validate", review.hook)))
    }

    /// Answers a mutating hook of the manifest: the object as it should be stored (the host
    /// sends the API server the patch), or a [`Denial`] — controller-runtime's `CustomDefaulter`.
    fn mutate(&self, review: &Review, ctx: &Context) -> std::result::Result<Mutation, Denial> {
        let _ = ctx;
        Err(Denial::new(500, format!("the plugin declares hook {:?} but does not implement Controller::mutate", review.hook)))
    }

    /// Converts an object of a custom resource the manifest [`Manifest::converts`] to
    /// `desired_api_version` (`group/version`): the same object (kind, name, namespace, UID;
    /// only labels and annotations of its metadata may change) in that version, or why not.
    fn convert(&self, object: DynamicObject, desired_api_version: &str) -> std::result::Result<DynamicObject, String> {
        let _ = object;
        Err(format!("the plugin declares a conversion but does not implement Controller::convert (to {desired_api_version})"))
    }
}

/// Exports a [`Controller`] as the plugin's implementation of the kubewasm contract.
#[macro_export]
macro_rules! export_controller {
    ($controller:ty) => {
        #[doc(hidden)]
        struct __KubewasmGuest;

        impl $crate::bindings::exports::kubewasm::controller::plugin::Guest for __KubewasmGuest {
            fn describe(settings: String) -> ::std::result::Result<$crate::bindings::exports::kubewasm::controller::plugin::Manifest, String> {
                $crate::__private::describe::<$controller>(&settings)
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::reconciler::Guest for __KubewasmGuest {
            fn reconcile(
                request: $crate::bindings::exports::kubewasm::controller::reconciler::Request,
            ) -> ::std::result::Result<$crate::bindings::kubewasm::controller::types::Action, $crate::bindings::kubewasm::controller::types::Error> {
                $crate::__private::reconcile::<$controller>(request, false)
            }

            fn finalize(
                request: $crate::bindings::exports::kubewasm::controller::reconciler::Request,
            ) -> ::std::result::Result<$crate::bindings::kubewasm::controller::types::Action, $crate::bindings::kubewasm::controller::types::Error> {
                $crate::__private::reconcile::<$controller>(request, true)
            }

            fn map_related(
                resource: $crate::bindings::kubewasm::controller::types::Gvk,
                object: String,
            ) -> Vec<$crate::bindings::kubewasm::controller::types::ObjectKey> {
                $crate::__private::map_related::<$controller>(resource, &object)
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::release::Guest for __KubewasmGuest {
            fn released(
                request: $crate::bindings::exports::kubewasm::controller::reconciler::Request,
            ) -> ::std::result::Result<$crate::bindings::kubewasm::controller::types::Action, $crate::bindings::kubewasm::controller::types::Error> {
                $crate::__private::released::<$controller>(request)
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::webhooks::Guest for __KubewasmGuest {
            fn declare() -> $crate::bindings::exports::kubewasm::controller::webhooks::Declaration {
                $crate::__private::hooks()
            }

            fn validate(
                request: $crate::bindings::exports::kubewasm::controller::webhooks::AdmissionRequest,
            ) -> ::std::result::Result<Vec<String>, $crate::bindings::exports::kubewasm::controller::webhooks::Denial> {
                $crate::__private::validate::<$controller>(request)
            }

            fn mutate(
                request: $crate::bindings::exports::kubewasm::controller::webhooks::AdmissionRequest,
            ) -> ::std::result::Result<
                $crate::bindings::exports::kubewasm::controller::webhooks::Mutation,
                $crate::bindings::exports::kubewasm::controller::webhooks::Denial,
            > {
                $crate::__private::mutate::<$controller>(request)
            }

            fn convert(objects: Vec<String>, desired_api_version: String) -> ::std::result::Result<Vec<String>, String> {
                $crate::__private::convert::<$controller>(objects, &desired_api_version)
            }
        }

        // Every plugin exports `composite` (one set of bindings for both kinds); a controller
        // says it is not declarative, and the host never calls the rest.
        impl $crate::bindings::exports::kubewasm::controller::composite::Guest for __KubewasmGuest {
            fn describe_composition() -> Option<$crate::bindings::exports::kubewasm::controller::composite::Composition> {
                None
            }

            fn customize(
                _: String,
            ) -> ::std::result::Result<
                Vec<$crate::bindings::exports::kubewasm::controller::composite::RelatedRule>,
                $crate::bindings::kubewasm::controller::types::Error,
            > {
                $crate::__private::not_this_kind("a controller's customize")
            }

            fn sync(
                _: $crate::bindings::exports::kubewasm::controller::composite::SyncRequest,
            ) -> ::std::result::Result<
                $crate::bindings::exports::kubewasm::controller::composite::SyncResponse,
                $crate::bindings::kubewasm::controller::types::Error,
            > {
                $crate::__private::not_this_kind("a controller's sync")
            }

            fn finalize(
                _: $crate::bindings::exports::kubewasm::controller::composite::SyncRequest,
            ) -> ::std::result::Result<
                $crate::bindings::exports::kubewasm::controller::composite::SyncResponse,
                $crate::bindings::kubewasm::controller::types::Error,
            > {
                $crate::__private::not_this_kind("a controller's composite finalize")
            }
        }

        $crate::__export_common!();
    };
}

/// The exports every plugin answers alike (`access`, `views`, `projections`, `clusters`), and the bindings'
/// export.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_common {
    () => {
        impl $crate::bindings::exports::kubewasm::controller::access::Guest for __KubewasmGuest {
            fn rules() -> Vec<$crate::bindings::exports::kubewasm::controller::access::Rule> {
                $crate::__private::rules()
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::views::Guest for __KubewasmGuest {
            fn metadata_only() -> Vec<$crate::bindings::kubewasm::controller::types::Gvk> {
                $crate::__private::metadata_only()
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::projections::Guest for __KubewasmGuest {
            fn fields() -> Vec<$crate::bindings::exports::kubewasm::controller::projections::Projection> {
                $crate::__private::projections()
            }
        }

        impl $crate::bindings::exports::kubewasm::controller::clusters::Guest for __KubewasmGuest {
            fn scope() -> $crate::bindings::exports::kubewasm::controller::clusters::ClusterScope {
                $crate::__private::scope()
            }
        }

        $crate::bindings::__export_controller_bindings!(__KubewasmGuest with_types_in $crate::bindings);
    };
}

/// Settings JSON text as `describe` gets it, decoded into `S`: nothing (or `{}`) is
/// `S::default()`; a key `S` does not declare is refused, since ignoring it would run the plugin
/// without a setting its operator believes is on (serde ignores unknown keys unless each type
/// says `deny_unknown_fields`, so `serde_ignored` reports them for every type).
fn settings<S: serde::de::DeserializeOwned + Default + 'static>(text: &str) -> std::result::Result<S, String> {
    let table: serde_json::Map<String, serde_json::Value> = match text.trim() {
        "" | "null" => return Ok(S::default()),
        text => serde_json::from_str(text).map_err(|e| format!("settings must be a table: {e}"))?,
    };
    if table.is_empty() {
        return Ok(S::default());
    }
    // `()` takes no settings: name the first key rather than serde's "expected unit".
    if std::any::TypeId::of::<S>() == std::any::TypeId::of::<()>() {
        let key = table.keys().next().map(String::as_str).unwrap_or_default();
        return Err(format!("settings: unknown field {key:?}"));
    }
    let mut unknown = None;
    let settings = serde_ignored::deserialize(serde_json::Value::Object(table), |path| {
        unknown.get_or_insert_with(|| path.to_string());
    })
    .map_err(|e| format!("settings: {e}"))?;
    match unknown {
        Some(path) => Err(format!("settings: unknown field {path:?}")),
        None => Ok(settings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    #[serde(default, rename_all = "camelCase")]
    struct Settings {
        max_unavailable: u32,
        nested: Nested,
    }

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    #[serde(default)]
    struct Nested {
        known: bool,
    }

    #[test]
    fn declared_settings_decode_and_missing_ones_take_defaults() {
        assert_eq!(settings::<Settings>(r#"{"maxUnavailable": 2}"#).unwrap(), Settings { max_unavailable: 2, ..Default::default() });
        assert_eq!(settings::<Settings>("{}").unwrap(), Settings::default());
        assert_eq!(settings::<Settings>("").unwrap(), Settings::default());
        settings::<()>("{}").unwrap();
    }

    #[test]
    fn unknown_settings_are_refused_with_the_key_named() {
        assert_eq!(settings::<Settings>(r#"{"maxUnavailable": 2, "bogus": 1}"#).unwrap_err(), r#"settings: unknown field "bogus""#);
        assert_eq!(settings::<Settings>(r#"{"nested": {"typo": true}}"#).unwrap_err(), r#"settings: unknown field "nested.typo""#);
        assert_eq!(settings::<()>(r#"{"bogus": 1}"#).unwrap_err(), r#"settings: unknown field "bogus""#);
        assert!(settings::<Settings>(r#"{"maxUnavailable": "two"}"#).unwrap_err().starts_with("settings: invalid type"));
        assert!(settings::<Settings>("[1]").unwrap_err().starts_with("settings must be a table"));
    }

    #[test]
    fn requeue_delays_round_up_to_whole_milliseconds() {
        assert_eq!(Action::requeue_millis(Duration::from_millis(2500)), 2500);
        assert_eq!(Action::requeue_millis(Duration::from_micros(400)), 1);
        assert_eq!(Action::requeue_millis(Duration::from_micros(1001)), 2);
        assert_eq!(Action::requeue_millis(Duration::ZERO), 0);
        assert_eq!(Action::requeue_millis(Duration::MAX), u64::MAX);
    }
}

#[doc(hidden)]
pub mod __private {
    use std::any::Any;
    use std::cell::RefCell;

    use super::bindings::exports::kubewasm::controller::access::Rule;
    use super::bindings::exports::kubewasm::controller::clusters::{ClusterScope, Members};
    use super::bindings::exports::kubewasm::controller::composite as wit_composite;
    use super::bindings::exports::kubewasm::controller::plugin::Manifest as WitManifest;
    use super::bindings::exports::kubewasm::controller::projections::Projection;
    use super::bindings::exports::kubewasm::controller::reconciler::Request;
    use super::bindings::exports::kubewasm::controller::webhooks as wit_hooks;
    use super::bindings::kubewasm::controller::types as wit;
    use super::manifest::Declared;
    use super::{Action, Composite, Context, Controller, DynamicObject, Error, ErrorCode, Gvk, Mutation, Review, SyncRequest};

    thread_local! {
        /// The controller built by `describe` in this instance.
        static CONTROLLER: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
        /// The manifest's rules beyond `permissions`, metadata-only kinds and projections, for
        /// `access.rules`, `views.metadata-only` and `projections.fields` right after.
        static DECLARED: RefCell<Declared> = RefCell::default();
        /// The clusters it serves and reaches, for `clusters.scope` right after.
        static SCOPE: RefCell<ClusterScope> = const { RefCell::new(ClusterScope { serve_local: true, serve: Members::None, reach: Members::None }) };
        /// A declarative plugin's composition, for `composite.describe-composition` right after.
        static COMPOSITION: RefCell<Option<wit_composite::Composition>> = const { RefCell::new(None) };
    }

    fn with<C: 'static, R>(f: impl FnOnce(&C) -> R) -> R {
        CONTROLLER.with(|slot| {
            let slot = slot.borrow();
            let controller = slot.as_ref().and_then(|c| c.downcast_ref::<C>()).expect("the host calls describe before any other function");
            f(controller)
        })
    }

    pub fn describe<C: Controller>(settings: &str) -> Result<WitManifest, String> {
        let settings = super::settings::<C::Settings>(settings).map_err(super::error::cut)?;
        let controller = C::new(settings).map_err(super::error::cut)?;
        let manifest = controller.manifest();
        SCOPE.with(|slot| *slot.borrow_mut() = manifest.cluster_scope());
        let (manifest, declared) = manifest.into_wit();
        CONTROLLER.with(|slot| *slot.borrow_mut() = Some(Box::new(controller)));
        DECLARED.with(|slot| *slot.borrow_mut() = declared);
        Ok(manifest)
    }

    /// `describe` of a [`Composite`]: its manifest, and its composition kept for
    /// `describe-composition`.
    pub fn describe_composite<C: Composite>(settings: &str) -> Result<WitManifest, String> {
        let settings = super::settings::<C::Settings>(settings).map_err(super::error::cut)?;
        let composite = C::new(settings).map_err(super::error::cut)?;
        let manifest = composite.manifest();
        SCOPE.with(|slot| *slot.borrow_mut() = manifest.cluster_scope());
        let (manifest, declared, composition) = manifest.into_wit_composite();
        CONTROLLER.with(|slot| *slot.borrow_mut() = Some(Box::new(composite)));
        DECLARED.with(|slot| *slot.borrow_mut() = declared);
        COMPOSITION.with(|slot| *slot.borrow_mut() = Some(composition));
        Ok(manifest)
    }

    pub fn composition() -> Option<wit_composite::Composition> {
        COMPOSITION.with(|slot| slot.borrow().clone())
    }

    /// An export the host never calls for this kind of plugin: a trap if it does.
    pub fn not_this_kind(what: &str) -> ! {
        panic!("{what} is never called by the host")
    }

    /// The context of a declarative call about `parent` (its key, from its metadata).
    fn parent_context(parent: &serde_json::Value) -> Context {
        let meta = &parent["metadata"];
        let key = wit::ObjectKey { namespace: meta["namespace"].as_str().map(Into::into), name: meta["name"].as_str().unwrap_or_default().into() };
        Context::new(key, 0)
    }

    pub fn customize<C: Composite>(parent: &str) -> Result<Vec<wit_composite::RelatedRule>, wit::Error> {
        let value: serde_json::Value = serde_json::from_str(parent).map_err(|e| Error::new(ErrorCode::Invalid, format!("the parent does not parse: {e}")))?;
        let typed: C::Parent = serde_json::from_value(value.clone()).map_err(|e| Error::new(ErrorCode::Invalid, format!("the parent does not parse: {e}")))?;
        let rules = with::<C, _>(|c| c.customize(&typed, &parent_context(&value)))?;
        Ok(rules.into_iter().map(super::RelatedRule::into_wit).collect())
    }

    /// `sync`, or `finalize` when the request says the parent is finalizing.
    pub fn sync<C: Composite>(request: wit_composite::SyncRequest) -> Result<wit_composite::SyncResponse, wit::Error> {
        let invalid = |e: serde_json::Error| Error::new(ErrorCode::Invalid, format!("the parent does not parse: {e}"));
        let value: serde_json::Value = serde_json::from_str(&request.parent).map_err(invalid)?;
        let parent: C::Parent = serde_json::from_value(value.clone()).map_err(invalid)?;
        let groups = |groups: Vec<wit_composite::Objects>| groups.into_iter().map(|g| (Gvk::from(g.resource), g.items)).collect();
        let sync = SyncRequest::new(parent, groups(request.children), groups(request.related), request.finalizing);
        let ctx = parent_context(&value);
        let answer = with::<C, _>(|c| if sync.finalizing { c.finalize(&sync, &ctx) } else { c.sync(&sync, &ctx) })?;
        Ok(answer.into_wit())
    }

    pub fn rules() -> Vec<Rule> {
        DECLARED.with(|slot| slot.borrow().rules.clone())
    }

    pub fn metadata_only() -> Vec<wit::Gvk> {
        DECLARED.with(|slot| slot.borrow().metadata_only.clone())
    }

    pub fn projections() -> Vec<Projection> {
        DECLARED.with(|slot| slot.borrow().projections.clone())
    }

    pub fn scope() -> ClusterScope {
        SCOPE.with(|slot| slot.borrow().clone())
    }

    pub fn hooks() -> wit_hooks::Declaration {
        DECLARED.with(|slot| slot.borrow().hooks.clone()).unwrap_or(wit_hooks::Declaration { admission: Vec::new(), conversion: Vec::new() })
    }

    /// The context of a hook call: the object's key, for logs; reads of the cache.
    fn review_context(review: &Review) -> Context {
        Context::new(wit::ObjectKey { namespace: review.namespace.clone(), name: review.name.clone() }, 0)
    }

    pub fn validate<C: Controller>(request: wit_hooks::AdmissionRequest) -> Result<Vec<String>, wit_hooks::Denial> {
        let review = Review::from_wit(request);
        with::<C, _>(|c| c.validate(&review, &review_context(&review))).map_err(crate::webhook::denial)
    }

    pub fn mutate<C: Controller>(request: wit_hooks::AdmissionRequest) -> Result<wit_hooks::Mutation, wit_hooks::Denial> {
        let review = Review::from_wit(request);
        with::<C, _>(|c| c.mutate(&review, &review_context(&review))).map(Mutation::into_wit).map_err(crate::webhook::denial)
    }

    /// Converts each object; the first that cannot be fails the whole request, naming it.
    pub fn convert<C: Controller>(objects: Vec<String>, desired: &str) -> Result<Vec<String>, String> {
        objects
            .iter()
            .map(|text| {
                let object: DynamicObject = serde_json::from_str(text).map_err(|e| format!("an object does not parse: {e}"))?;
                let name = object.metadata.name.clone().unwrap_or_default();
                let converted = with::<C, _>(|c| c.convert(object, desired)).map_err(|e| format!("{name}: {e}"))?;
                serde_json::to_string(&converted).map_err(|e| format!("{name}: the converted object does not serialize: {e}"))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| super::error::cut_to(e, crate::webhook::MAX_DENIAL_MESSAGE))
    }

    pub fn reconcile<C: Controller>(request: Request, finalize: bool) -> Result<wit::Action, wit::Error> {
        call::<C>(request, |c, object, ctx| if finalize { c.finalize(object, ctx) } else { c.reconcile(object, ctx) })
    }

    pub fn released<C: Controller>(request: Request) -> Result<wit::Action, wit::Error> {
        call::<C>(request, |c, object, ctx| c.released(object, ctx))
    }

    fn call<C: Controller>(request: Request, f: impl FnOnce(&C, C::Primary, &Context) -> crate::Result<Action>) -> Result<wit::Action, wit::Error> {
        let object: C::Primary =
            serde_json::from_str(&request.object).map_err(|e| Error::new(ErrorCode::Invalid, format!("the primary object does not parse: {e}")))?;
        let ctx = Context::new(request.key, request.retries);
        let action = with::<C, _>(|c| f(c, object, &ctx))?;
        Ok(match action {
            Action::Done => wit::Action::Done,
            Action::RequeueAfter(after) => wit::Action::RequeueAfter(Action::requeue_millis(after)),
        })
    }

    /// Runs `map_related`; a failure traps (a panic), since `map-related` has no error value.
    pub fn map_related<C: Controller>(resource: wit::Gvk, object: &str) -> Vec<wit::ObjectKey> {
        let resource = Gvk::from(resource);
        let keys = serde_json::from_str::<DynamicObject>(object)
            .map_err(|e| Error::new(ErrorCode::Invalid, format!("the watched object does not parse: {e}")))
            .and_then(|object| {
                let ctx = Context::new(wit::ObjectKey { namespace: None, name: String::new() }, 0);
                with::<C, _>(|c| c.map_related(&resource, object, &ctx))
            });
        match keys {
            Ok(keys) => keys.into_iter().map(Into::into).collect(),
            Err(e) => panic!("map_related of a {} failed: {e}", resource.kind),
        }
    }
}
