//! `kubewasm:controller/client`: writes to the Kubernetes API on the plugin's behalf. Parses
//! and checks the request here (size, identity, capability); the [`ApiWriter`] backend performs
//! it (field manager, rate limits, leadership and the API round trip are its business).

use wasmtime::component::HasData;

use super::super::bindings::client::{Host, PatchType};
use super::super::bindings::types::{Error as GuestError, ErrorCode, Gvk as WitGvk};
use super::super::instance::InstanceState;
use super::{HostContext, MAX_OBJECT_BYTES, error};
use crate::manifest::{Subresource, Verb};
use crate::resource::Gvk;

/// One write, checked and parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteRequest {
    pub resource: Gvk,
    pub namespace: Option<String>,
    pub name: String,
    pub op: WriteOp,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    /// Server-side apply of the object (or of its status).
    Apply { object: serde_json::Value, force: bool, status: bool },
    Create { object: serde_json::Value },
    /// Replace with optimistic concurrency on `metadata.resourceVersion`.
    Update { object: serde_json::Value, status: bool },
    Patch { patch_type: PatchKind, body: serde_json::Value },
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
}

impl WriteOp {
    pub fn verb(&self) -> Verb {
        match self {
            WriteOp::Apply { .. } | WriteOp::Patch { .. } => Verb::Patch,
            WriteOp::Create { .. } => Verb::Create,
            WriteOp::Update { .. } => Verb::Update,
            WriteOp::Delete => Verb::Delete,
        }
    }

    pub fn subresource(&self) -> Option<Subresource> {
        match self {
            WriteOp::Apply { status: true, .. } | WriteOp::Update { status: true, .. } => Some(Subresource::Status),
            _ => None,
        }
    }
}

/// The Kubernetes API as the runtime sees it: performs checked writes for one plugin.
#[async_trait::async_trait]
pub trait ApiWriter: Send + Sync {
    /// Returns the object as stored (`None` for a delete).
    async fn write(&self, request: WriteRequest) -> Result<Option<String>, GuestError>;
}

pub struct ClientCtx<'a> {
    host: &'a HostContext,
}

pub struct ClientData;

impl HasData for ClientData {
    type Data<'a> = ClientCtx<'a>;
}

pub fn context(state: &mut InstanceState) -> ClientCtx<'_> {
    ClientCtx { host: &state.host }
}

impl ClientCtx<'_> {
    async fn write(&self, request: Result<WriteRequest, GuestError>) -> wasmtime::Result<Result<String, GuestError>> {
        let request = match request {
            Ok(request) => request,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = self.host.check(request.op.verb(), &request.resource, request.op.subresource(), request.namespace.as_deref()) {
            return Ok(Err(e));
        }
        Ok(self.host.services.writer.write(request).await.map(Option::unwrap_or_default))
    }
}

/// Parses an object sent by the guest and names it.
fn object_request(json: &str, op: impl FnOnce(serde_json::Value) -> WriteOp) -> Result<WriteRequest, GuestError> {
    let object = parse_json(json, "object")?;
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(&object, |v, key| v.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let api_version = field(&["apiVersion"]).ok_or_else(|| error(ErrorCode::Invalid, "the object has no apiVersion"))?;
    let kind = field(&["kind"]).ok_or_else(|| error(ErrorCode::Invalid, "the object has no kind"))?;
    let name = field(&["metadata", "name"])
        .filter(|n| !n.is_empty())
        .ok_or_else(|| error(ErrorCode::Invalid, format!("the {kind} has no metadata.name")))?;
    Ok(WriteRequest {
        resource: Gvk::from_api_version(&api_version, &kind),
        namespace: field(&["metadata", "namespace"]),
        name,
        op: op(object),
    })
}

fn parse_json(json: &str, what: &str) -> Result<serde_json::Value, GuestError> {
    if json.len() > MAX_OBJECT_BYTES {
        return Err(error(
            ErrorCode::Invalid,
            format!("the {what} is {} bytes; the API server accepts at most {MAX_OBJECT_BYTES}", json.len()),
        ));
    }
    serde_json::from_str(json).map_err(|e| error(ErrorCode::Invalid, format!("the {what} is not valid JSON: {e}")))
}

impl Host for ClientCtx<'_> {
    async fn apply(&mut self, object: String, force: bool) -> wasmtime::Result<Result<String, GuestError>> {
        self.write(object_request(&object, |object| WriteOp::Apply { object, force, status: false })).await
    }

    async fn apply_status(&mut self, object: String, force: bool) -> wasmtime::Result<Result<String, GuestError>> {
        self.write(object_request(&object, |object| WriteOp::Apply { object, force, status: true })).await
    }

    async fn create(&mut self, object: String) -> wasmtime::Result<Result<String, GuestError>> {
        self.write(object_request(&object, |object| WriteOp::Create { object })).await
    }

    async fn update(&mut self, object: String) -> wasmtime::Result<Result<String, GuestError>> {
        self.write(object_request(&object, |object| WriteOp::Update { object, status: false })).await
    }

    async fn update_status(&mut self, object: String) -> wasmtime::Result<Result<String, GuestError>> {
        self.write(object_request(&object, |object| WriteOp::Update { object, status: true })).await
    }

    async fn patch(
        &mut self,
        resource: WitGvk,
        namespace: Option<String>,
        name: String,
        patch_type: PatchType,
        body: String,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        let patch_type = match patch_type {
            PatchType::Merge => PatchKind::Merge,
            PatchType::Json => PatchKind::Json,
            PatchType::Strategic => PatchKind::Strategic,
        };
        let request = parse_json(&body, "patch").map(|body| WriteRequest {
            resource: resource.into(),
            namespace,
            name,
            op: WriteOp::Patch { patch_type, body },
        });
        self.write(request).await
    }

    async fn delete(&mut self, resource: WitGvk, namespace: Option<String>, name: String) -> wasmtime::Result<Result<(), GuestError>> {
        let request = WriteRequest { resource: resource.into(), namespace, name, op: WriteOp::Delete };
        Ok(self.write(Ok(request)).await?.map(drop))
    }
}
