//! Admission and conversion webhooks (contract 0.1.6): a plugin declares its hooks in its
//! [`Manifest`](crate::Manifest) ([`Manifest::webhook`](crate::Manifest::webhook),
//! [`Manifest::converts`](crate::Manifest::converts)) and answers them through
//! [`Controller::validate`](crate::Controller::validate), [`Controller::mutate`](crate::Controller::mutate)
//! and [`Controller::convert`](crate::Controller::convert) — controller-runtime's
//! `CustomValidator`, `CustomDefaulter` and conversion, with the host serving HTTPS, writing the
//! webhook configurations and computing the JSON patch.
//!
//! A hook may read the cache through its [`Context`](crate::Context); it never writes (the host
//! refuses writes and Events with `forbidden`).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::exports::kubewasm::controller::webhooks as wit;
use crate::object::{Gvk, gvk_of};

pub use wit::{FailurePolicy, Operation, SideEffects};

/// One admission hook: validating (answered by `validate`) or mutating (`mutate`).
#[derive(Debug, Clone)]
pub struct Webhook(pub(crate) wit::AdmissionHook);

impl Webhook {
    /// A validating hook named `name` (a DNS label, unique in the plugin) for CREATE and UPDATE,
    /// failing closed, with a 10 s timeout, no side effects and no kinds yet.
    pub fn validating(name: &str) -> Self {
        Webhook(wit::AdmissionHook {
            name: name.into(),
            mutating: false,
            kinds: Vec::new(),
            operations: vec![Operation::Create, Operation::Update],
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 10,
            side_effects: SideEffects::None,
            match_conditions: Vec::new(),
        })
    }

    /// A mutating (defaulting) hook, otherwise as [`Webhook::validating`].
    pub fn mutating(name: &str) -> Self {
        let mut hook = Webhook::validating(name);
        hook.0.mutating = true;
        hook
    }

    /// Admits objects of `K`.
    pub fn kind<K: k8s_openapi::Resource>(self) -> Self {
        self.kind_gvk(&gvk_of::<K>())
    }

    pub fn kind_gvk(mut self, gvk: &Gvk) -> Self {
        self.0.kinds.push(gvk.into());
        self
    }

    pub fn operations(mut self, operations: &[Operation]) -> Self {
        self.0.operations = operations.to_vec();
        self
    }

    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.0.failure_policy = policy;
        self
    }

    /// How long the API server waits for an answer: whole seconds, 1 to 30 (rounded up).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.0.timeout_seconds = timeout.as_millis().div_ceil(1000).try_into().unwrap_or(u32::MAX);
        self
    }

    pub fn side_effects(mut self, side_effects: SideEffects) -> Self {
        self.0.side_effects = side_effects;
        self
    }

    /// Calls the hook only when the CEL `expression` is true (`matchConditions`).
    pub fn match_condition(mut self, name: &str, expression: &str) -> Self {
        self.0.match_conditions.push(wit::MatchCondition { name: name.into(), expression: expression.into() });
        self
    }
}

/// Who asked for a change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// One admission request: which hook, what change, by whom, and the objects.
#[derive(Debug, Clone)]
pub struct Review {
    /// The name of the plugin's hook asked.
    pub hook: String,
    pub uid: String,
    pub kind: Gvk,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// Empty on a create whose name the API server generates.
    pub name: String,
    pub operation: Operation,
    pub user: UserInfo,
    pub dry_run: bool,
    object: Option<String>,
    old_object: Option<String>,
}

impl Review {
    pub(crate) fn from_wit(r: wit::AdmissionRequest) -> Self {
        Review {
            hook: r.hook,
            uid: r.uid,
            kind: r.kind.into(),
            subresource: r.subresource,
            namespace: r.namespace,
            name: r.name,
            operation: r.operation,
            user: UserInfo { username: r.user.username, uid: r.user.uid, groups: r.user.groups },
            dry_run: r.dry_run,
            object: r.object,
            old_object: r.old_object,
        }
    }

