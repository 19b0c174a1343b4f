//! A declarative plugin's reconcile, made by the host from the plugin's answers (the WIT's
//! `composite` interface: Metacontroller's CompositeController, in process). For one parent:
//! claim its children ([`claim`]), ask `customize` for the related objects it needs
//! ([`related`]), ask `sync` (or `finalize`) what should be, check the answer and plan the writes
//! ([`desired`]), make them, and write the parent's status.
//!
//! Every read goes through the call's cache and every write through its API — the plugin's
//! identity, rate limit and fences, or the journal or shadow replay a caller hands in — so shadow
//! runs, recordings, table tests and rollback see a declarative plugin the way they see any
//! other: by what its reconcile read and wrote.

mod claim;
mod desired;
mod related;

use std::time::Duration;

use serde_json::{Value, json};

use self::claim::Observed;
use self::desired::Plan;
pub(super) use self::desired::check_desired;
pub(super) use self::related::{Related, check_related};
use std::sync::Arc;

use super::bindings::composite_exports::{RelatedRule, SyncRequest, SyncResponse};
use super::bindings::types::{Error as GuestError, ErrorCode};
use super::call::{Action, CallError, Request};
use super::host::cache::list_bound;
use super::host::client::guest_error;
use super::host::{HostContext, Services};
use crate::client::{RequestError, WriteOp, WriteRequest};
use crate::manifest::{ChildRule, ChildSelector, Manifest};
use crate::resource::{Gvk, ObjectKey};
use crate::selector::LabelSelector;

/// What the declarative reconcile needs of the plugin's runner: its manifest (with its
/// composition), the context its cache reads are checked in, its memory limit, what its parents
/// asked `customize` for, and the guest's `customize` and `sync` (`finalize` when the request
/// says so), run with `services` — `Err` when the host stopped the call.
pub(super) trait Plugin {
    fn manifest(&self) -> &Manifest;
    fn reading_host(&self) -> &HostContext;
    fn memory_bytes(&self) -> u64;
    fn related(&self) -> &Related;
    async fn customize(&self, key: &ObjectKey, parent: Arc<str>, services: &Services) -> Result<Result<Vec<RelatedRule>, GuestError>, CallError>;
    async fn sync(&self, key: &ObjectKey, request: SyncRequest, services: &Services) -> Result<Result<SyncResponse, GuestError>, CallError>;
}

/// How long a parent whose `finalize` did not finish waits for its next call, without an event
/// or a `resync-after`.
const FINALIZE_AGAIN: Duration = Duration::from_secs(5);

/// Why a declarative reconcile failed, by the step that failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum CompositeError {
    /// The parent, as cached, cannot be a parent (no uid, not JSON).
    #[error("the parent: {0}")]
    Parent(String),
    #[error("the parent's child selector: {0}")]
    Selector(String),
    /// Adopting or releasing children failed.
    #[error("claiming children: {}", list(.0))]
    Claim(Vec<Failed>),
    /// The children and related objects are more than the plugin may be handed at once.
    #[error(
        "the parent's children and related objects come to more than {0} bytes, what the plugin may receive at once (a quarter of its memory limit): narrow its customize rules, or raise its memory limit"
    )]
    TooMuch(usize),
    /// The answer is not one the host can act on; nothing was written.
    #[error("{0}")]
    Invalid(String),
    /// Writing children failed (the rest were written).
    #[error("managing children: {}", list(.0))]
    Manage(Vec<Failed>),
    #[error("writing the parent's status: {}", .0.message)]
    Status(Failed),
}

/// One write that failed (or was not made), on what, and what it means to the plugin.
#[derive(Debug)]
pub(super) struct Failed {
    what: String,
    code: ErrorCode,
    message: String,
}

impl Failed {
    fn new(what: String, error: RequestError) -> Self {
        let error = guest_error(error);
        Failed { what, code: error.code, message: error.message }
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.message)
    }
}

