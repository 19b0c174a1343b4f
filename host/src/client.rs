//! The host's Kubernetes client for plugin writes: the kube-backed [`ApiWriter`]. Each plugin
//! gets its own writer: field manager `kubewasm/<plugin>`, a client-side rate limit (QPS and
//! burst, controller-runtime's defaults 20 and 30), and no writes at all while this host is a
//! standby. Capability checks happen before a request gets here (in the runtime). What the API
//! server answers to a write goes into the informers' caches at once (read your own writes).

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tokio::sync::Mutex;

use crate::discovery::{Discovery, DiscoveryError};
use crate::informer::Informers;
use crate::informer::raw::RawObject;
use crate::leader::Leadership;
use crate::queue::rate_limit::TokenBucket;
use crate::runtime::GuestErrorCode as Code;
use crate::runtime::bindings::types::Error as GuestError;
use crate::runtime::host::{ApiWriter, PatchKind, Scope, WriteOp, WriteRequest};

/// Client-side rate limit of one plugin's writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    pub qps: f64,
    pub burst: u32,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits { qps: 20.0, burst: 30 }
    }
}

pub struct KubeWriter {
    client: Client,
    discovery: Arc<Discovery>,
    /// Told of every object written, so the plugin reads its own writes.
    informers: Arc<Informers>,
    field_manager: String,
    bucket: Mutex<TokenBucket>,
    leadership: Leadership,
}

fn error(code: Code, message: impl Into<String>) -> GuestError {
    GuestError { code, message: message.into() }
}

impl KubeWriter {
    pub fn new(client: Client, discovery: Arc<Discovery>, informers: Arc<Informers>, plugin: &str, limits: ClientLimits, leadership: Leadership) -> Self {
        KubeWriter {
            client,
            discovery,
            informers,
            field_manager: format!("kubewasm/{plugin}"),
            bucket: Mutex::new(TokenBucket::new(limits.qps, limits.burst)),
            leadership,
        }
    }

    /// Waits for a token of the plugin's rate limit.
    async fn throttle(&self) {
        let wait = self.bucket.lock().await.reserve(tokio::time::Instant::now());
        if wait > Duration::ZERO {
            tokio::time::sleep(wait).await;
        }
    }

    async fn api(&self, request: &WriteRequest) -> Result<Api<RawObject>, GuestError> {
        let resolved = self.discovery.resolve(&request.resource).await.map_err(|e| match e {
            DiscoveryError::NotServed(_) => error(Code::Invalid, e.to_string()),
            DiscoveryError::Query { .. } => error(Code::Unavailable, e.to_string()),
        })?;
        let resource = &request.resource;
        match (resolved.scope, request.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Ok(Api::namespaced_with(self.client.clone(), ns, &resolved.api)),
            (Scope::Cluster, None) => Ok(Api::all_with(self.client.clone(), &resolved.api)),
            (Scope::Namespaced, None) => Err(error(Code::Invalid, format!("{resource} is namespaced: metadata.namespace is missing"))),
            (Scope::Cluster, Some(ns)) => Err(error(Code::Invalid, format!("{resource} is cluster-scoped, but namespace {ns:?} was given"))),
        }
    }

    /// Performs the request; `None` for a delete.
    async fn perform(&self, api: Api<RawObject>, request: WriteRequest) -> Result<Option<RawObject>, kube::Error> {
        let fm = Some(self.field_manager.clone());
        let post = PostParams { field_manager: fm.clone(), ..Default::default() };
        let name = request.name.as_str();
        let raw = |v: serde_json::Value| RawObject::from_json(v.to_string()).map_err(kube::Error::SerdeError);
        Ok(Some(match request.op {
            WriteOp::Apply { object, force, status } => {
                let mut params = PatchParams::apply(&self.field_manager);
                params.force = force;
                let patch = Patch::Apply(raw(object)?);
                if status { api.patch_status(name, &params, &patch).await? } else { api.patch(name, &params, &patch).await? }
            }
            WriteOp::Create { object } => api.create(&post, &raw(object)?).await?,
            WriteOp::Update { object, status: false } => api.replace(name, &post, &raw(object)?).await?,
            WriteOp::Update { object, status: true } => api.replace_status(name, &post, &raw(object)?).await?,
            WriteOp::Patch { patch_type, body } => {
                let params = PatchParams { field_manager: fm, ..Default::default() };
                match patch_type {
                    PatchKind::Merge => api.patch(name, &params, &Patch::Merge(body)).await?,
                    PatchKind::Strategic => api.patch(name, &params, &Patch::Strategic(body)).await?,
                    PatchKind::Json => {
                        let patch: json_patch::Patch = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
                        api.patch(name, &params, &Patch::<()>::Json(patch)).await?
                    }
                }
            }
            WriteOp::Delete => {
                api.delete(name, &DeleteParams::background()).await?;
                return Ok(None);
            }
        }))
    }
}

#[async_trait::async_trait]
impl ApiWriter for KubeWriter {
    async fn write(&self, request: WriteRequest) -> Result<Option<String>, GuestError> {
        if !self.leadership.is_leader() {
            return Err(error(Code::Unavailable, "this host is a standby (not the leader) and does not write"));
        }
        self.throttle().await;
        let api = self.api(&request).await?;
        let resource = request.resource.clone();
        let Some(stored) = self.perform(api, request).await.map_err(guest_error)? else { return Ok(None) };
        let json = stored.json().to_string();
        self.informers.observe_write(&resource, stored);
        Ok(Some(json))
    }
}

/// Maps an API failure to the WIT error codes.
pub fn guest_error(e: kube::Error) -> GuestError {
    match e {
        kube::Error::Api(status) => {
            let code = match status.code {
                404 => Code::NotFound,
                409 if status.reason == "AlreadyExists" => Code::AlreadyExists,
                409 => Code::Conflict,
                401 | 403 => Code::Forbidden,
                400 | 422 | 405 | 413 | 415 => Code::Invalid,
                429 | 500..=599 => Code::Unavailable,
                _ => Code::Other,
            };
            error(code, status.message)
        }
        kube::Error::SerdeError(e) => error(Code::Invalid, e.to_string()),
        e @ (kube::Error::HyperError(_) | kube::Error::Service(_)) => error(Code::Unavailable, e.to_string()),
        e => error(Code::Other, e.to_string()),
    }
}
