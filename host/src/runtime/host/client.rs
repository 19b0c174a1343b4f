//! `kubewasm:controller/client`: writes to the Kubernetes API on the plugin's behalf. Reads the
//! request in place and checks it here (sizes before anything is copied, then identity,
//! capability, and that an apply which would create has `create`); the [`Api`] backend performs it (field manager, rate limit, leadership, the
//! namespaces served, the host's own objects, and the API round trip as the plugin are its
//! business), and its errors become WIT error codes here.

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, WasmStr};

use super::super::bindings::client::{Host, PatchType};
use super::super::bindings::types::{Error as GuestError, ErrorCode, Gvk as WitGvk};
use super::super::bindings::{PACKAGE, PACKAGE_VERSION};
use super::super::boundary::{MAX_OBJECT, MAX_PATCH};
use super::args::{LazyGvk, Read, name, namespace, owned, settle};
use super::{HostContext, HostState, Services, error};
use crate::client::{ApiClient, PatchKind, RequestError, WriteOp, WriteRequest};
use crate::manifest::{Manifest, Verb};
use crate::resource::{Gvk, ObjectKey};

/// The Kubernetes API as the runtime sees it: performs checked writes for one plugin, and reads
/// objects it may `get` but that are not cached.
#[async_trait::async_trait]
pub trait Api: Send + Sync {
    /// Returns the object as stored (`None` when a delete removed it).
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError>;
    /// One object from the API server; `None` if it does not exist.
    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError>;
}

#[async_trait::async_trait]
impl Api for ApiClient {
    async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        ApiClient::write(self, request).await
    }

    async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        ApiClient::get(self, resource, namespace, name).await
    }
}

/// What a failed request means to a plugin.
pub fn guest_error(e: RequestError) -> GuestError {
    let code = match &e {
        RequestError::Standby | RequestError::LostLeadership | RequestError::Timeout(_) => ErrorCode::Unavailable,
        RequestError::NamespaceNotServed(_) | RequestError::HostObject(_) => ErrorCode::Forbidden,
        RequestError::Resolve(resolve) if resolve.is_transient() => ErrorCode::Unavailable,
        RequestError::Resolve(_) | RequestError::NamespaceMissing(_) | RequestError::NamespaceGiven { .. } | RequestError::Body(_) => ErrorCode::Invalid,
        RequestError::Api(kube::Error::Api(status)) => match status.code {
            404 => ErrorCode::NotFound,
            409 if status.reason == "AlreadyExists" => ErrorCode::AlreadyExists,
            409 => ErrorCode::Conflict,
            401 | 403 => ErrorCode::Forbidden,
            400 | 422 | 405 | 413 | 415 => ErrorCode::Invalid,
            429 | 500..=599 => ErrorCode::Unavailable,
            _ => ErrorCode::Other,
        },
        RequestError::Api(kube::Error::SerdeError(_)) => ErrorCode::Invalid,
        RequestError::Api(kube::Error::HyperError(_) | kube::Error::Service(_)) => ErrorCode::Unavailable,
        RequestError::Api(_) => ErrorCode::Other,
    };
    // One line: an API server's message may span several.
    error(code, e.to_string().replace('\n', " "))
}

pub struct ClientCtx<'a> {
    host: &'a HostContext,
    services: &'a Services,
}

impl<'a> ClientCtx<'a> {
    /// Writes as `host` may, through `services`.
    pub(crate) fn new(host: &'a HostContext, services: &'a Services) -> Self {
        ClientCtx { host, services }
    }
}

pub fn context<T: HostState>(state: &mut T) -> ClientCtx<'_> {
    ClientCtx { host: state.host(), services: state.services() }
}

/// Registers a client function taking an object (and then `$arg`s, lifted as they are), its
/// object read in place.
macro_rules! with_object {
    ($client:ident, $name:literal, $method:ident $(, $arg:ident: $ty:ty)*) => {
        $client.func_wrap_async($name, |mut store: StoreContextMut<'_, T>, (json, $($arg,)*): (WasmStr, $($ty,)*)| {
            Box::new(async move {
                match settle(owned(&store, &json, "object", MAX_OBJECT))? {
                    Ok(json) => Ok((Host::$method(&mut context(store.data_mut()), json $(, $arg)*).await?,)),
                    Err(refused) => Ok((Err(refused),)),
                }
            })
        })?;
    };
}