fn list(failed: &[Failed]) -> String {
    failed.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

impl CompositeError {
    /// The error code the controller acts on: an outage is the infrastructure's (unavailable),
    /// a conflict another actor's (retried quietly), anything else as the first failure says.
    fn code(&self) -> ErrorCode {
        let of = |failed: &[Failed]| {
            let codes: Vec<ErrorCode> = failed.iter().map(|f| f.code).collect();
            if codes.contains(&ErrorCode::Unavailable) {
                ErrorCode::Unavailable
            } else if codes.iter().all(|c| *c == ErrorCode::Conflict) {
                ErrorCode::Conflict
            } else {
                codes.into_iter().find(|c| *c != ErrorCode::Conflict).unwrap_or(ErrorCode::Other)
            }
        };
        match self {
            CompositeError::Parent(_) | CompositeError::Selector(_) | CompositeError::TooMuch(_) | CompositeError::Invalid(_) => ErrorCode::Invalid,
            CompositeError::Claim(failed) | CompositeError::Manage(failed) => of(failed),
            CompositeError::Status(failed) => failed.code,
        }
    }
}

impl From<CompositeError> for CallError {
    fn from(e: CompositeError) -> Self {
        CallError::Plugin { code: e.code(), message: e.to_string() }
    }
}

/// The parent as the host acts on it.
pub(super) struct Parent {
    pub(super) object: Value,
    pub(super) resource: Gvk,
    pub(super) key: ObjectKey,
    pub(super) uid: String,
    pub(super) deleting: bool,
}

impl Parent {
    fn parse(json: &str, resource: &Gvk, key: &ObjectKey) -> Result<Self, CompositeError> {
        let object: Value = serde_json::from_str(json).map_err(|e| CompositeError::Parent(e.to_string()))?;
        let meta = &object["metadata"];
        let uid = meta["uid"].as_str().filter(|u| !u.is_empty()).ok_or_else(|| CompositeError::Parent("it has no metadata.uid".into()))?.to_string();
        let deleting = meta.get("deletionTimestamp").is_some_and(|t| !t.is_null());
        Ok(Parent { uid, deleting, resource: resource.clone(), key: key.clone(), object })
    }

    /// The namespace its children are looked for in: its own, or all for a cluster-scoped one.
    fn namespace(&self) -> Option<&str> {
        self.key.namespace()
    }

    /// An owner reference to it that makes it its children's controller.
    pub(super) fn controller_reference(&self) -> Value {
        json!({
            "apiVersion": self.resource.api_version(),
            "kind": self.resource.kind,
            "name": self.key.name(),
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }
}

/// What a declarative plugin answered for a parent, as the host received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: Option<Value>,
    pub children: Vec<Value>,
    /// Milliseconds.
    pub resync_after: Option<u64>,
    pub finalized: bool,
}

/// A parent, its claimed children, and what the plugin answered for it.
struct Asked {
    parent: Parent,
    kinds: Vec<ChildRule>,
    selector: LabelSelector,
    selector_kind: ChildSelector,
    observed: Observed,
    answer: SyncResponse,
}

/// Claims the parent's children, reads its related objects and asks `sync` (or `finalize`).
async fn ask(plugin: &impl Plugin, parent: Parent, request: &Request, services: &Services, finalizing: bool) -> Result<Asked, CallError> {
    let manifest = plugin.manifest();
    let composition = manifest.composition.as_ref().expect("a declarative plugin's manifest has its composition");
    let selector = claim::selector(composition.selector, &parent)?;
    let kinds = composition.child_kinds(&manifest.owns);
    let observed = claim::claim(services, &kinds, &parent, &selector, composition.selector).await.map_err(CompositeError::Claim)?;
    let bound = list_bound(plugin.memory_bytes());
    let mut budget = bound.checked_sub(observed.bytes()).ok_or(CompositeError::TooMuch(bound))?;
    let related = plugin.related().objects(plugin, services, &parent, &request.object, &mut budget).await?;
    let sync = SyncRequest { parent: request.object.to_string(), children: observed.handed(), related, finalizing };
    let answer = plugin.sync(&request.key, sync, services).await?.map_err(|e| CallError::Plugin { code: e.code, message: e.message })?;
    Ok(Asked { parent, kinds, selector, selector_kind: composition.selector, observed, answer })
}

/// The parent of a request, as the host acts on it.
fn parent_of(plugin: &impl Plugin, request: &Request) -> Result<Parent, CallError> {
    Ok(Parent::parse(&request.object, &plugin.manifest().primary, &request.key)?)
}

/// What the plugin answers for the parent (`kubewasm test`), without managing anything.
pub(super) async fn answer(plugin: &impl Plugin, request: &Request, services: &Services, finalizing: bool) -> Result<Answer, CallError> {
    let answer = ask(plugin, parent_of(plugin, request)?, request, services, finalizing).await?.answer;
    let parse = |text: &str| serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()));
    Ok(Answer {
        status: answer.status.as_deref().map(parse),
        children: answer.children.iter().map(|c| parse(c)).collect(),
        resync_after: answer.resync_after,
        finalized: answer.finalized,
    })
}