    /// The object as it would be stored (create, update), as `K`; a denial (400) if there is none
    /// or it does not parse as `K`.
    pub fn object<K: DeserializeOwned>(&self) -> Result<K, Denial> {
        parse(self.object.as_deref(), "object")
    }

    /// The object as it is (update, delete), as `K`.
    pub fn old_object<K: DeserializeOwned>(&self) -> Result<K, Denial> {
        parse(self.old_object.as_deref(), "old object")
    }

    /// The object's JSON text as the API server sent it.
    pub fn object_json(&self) -> Option<&str> {
        self.object.as_deref()
    }

    pub fn old_object_json(&self) -> Option<&str> {
        self.old_object.as_deref()
    }
}

fn parse<K: DeserializeOwned>(text: Option<&str>, what: &str) -> Result<K, Denial> {
    let text = text.ok_or_else(|| Denial::new(400, format!("the request has no {what}")))?;
    serde_json::from_str(text).map_err(|e| Denial::new(400, format!("the {what} does not parse: {e}")))
}

/// A refusal: an HTTP status (400 to 599), a message for the user (at most 4 KiB) and warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub code: u16,
    pub message: String,
    pub warnings: Vec<String>,
}

impl Denial {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Denial { code, message: message.into(), warnings: Vec::new() }
    }

    /// 403 Forbidden: not allowed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Denial::new(403, message)
    }

    /// 422 Unprocessable Entity: the object is invalid.
    pub fn invalid(message: impl Into<String>) -> Self {
        Denial::new(422, message)
    }

    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// Warnings to show the user beside an allowed change (at most 32, each at most 512 bytes).
pub type Warnings = Vec<String>;

/// What a mutating hook makes of the object.
#[derive(Debug, Clone, Default)]
pub struct Mutation {
    object: Option<String>,
    pub warnings: Warnings,
}

impl Mutation {
    /// Leaves the object as it is.
    pub fn unchanged() -> Self {
        Mutation::default()
    }

    /// Stores `object` instead (the host sends the API server the JSON patch to it).
    pub fn to<K: Serialize>(object: &K) -> Self {
        Mutation { object: Some(serde_json::to_string(object).expect("objects serialize")), warnings: Vec::new() }
    }

    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    pub(crate) fn into_wit(self) -> wit::Mutation {
        wit::Mutation { object: self.object, warnings: self.warnings }
    }
}

/// What a denial's message may hold; a longer one is cut (a longer one would be a fault).
pub const MAX_DENIAL_MESSAGE: usize = 4096;

pub(crate) fn denial(d: Denial) -> wit::Denial {
    wit::Denial { code: d.code, message: crate::error::cut_to(d.message, MAX_DENIAL_MESSAGE), warnings: d.warnings }
}

/// The hooks a manifest declares, for `webhooks.declare`.
pub(crate) fn declaration(admission: Vec<Webhook>, conversion: Vec<Gvk>) -> wit::Declaration {
    wit::Declaration {
        admission: admission.into_iter().map(|h| h.0).collect(),
        conversion: conversion.iter().map(|g| wit::ConversionHook { resource: g.into() }).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_is_built_as_the_contract_declares_it() {
        let hook = Webhook::mutating("default-cronjob")
            .kind_gvk(&Gvk::new("batch.tutorial.kubebuilder.io", "v1", "CronJob"))
            .operations(&[Operation::Create])
            .timeout(Duration::from_millis(4500))
            .failure_policy(FailurePolicy::Ignore)
            .match_condition("not-system", "!request.userInfo.username.startsWith('system:')");
        assert!(hook.0.mutating);
        assert_eq!(hook.0.timeout_seconds, 5);
        assert_eq!(hook.0.kinds[0].kind, "CronJob");
        assert_eq!(hook.0.match_conditions.len(), 1);
    }
}