/// Registers the client's functions with their arguments read in place (`super::args`).
pub fn add_to_linker<T: HostState>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut client = linker.instance(&format!("{PACKAGE}/client@{PACKAGE_VERSION}"))?;
    with_object!(client, "apply", apply, force: bool);
    with_object!(client, "apply-status", apply_status, force: bool);
    with_object!(client, "create", create);
    with_object!(client, "update", update);
    with_object!(client, "update-status", update_status);
    client.func_wrap_async(
        "patch",
        |mut store: StoreContextMut<'_, T>, (resource, ns, object, patch_type, body): (LazyGvk, Option<WasmStr>, WasmStr, PatchType, WasmStr)| {
            Box::new(async move {
                let read = (|| -> Read<_> {
                    Ok((resource.read(&store)?, namespace(&store, &ns)?, name(&store, &object)?, owned(&store, &body, "patch body", MAX_PATCH)?))
                })();
                match settle(read)? {
                    Ok((resource, namespace, name, body)) => {
                        Ok((Host::patch(&mut context(store.data_mut()), resource, namespace, name, patch_type, body).await?,))
                    }
                    Err(refused) => Ok((Err(refused),)),
                }
            })
        },
    )?;
    client.func_wrap_async("delete", |mut store: StoreContextMut<'_, T>, (resource, ns, object): (LazyGvk, Option<WasmStr>, WasmStr)| {
        Box::new(async move {
            let read = (|| -> Read<_> { Ok((resource.read(&store)?, namespace(&store, &ns)?, name(&store, &object)?)) })();
            match settle(read)? {
                Ok((resource, namespace, name)) => Ok((Host::delete(&mut context(store.data_mut()), resource, namespace, name).await?,)),
                Err(refused) => Ok((Err(refused),)),
            }
        })
    })?;
    Ok(())
}

impl ClientCtx<'_> {
    async fn write(&self, request: Result<WriteRequest, GuestError>) -> wasmtime::Result<Result<String, GuestError>> {
        let request = match request {
            Ok(request) => request,
            Err(e) => return Ok(Err(e)),
        };
        let (resource, namespace, name) = (&request.resource, request.namespace.as_deref(), Some(request.name.as_str()));
        if let Err(e) = self.host.cache_only(&format!("{} {resource}", request.op.verb())) {
            return Ok(Err(e));
        }
        let manifest = match self.host.check(request.op.verb(), resource, request.op.subresource(), namespace, name) {
            Ok(manifest) => manifest,
            Err(e) => return Ok(Err(e)),
        };
        if matches!(request.op, WriteOp::Apply { status: false, .. })
            && !manifest.allows(Verb::Create, resource, None, namespace, name)
            && let Err(e) = self.apply_creates(&request).await
        {
            return Ok(Err(e));
        }
        if let Some(refused) = wipes(manifest, &request) {
            return Ok(Err(error(ErrorCode::Invalid, refused)));
        }
        let resource = request.resource.clone();
        let stored = self.services.api.write(request).await.map_err(guest_error);
        Ok(stored.map(|stored| stored.map(|json| self.host.as_answered(&resource, &json)).unwrap_or_default()))
    }

    /// Refuses an apply that would create the object when the plugin may not `create`. The
    /// cache answers when it holds the object; otherwise the API server does (as the plugin,
    /// under its rate limit). If the plugin's identity may not even read it, nothing tells that
    /// the apply would not create it: refused too, so that the manifest is checked as well as
    /// RBAC.
    async fn apply_creates(&self, request: &WriteRequest) -> Result<(), GuestError> {
        let key = ObjectKey::new(request.namespace.as_deref(), &request.name);
        let services = self.services;
        if services.cache.get(&request.resource, &key).is_some() {
            return Ok(());
        }
        let unknown = match services.api.get(&request.resource, request.namespace.as_deref(), &request.name).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => "",
            Err(e) if e.status() == Some(403) => ", unless it exists, which the plugin's identity may not read",
            Err(e) => return Err(guest_error(e)),
        };
        Err(self.host.refuse(format!(
            "apply of {} {key} would create it{unknown}, and create {} is not granted by the plugin's manifest",
            request.resource, request.resource
        )))
    }
}