/// Reconciles (or, `finalizing`, finalizes) a declarative plugin's parent.
pub(super) async fn reconcile(plugin: &impl Plugin, request: Request, services: &Services, finalizing: bool) -> Result<Action, CallError> {
    let parent = parent_of(plugin, &request)?;
    // Being deleted without a finalizer of ours (only `kubewasm test` calls for one): the
    // garbage collector takes the children; nothing is asked or managed.
    if parent.deleting && !finalizing {
        return Ok(Action::Done);
    }
    let Asked { parent, kinds, selector, selector_kind, observed, answer } = ask(plugin, parent, &request, services, finalizing).await?;
    let scope = |resource: &Gvk| services.cache.scope(resource);
    let plan = desired::plan(&kinds, &parent, &selector, selector_kind, &observed, answer.children, scope)?;
    // A finalized parent is about to go: its status is not worth a write (which would also make
    // the finalizer's removal, on the version read before it, conflict).
    let status = if finalizing && answer.finalized { None } else { desired::status(&parent, answer.status)? };
    let managed = manage(services, &plan).await;
    let status = match status {
        Some(status) => write_status(services, &parent, status).await,
        None => Ok(()),
    };
    match (managed, status) {
        (Err(mut failed), Err(status)) => {
            failed.push(status);
            return Err(CompositeError::Manage(failed).into());
        }
        (Err(failed), Ok(())) => return Err(CompositeError::Manage(failed).into()),
        (Ok(()), Err(status)) => return Err(CompositeError::Status(status).into()),
        (Ok(()), Ok(())) => {}
    }
    let again = answer.resync_after.map(Duration::from_millis);
    Ok(match (finalizing, answer.finalized, again) {
        (true, true, _) => Action::Done,
        (true, false, again) => Action::RequeueAfter(again.unwrap_or(FINALIZE_AGAIN)),
        (false, _, Some(again)) => Action::RequeueAfter(again),
        (false, _, None) => Action::Done,
    })
}

/// Makes the plan's writes: deletes of children to recreate, then applies, then — only if every
/// apply succeeded — prunes. Every write is tried; the failures are returned.
async fn manage(services: &Services, plan: &Plan<'_>) -> Result<(), Vec<Failed>> {
    let mut failed = Vec::new();
    for child in &plan.recreate {
        if let Err(f) = delete(services, child).await {
            failed.push(f);
        }
    }
    let mut applied = true;
    for desired in &plan.apply {
        let object = desired.object.clone();
        // A new child is created: whatever object has its name already (another's, or one this
        // host's cache has not seen, as in a shard's) is left alone, never applied over.
        let (op, doing) = if desired.new {
            (WriteOp::Create { object, applied: true }, "creating")
        } else {
            (WriteOp::Apply { object, force: true, status: false }, "applying")
        };
        let request =
            WriteRequest { resource: desired.resource.clone(), namespace: desired.key.namespace().map(Into::into), name: desired.key.name().into(), op };
        let what = format!("{doing} {} {}", desired.resource.kind, desired.key);
        match services.api.write(request).await {
            Ok(_) => {}
            Err(error) if desired.new && error.reason() == Some("AlreadyExists") => {
                applied = false;
                let message = format!(
                    "{} {} exists and is not a child of this parent (no controller owner reference to it, or not matching its selector): it is left alone",
                    desired.resource.kind, desired.key
                );
                failed.push(Failed { what, code: ErrorCode::AlreadyExists, message });
            }
            Err(error) => {
                applied = false;
                failed.push(Failed::new(what, error));
            }
        }
    }
    if applied {
        for child in &plan.prune {
            if let Err(f) = delete(services, child).await {
                failed.push(f);
            }
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(failed) }
}

/// Deletes a child on the condition that it is still the one observed. One already gone, or
/// replaced by another of the same name (the precondition fails), counts as deleted.
async fn delete(services: &Services, child: &claim::Child) -> Result<(), Failed> {
    let request = WriteRequest {
        resource: child.resource.clone(),
        namespace: child.key.namespace().map(Into::into),
        name: child.key.name().into(),
        op: WriteOp::Delete { uid: Some(child.uid.clone()) },
    };
    match services.api.write(request).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.status(), Some(404 | 409)) => Ok(()),
        Err(error) => Err(Failed::new(format!("deleting {} {}", child.resource.kind, child.key), error)),
    }
}