/// Why `request` would wipe what the plugin never saw, if it would: an update replaces the
/// whole object (or its status), and the plugin is handed the kind's objects metadata-only or
/// projected — written back, they lose everything it was not handed.
fn wipes(manifest: &Manifest, request: &WriteRequest) -> Option<String> {
    let resource = &request.resource;
    let fields = manifest.reads(resource)?;
    let what = match request.op {
        WriteOp::Update { status: false, .. } => "the whole",
        WriteOp::Update { status: true, .. } if !fields.keeps_whole("status") => "the status of",
        _ => return None,
    };
    let handed = if fields.is_metadata_only() { "metadata-only (`views.metadata-only`)" } else { "projected (`projections`)" };
    Some(format!("update replaces {what} {resource}, and the plugin is handed {handed} {resource} objects: write it with apply or patch"))
}

/// Parses an object sent by the guest and names it.
fn object_request(json: &str, op: impl FnOnce(serde_json::Value) -> WriteOp) -> Result<WriteRequest, GuestError> {
    let object = parse_json(json, "object")?;
    let field = |path: &[&str]| path.iter().try_fold(&object, |v, key| v.get(key)).and_then(serde_json::Value::as_str).map(str::to_owned);
    let api_version = field(&["apiVersion"]).ok_or_else(|| error(ErrorCode::Invalid, "the object has no apiVersion"))?;
    let kind = field(&["kind"]).ok_or_else(|| error(ErrorCode::Invalid, "the object has no kind"))?;
    let name = field(&["metadata", "name"]).filter(|n| !n.is_empty()).ok_or_else(|| error(ErrorCode::Invalid, format!("the {kind} has no metadata.name")))?;
    Ok(WriteRequest { resource: Gvk::from_api_version(&api_version, &kind), namespace: field(&["metadata", "namespace"]), name, op: op(object) })
}

/// JSON text a guest sent, already within its bound (see `add_to_linker`).
fn parse_json(json: &str, what: &str) -> Result<serde_json::Value, GuestError> {
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
        self.write(object_request(&object, |object| WriteOp::Create { object, applied: false })).await
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
        let request =
            parse_json(&body, "patch").map(|body| WriteRequest { resource: resource.into(), namespace, name, op: WriteOp::Patch { patch_type, body } });
        self.write(request).await
    }

    async fn delete(&mut self, resource: WitGvk, namespace: Option<String>, name: String) -> wasmtime::Result<Result<(), GuestError>> {
        let request = WriteRequest { resource: resource.into(), namespace, name, op: WriteOp::Delete { uid: None } };
        Ok(self.write(Ok(request)).await?.map(drop))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::manifest::Projection;
    use crate::projection::Fields;

    fn update(resource: &Gvk, status: bool) -> WriteRequest {
        WriteRequest {
            resource: resource.clone(),
            namespace: Some("ns".into()),
            name: "x".into(),
            op: WriteOp::Update { object: serde_json::json!({}), status },
        }
    }

    /// An update of a kind handed metadata-only would write back an object without its data
    /// (or status): refused like one of a projected kind; applies, patches and kinds handed
    /// whole are left to the API server.
    #[test]
    fn an_update_of_what_the_plugin_was_not_handed_whole_is_refused() {
        let deployment = Gvk::new("apps", "v1", "Deployment");
        let mut manifest = crate::manifest::tests::sample();
        assert_eq!(wipes(&manifest, &update(&deployment, false)), None, "handed whole");
        manifest.metadata_only.push(deployment.clone());
        let refused = wipes(&manifest, &update(&deployment, false)).expect("a metadata-only update is refused");
        assert!(refused.contains("replaces the whole Deployment") && refused.contains("metadata-only (`views.metadata-only`)"), "{refused}");
        assert!(wipes(&manifest, &update(&deployment, true)).is_some_and(|r| r.contains("the status of")), "and so is its update-status");
        let apply = WriteRequest { op: WriteOp::Apply { object: serde_json::json!({}), force: false, status: false }, ..update(&deployment, false) };
        assert_eq!(wipes(&manifest, &apply), None);
        manifest.metadata_only.clear();
        manifest.projections.push(Projection { resource: deployment.clone(), fields: Arc::new(Fields::new([vec!["status"]])) });
        assert!(wipes(&manifest, &update(&deployment, false)).is_some_and(|r| r.contains("projected (`projections`)")));
        assert_eq!(wipes(&manifest, &update(&deployment, true)), None, "the status is handed whole");
    }
}