/// Replaces the parent's status with `status`, unless it has it already. A conflict is another
/// actor's newer parent, whose change brings the parent back; a parent gone is done.
async fn write_status(services: &Services, parent: &Parent, status: Value) -> Result<(), Failed> {
    if parent.object.get("status") == Some(&status) {
        return Ok(());
    }
    let mut object = parent.object.clone();
    object["status"] = status;
    let request = WriteRequest {
        resource: parent.resource.clone(),
        namespace: parent.key.namespace().map(Into::into),
        name: parent.key.name().into(),
        op: WriteOp::Update { object, status: true },
    };
    match services.api.write(request).await {
        Ok(_) => Ok(()),
        Err(e) if e.status() == Some(409) => Ok(()),
        // The parent itself is gone (the API names it); a kind without a status subresource
        // answers 404 too, which is an error to report.
        Err(e) if e.status() == Some(404) && e.to_string().contains(&format!("\"{}\"", parent.key.name())) => Ok(()),
        Err(e) => Err(Failed::new("writing the status".into(), e)),
    }
}

impl Observed {
    /// What handing them to the plugin costs: their text.
    fn bytes(&self) -> usize {
        self.kinds.iter().flat_map(|(_, children)| children).map(|c| c.json.len()).sum()
    }
}

/// Shared by the tests of the submodules: a parent in `ns` (or cluster-scoped).
#[cfg(test)]
pub(super) fn test_parent(namespace: Option<&str>, extra: Value) -> Parent {
    let mut object = json!({
        "apiVersion": "example.com/v1", "kind": "Parent",
        "metadata": {"name": "p", "uid": "parent-uid", "generation": 3, "resourceVersion": "7"},
    });
    if let Some(ns) = namespace {
        object["metadata"]["namespace"] = json!(ns);
    }
    if let (Value::Object(object), Value::Object(extra)) = (&mut object, extra) {
        object.extend(extra);
    }
    Parent::parse(&object.to_string(), &Gvk::new("example.com", "v1", "Parent"), &ObjectKey::new(namespace, "p")).unwrap()
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;
    use crate::manifest::UpdateStrategy;
    use crate::resource::Scope;
    use crate::runtime::host::Api;

    /// An API server holding a ConfigMap `victim` that no cache has shown yet (another's, in a
    /// shard's cache, or created a moment ago): it refuses a create of it as the real one does,
    /// takes every other write, and records them all.
    #[derive(Default)]
    struct Holding(Mutex<Vec<WriteRequest>>);

    #[async_trait::async_trait]
    impl Api for Holding {
        async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
            let refused = request.name == "victim" && matches!(request.op, WriteOp::Create { .. });
            self.0.lock().push(request);
            if refused {
                let status = kube::core::Status::failure("configmaps \"victim\" already exists", "AlreadyExists").with_code(409);
                return Err(RequestError::Api(kube::Error::Api(status.boxed())));
            }
            Ok(None)
        }

        async fn get(&self, _: &Gvk, _: Option<&str>, _: &str) -> Result<Option<String>, RequestError> {
            Ok(None)
        }
    }

    /// L4 (and H5 in a shard, whose cache shows only its own objects): a desired child named
    /// like an object the cache does not hold is created, not applied, so the API server
    /// refuses it and nothing is taken over; what the plugin said of its identity and version is
    /// not sent.
    #[tokio::test]
    async fn a_new_child_never_takes_over_an_object_the_cache_did_not_show() {
        let parent = test_parent(Some("ns"), json!({}));
        let rules = vec![ChildRule { resource: Gvk::new("", "v1", "ConfigMap"), update: UpdateStrategy::InPlace }];
        let selector = claim::selector(ChildSelector::Generated, &parent).unwrap();
        let none = Observed { kinds: vec![(rules[0].clone(), vec![])] };
        let child = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "uid": "forged", "resourceVersion": "1", "managedFields": []}, "data": {"mine": "yes"}})
                .to_string()
        };
        let namespaced = |_: &Gvk| Some(Scope::Namespaced);
        let plan = desired::plan(&rules, &parent, &selector, ChildSelector::Generated, &none, vec![child("victim"), child("fresh")], namespaced).unwrap();
        let api = Arc::new(Holding::default());
        let services = Services { api: api.clone(), ..Services::unreachable() };

        let failed = manage(&services, &plan).await.expect_err("the victim is refused");
        let [refused] = failed.as_slice() else { panic!("one failure: {failed:?}") };
        assert_eq!(refused.code, ErrorCode::AlreadyExists);
        assert!(refused.to_string().contains("creating ConfigMap ns/victim: ConfigMap ns/victim exists and is not a child of this parent"), "{refused}");
        let writes = api.0.lock();
        assert_eq!(writes.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["victim", "fresh"]);
        for write in writes.iter() {
            let WriteOp::Create { object, applied: true } = &write.op else { panic!("a new child is created, owned as applied: {write:?}") };
            let metadata = &object["metadata"];
            assert!(metadata.get("uid").is_none() && metadata.get("resourceVersion").is_none() && metadata.get("managedFields").is_none(), "{metadata}");
        }
    }
}
