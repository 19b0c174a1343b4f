//! Requests to the Kubernetes API: the host's connection ([`connect`]), a client acting as a
//! plugin's own identity ([`acting_as`]), and [`ApiClient`] — one identity's reads and writes
//! with everything the host promises around them: the field manager, a client-side rate limit
//! on every request (writes and reads alike, under a ceiling the host sets), a timeout on every
//! request, the leadership fence, the namespaces the host serves, the host's own objects kept
//! out of reach, and read-your-own-writes into the informers' caches.
//!
//! Kubernetes-shaped: requests and errors speak kinds, names and API statuses. Plugins' calls
//! reach it through `runtime::host`, which checks them against the manifest first and turns
//! [`RequestError`] into the WIT error codes.

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::client::{Body, ClientBuilder, DynBody};
use parking_lot::Mutex;

use crate::bucket::TokenBucket;
use crate::discovery::{Discovery, DiscoveryError};
use crate::informer::Informers;
use crate::informer::raw::RawObject;
use crate::leader::Leadership;
use crate::resource::{Gvk, ObjectKey, Scope};

/// How long any single request of the host may take unless told otherwise (`--request-timeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot find a cluster to connect to (no --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster config): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("cannot set up the connection: {0}")]
    Client(#[source] kube::Error),
}

/// The host's own connection, from a kubeconfig file or the environment. Every request carries
/// `User-Agent: kubewasm/<version> (<instance>)`, so the API server's audit log tells two hosts
/// apart.
pub async fn connect(kubeconfig: Option<&Path>, instance: &str) -> Result<kube::Client, ConnectError> {
    let config = match kubeconfig {
        Some(path) => {
            let fail = |source| ConnectError::Kubeconfig { path: path.display().to_string(), source };
            let file = kube::config::Kubeconfig::read_from(path).map_err(fail)?;
            kube::Config::from_custom_kubeconfig(file, &Default::default()).await.map_err(fail)?
        }
        None => kube::Config::infer().await.map_err(ConnectError::Infer)?,
    };
    Ok(with_agent(kube::Client::try_from(config).map_err(ConnectError::Client)?, instance))
}

/// kube's client stack as it builds it from a `Config` (its `GenericService`, unexported).
pub type KubeStack = tower::util::BoxService<http::Request<Body>, http::Response<Box<DynBody>>, tower::BoxError>;

/// A connection from a kubeconfig already read (`from`: where it came from, for errors): a
/// member cluster's, made by `build` from kube's client stack (which wraps it in what bounds
/// the member's answers).
pub async fn connect_to(
    file: kube::config::Kubeconfig,
    from: &str,
    instance: &str,
    build: impl FnOnce(ClientBuilder<KubeStack>) -> kube::Client,
) -> Result<kube::Client, ConnectError> {
    let config =
        kube::Config::from_custom_kubeconfig(file, &Default::default()).await.map_err(|source| ConnectError::Kubeconfig { path: from.to_string(), source })?;
    Ok(with_agent(build(ClientBuilder::try_from(config).map_err(ConnectError::Client)?), instance))
}

fn with_agent(client: kube::Client, instance: &str) -> kube::Client {
    let namespace = client.default_namespace().to_string();
    let agent = format!("kubewasm/{} ({instance})", env!("CARGO_PKG_VERSION"));
    let agent = HeaderValue::from_str(&agent).unwrap_or(HeaderValue::from_static("kubewasm"));
    kube::Client::new(Via { client, headers: Arc::new(vec![(http::header::USER_AGENT, agent)]) }, namespace)
}

/// A client that acts as `user` (Kubernetes impersonation: `Impersonate-User`) over the same
/// connections as `host`. For a ServiceAccount user name (`system:serviceaccount:NS:NAME`) the
/// API server adds the ServiceAccount's groups itself. The host's identity needs `impersonate`
/// on that ServiceAccount, and nothing more: everything the client does is authorized as `user`.
pub fn acting_as(host: &kube::Client, user: &str) -> Result<kube::Client, http::header::InvalidHeaderValue> {
    let header = (HeaderName::from_static("impersonate-user"), HeaderValue::from_str(user)?);
    Ok(kube::Client::new(Via { client: host.clone(), headers: Arc::new(vec![header]) }, host.default_namespace()))
}

/// Sends through another client, adding headers: a client with another identity or agent that
/// shares the host's connection pool (one TLS connection set for all plugins).
#[derive(Clone)]
struct Via {
    client: kube::Client,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl tower::Service<http::Request<Body>> for Via {
    type Response = http::Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<http::Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        for (name, value) in self.headers.iter() {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let client = self.client.clone();
        Box::pin(async move { client.send(request).await })
    }
}

/// One write, parsed.
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
    Apply {
        object: serde_json::Value,
        force: bool,
        status: bool,
    },
    /// Refused (409 `AlreadyExists`) when an object of the name exists. `applied`: the fields
    /// created are then owned by the field manager's server-side apply, as if it had applied
    /// them, so that a later apply leaving one out removes it (owned by an update, it would
    /// stay).
    Create {
        object: serde_json::Value,
        applied: bool,
    },
    /// Replace with optimistic concurrency on `metadata.resourceVersion`.
    Update {
        object: serde_json::Value,
        status: bool,
    },
    Patch {
        patch_type: PatchKind,
        body: serde_json::Value,
    },
    /// Background propagation; with `uid`, only if the object is still that one (a precondition).
    Delete {
        uid: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
}

impl WriteOp {
    /// The verb the write needs.
    pub fn verb(&self) -> crate::manifest::Verb {
        use crate::manifest::Verb;
        match self {
            WriteOp::Apply { .. } | WriteOp::Patch { .. } => Verb::Patch,
            WriteOp::Create { .. } => Verb::Create,
            WriteOp::Update { .. } => Verb::Update,
            WriteOp::Delete { .. } => Verb::Delete,
        }
    }

    /// The subresource written, if any.
    pub fn subresource(&self) -> Option<&'static str> {
        match self {
            WriteOp::Apply { status: true, .. } | WriteOp::Update { status: true, .. } => Some(crate::manifest::STATUS),
            _ => None,
        }
    }
}

/// Why a request was not made, or what the API server answered instead.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("this host is a standby (not the leader) and does not write")]
    Standby,
    #[error("this host lost leadership while the request was in flight; it was cancelled")]
    LostLeadership,
    #[error("namespace {0:?} is not served by this host (its --namespace list)")]
    NamespaceNotServed(String),
    #[error("{0} is the host's own object; no plugin may write it")]
    HostObject(String),
    #[error(transparent)]
    Resolve(Box<DiscoveryError>),
    #[error("{0} is namespaced: metadata.namespace is missing")]
    NamespaceMissing(Gvk),
    #[error("{resource} is cluster-scoped, but namespace {namespace:?} was given")]
    NamespaceGiven { resource: Gvk, namespace: String },
    #[error("the API server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("{}", api_message(.0))]
    Api(#[source] kube::Error),
    #[error("the request body: {0}")]
    Body(#[source] serde_json::Error),
}

/// The API server's own message for a refusal; kube's rendering for everything else.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        e => e.to_string(),
    }
}

impl RequestError {
    /// The HTTP status the API server answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            RequestError::Api(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }

    /// The API server's reason (`AlreadyExists`, `Conflict`, ...), if it answered.
    pub fn reason(&self) -> Option<&str> {
        match self {
            RequestError::Api(kube::Error::Api(status)) => Some(&status.reason),
            _ => None,
        }
    }
}

/// An object the host keeps for itself (its Lease, its status object): no plugin writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostObject {
    pub resource: Gvk,
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for HostObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.resource, self.name),
            None => write!(f, "{} {}", self.resource, self.name),
        }
    }
}

/// What every write of a host must respect, whoever makes it.
#[derive(Clone)]
pub struct Fence {
    pub leadership: Leadership,
    /// Namespaces served; empty for all.
    pub namespaces: Arc<[String]>,
    /// Objects only the host itself writes (empty for the host's own client).
    pub host_objects: Arc<[HostObject]>,
}

impl Fence {
    /// Whether requests in `namespace` (`None`: cluster-scoped) are within the namespaces served.
    pub fn check_namespace(&self, namespace: Option<&str>) -> Result<(), RequestError> {
        match namespace {
            Some(ns) if !self.namespaces.is_empty() && !self.namespaces.iter().any(|s| s == ns) => Err(RequestError::NamespaceNotServed(ns.into())),
            _ => Ok(()),
        }
    }

    fn check_target(&self, request: &WriteRequest) -> Result<(), RequestError> {
        self.check_namespace(request.namespace.as_deref())?;
        let target = |o: &&HostObject| o.resource.group == request.resource.group && o.resource.kind == request.resource.kind;
        if let Some(own) = self.host_objects.iter().filter(target).find(|o| o.namespace == request.namespace && o.name == request.name) {
            return Err(RequestError::HostObject(own.to_string()));
        }
        Ok(())
    }
}

/// Client-side rate limit of one identity's requests: its writes, its reads from the API server
/// (live reads, the probe before an apply, discovery queries not answered from memory) and its
/// Events.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    pub qps: f64,
    pub burst: u32,
}

impl Default for ClientLimits {
    /// The rate of the host's own requests (its status ConfigMap, its Events, the shard
    /// handovers): client-go's classic defaults, plenty for a handful of writes per plugin load.
    fn default() -> Self {
        ClientLimits { qps: 20.0, burst: 30 }
    }
}

/// The host's default ceiling of a plugin's rate limit (`--max-plugin-qps`, `--max-plugin-burst`),
/// and what a plugin that asks for no rate gets.
pub const DEFAULT_CEILING: ClientLimits = ClientLimits { qps: 100.0, burst: 200 };

/// A token bucket shared by an identity's requests and its Events.
pub type SharedBucket = Arc<Mutex<TokenBucket>>;

impl ClientLimits {
    pub fn bucket(&self) -> SharedBucket {
        Arc::new(Mutex::new(TokenBucket::new(self.qps, self.burst)))
    }

    /// What `plugin` gets when it asks for `qps` and `burst` (its `[kubewasm]` options): at
    /// most the host's `ceiling`, and the ceiling itself when it asks for nothing (or for a rate
    /// that is not a positive number). As controller-runtime leaves its client unthrottled and
    /// relies on the API server's priority and fairness (each plugin its own flow under its own
    /// identity), a plugin is paced only by what the operator allows one plugin: a default
    /// below the ceiling would slow the plugins that ask for nothing and bound nobody, since a
    /// plugin may ask for the ceiling. More is cut to the ceiling, not refused — the operator
    /// decided how much one plugin may take, and a plugin asking for more still works, slower.
    pub fn granted(plugin: &str, qps: Option<f64>, burst: Option<u32>, ceiling: ClientLimits) -> ClientLimits {
        let asked = ClientLimits { qps: qps.filter(|q| *q > 0.0).unwrap_or(ceiling.qps), burst: burst.filter(|b| *b > 0).unwrap_or(ceiling.burst) };
        let granted = ClientLimits { qps: asked.qps.min(ceiling.qps), burst: asked.burst.min(ceiling.burst) };
        if granted != asked {
            tracing::warn!(
                plugin,
                "asks for qps {} and burst {}; the host allows at most {} and {} (--max-plugin-qps, --max-plugin-burst): it gets qps {} and burst {}",
                asked.qps,
                asked.burst,
                ceiling.qps,
                ceiling.burst,
                granted.qps,
                granted.burst
            );
        }
        granted
    }
}

/// One identity's requests. Cheap to share.
pub struct ApiClient {
    kube: kube::Client,
    discovery: Arc<Discovery>,
    /// Told of every object written or deleted, so the writer reads its own writes.
    informers: Arc<Informers>,
    field_manager: String,
    bucket: SharedBucket,
    fence: Fence,
    timeout: Duration,
    /// Every write is a dry run (`dryRun=All`): admitted and validated, never stored.
    dry_run: bool,
}

impl ApiClient {
    pub fn new(
        kube: kube::Client,
        discovery: Arc<Discovery>,
        informers: Arc<Informers>,
        field_manager: String,
        bucket: SharedBucket,
        fence: Fence,
        timeout: Duration,
    ) -> Self {
        ApiClient { kube, discovery, informers, field_manager, bucket, fence, timeout, dry_run: false }
    }

    /// The same identity whose writes are all dry runs (`dryRun=All`: real admission and
    /// validation, nothing stored, the caches untouched), under a rate limit of its own.
    pub fn dry_running(&self, bucket: SharedBucket) -> Self {
        ApiClient {
            kube: self.kube.clone(),
            discovery: self.discovery.clone(),
            informers: self.informers.clone(),
            field_manager: self.field_manager.clone(),
            bucket,
            fence: self.fence.clone(),
            timeout: self.timeout,
            dry_run: true,
        }
    }

    /// The kube client this one sends through (as the same identity).
    pub fn kube(&self) -> &kube::Client {
        &self.kube
    }

    /// The identity's rate limit, shared with its Events.
    pub fn bucket(&self) -> &SharedBucket {
        &self.bucket
    }

    /// Changes the rate limit from now on (a reloaded plugin's options): lowering it slows the
    /// next request at once.
    pub fn set_limits(&self, limits: ClientLimits) {
        self.bucket.lock().set_rate(limits.qps, limits.burst, tokio::time::Instant::now());
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Waits for a token of the rate limit.
    async fn throttle(&self) {
        let wait = self.bucket.lock().reserve(tokio::time::Instant::now());
        if wait > Duration::ZERO {
            tokio::time::sleep(wait).await;
        }
    }

    /// The API of `resource`; a discovery query it takes is a request of this identity's, under
    /// its rate limit.
    async fn api(&self, resource: &Gvk, namespace: Option<&str>) -> Result<Api<RawObject>, RequestError> {
        if !self.discovery.is_cached(resource) {
            self.throttle().await;
        }
        let resolved = self.discovery.resolve(resource).await.map_err(|e| RequestError::Resolve(Box::new(e)))?;
        match (resolved.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Ok(Api::namespaced_with(self.kube.clone(), ns, &resolved.api)),
            (Scope::Cluster, None) => Ok(Api::all_with(self.kube.clone(), &resolved.api)),
            (Scope::Namespaced, None) => Err(RequestError::NamespaceMissing(resource.clone())),
            (Scope::Cluster, Some(ns)) => Err(RequestError::NamespaceGiven { resource: resource.clone(), namespace: ns.into() }),
        }
    }

    /// Reads one object from the API server (not a cache), in a namespace served, under the
    /// rate limit. `None` if it does not exist.
    pub async fn get(&self, resource: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<String>, RequestError> {
        self.fence.check_namespace(namespace)?;
        let api = self.api(resource, namespace).await?;
        self.throttle().await;
        let answer = tokio::time::timeout(self.timeout, api.get_opt(name)).await.map_err(|_| RequestError::Timeout(self.timeout))?;
        let object = answer.map_err(RequestError::Api)?;
        Ok(object.map(|o| {
            let text = o.json().to_string();
            o.into_cached(resource).map(|c| c.entry.json().to_string()).unwrap_or(text)
        }))
    }

    /// Performs a write and returns the object as stored (`None` when a delete removed it).
    /// Checked, in this order: the target (served namespace, not the host's own object),
    /// leadership, the rate limit (waited for), and leadership again, immediately before
    /// sending; a write in flight when this host stops leading is cancelled.
    pub async fn write(&self, request: WriteRequest) -> Result<Option<Arc<str>>, RequestError> {
        self.fence.check_target(&request)?;
        if !self.fence.leadership.is_leader() {
            return Err(RequestError::Standby);
        }
        self.throttle().await;
        let api = self.api(&request.resource, request.namespace.as_deref()).await?;
        if !self.fence.leadership.is_leader() {
            return Err(RequestError::Standby);
        }
        let resource = request.resource.clone();
        let key = ObjectKey::new(request.namespace.as_deref(), &request.name);
        let performed = tokio::select! {
            biased;
            _ = self.fence.leadership.lost() => return Err(RequestError::LostLeadership),
            performed = tokio::time::timeout(self.timeout, self.perform(api, request)) => performed,
        };
        match performed.map_err(|_| RequestError::Timeout(self.timeout))?? {
            // What a dry run returns was never stored: the caches must not see it.
            Some(stored) if self.dry_run => {
                let raw: Arc<str> = stored.json().into();
                Ok(Some(stored.into_cached(&resource).map_or(raw, |cached| cached.entry.json().clone())))
            }
            None if self.dry_run => Ok(None),
            Some(stored) => Ok(Some(self.informers.observe_write(&resource, stored))),
            None => {
                self.informers.observe_delete(&resource, &key);
                Ok(None)
            }
        }
    }

    /// Sends the request; `None` when a delete removed the object.
    async fn perform(&self, api: Api<RawObject>, request: WriteRequest) -> Result<Option<RawObject>, RequestError> {
        let fm = Some(self.field_manager.clone());
        let post = PostParams { field_manager: fm.clone(), dry_run: self.dry_run };
        let name = request.name.as_str();
        let raw = |v: serde_json::Value| RawObject::from_json(v.to_string()).map_err(RequestError::Body);
        let api_error = RequestError::Api;
        Ok(Some(match request.op {
            WriteOp::Apply { object, force, status } => {
                let mut params = PatchParams::apply(&self.field_manager);
                params.force = force;
                params.dry_run = self.dry_run;
                let patch = Patch::Apply(raw(object)?);
                let stored = if status { api.patch_status(name, &params, &patch).await } else { api.patch(name, &params, &patch).await };
                stored.map_err(api_error)?
            }
            WriteOp::Create { object, applied } => {
                let created = api.create(&post, &raw(object)?).await.map_err(api_error)?;
                // A dry run stored nothing to hand over.
                if applied && !self.dry_run { self.own_as_applied(&api, name, created).await? } else { created }
            }
            WriteOp::Update { object, status: false } => api.replace(name, &post, &raw(object)?).await.map_err(api_error)?,
            WriteOp::Update { object, status: true } => api.replace_status(name, &post, &raw(object)?).await.map_err(api_error)?,
            WriteOp::Patch { patch_type, body } => {
                let params = PatchParams { field_manager: fm, dry_run: self.dry_run, ..Default::default() };
                let stored = match patch_type {
                    PatchKind::Merge => api.patch(name, &params, &Patch::Merge(body)).await,
                    PatchKind::Strategic => api.patch(name, &params, &Patch::Strategic(body)).await,
                    PatchKind::Json => {
                        let patch: json_patch::Patch = serde_json::from_value(body).map_err(RequestError::Body)?;
                        api.patch(name, &params, &Patch::<()>::Json(patch)).await
                    }
                };
                stored.map_err(api_error)?
            }
            WriteOp::Delete { uid } => {
                let preconditions = uid.map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None });
                match api.delete(name, &DeleteParams { dry_run: self.dry_run, preconditions, ..DeleteParams::background() }).await.map_err(api_error)? {
                    // Still there: finalizers hold it, with its deletion timestamp set.
                    either::Either::Left(object) => object,
                    either::Either::Right(_) => return Ok(None),
                }
            }
        }))
    }

    /// Hands the fields an update of this field manager owns on `created` (which it has just
    /// created) over to its server-side apply, as client-go's `csaupgrade` does for kubectl: a
    /// JSON patch of `managedFields`, on the condition that the object is still as created.
    async fn own_as_applied(&self, api: &Api<RawObject>, name: &str, created: RawObject) -> Result<RawObject, RequestError> {
        let object: serde_json::Value = serde_json::from_str(created.json()).map_err(RequestError::Body)?;
        let version = object.pointer("/metadata/resourceVersion").cloned().unwrap_or_default();
        let mut managed = object.pointer("/metadata/managedFields").and_then(serde_json::Value::as_array).cloned().unwrap_or_default();
        let ours = |entry: &&mut serde_json::Value| {
            entry["manager"] == self.field_manager.as_str() && entry["operation"] == "Update" && entry.get("subresource").is_none_or(|s| *s == "")
        };
        let Some(entry) = managed.iter_mut().find(ours) else { return Ok(created) };
        entry["operation"] = "Apply".into();
        let patch = serde_json::json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "replace", "path": "/metadata/managedFields", "value": managed},
        ]);
        let patch: json_patch::Patch = serde_json::from_value(patch).map_err(RequestError::Body)?;
        let params = PatchParams { field_manager: Some(self.field_manager.clone()), ..Default::default() };
        self.throttle().await;
        api.patch(name, &params, &Patch::<()>::Json(patch)).await.map_err(RequestError::Api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(namespaces: &[&str]) -> Fence {
        Fence {
            leadership: Leadership::always(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            host_objects: vec![HostObject {
                resource: Gvk::new("coordination.k8s.io", "v1", "Lease"),
                namespace: Some("kubewasm".into()),
                name: "kubewasm".into(),
            }]
            .into(),
        }
    }

    fn request(resource: Gvk, namespace: Option<&str>, name: &str) -> WriteRequest {
        WriteRequest { resource, namespace: namespace.map(Into::into), name: name.into(), op: WriteOp::Delete { uid: None } }
    }

    #[test]
    fn a_plugin_gets_at_most_the_hosts_ceiling() {
        let ceiling = ClientLimits { qps: 50.0, burst: 60 };
        assert_eq!(ClientLimits::granted("p", None, None, ceiling), ceiling, "asking for nothing gets the ceiling");
        assert_eq!(ClientLimits::granted("p", Some(1e9), Some(u32::MAX), ceiling), ceiling);
        assert_eq!(ClientLimits::granted("p", Some(5.0), Some(10), ceiling), ClientLimits { qps: 5.0, burst: 10 });
        assert_eq!(ClientLimits::granted("p", Some(5.0), None, ceiling), ClientLimits { qps: 5.0, burst: 60 });
        for nonsense in [0.0, -1.0, f64::NAN] {
            assert_eq!(ClientLimits::granted("p", Some(nonsense), Some(0), ceiling), ceiling, "{nonsense}");
        }
    }

    /// An API server serving ConfigMaps (`x` in every namespace).
    fn serving_configmaps() -> crate::fake_api::FakeApi {
        crate::fake_api::FakeApi::new(|_, path| {
            match path {
            "/api/v1" => (
                200,
                r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"]}]}"#.into(),
            ),
            p if p.contains("/configmaps/x") => (200, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"team-a","uid":"u1"}}"#.into()),
            _ => (404, crate::fake_api::not_found()),
        }
        })
    }

    fn api_client(api: &crate::fake_api::FakeApi, limits: ClientLimits, fence: Fence) -> ApiClient {
        let discovery = Arc::new(Discovery::new(api.client.clone(), Duration::from_secs(5)));
        let informers = Informers::new(api.client.clone(), discovery.clone(), tokio_util::sync::CancellationToken::new(), Default::default());
        ApiClient::new(api.client.clone(), discovery, informers, "kubewasm/test".into(), limits.bucket(), fence, Duration::from_secs(5))
    }

    /// Live reads spend the identity's tokens like writes do, and a lower rate set by a reload
    /// slows the very next reads.
    #[tokio::test(start_paused = true)]
    async fn live_reads_are_paced_by_the_rate_limit_and_a_lower_one_takes_effect_at_once() {
        let api = serving_configmaps();
        let client = api_client(&api, ClientLimits { qps: 10.0, burst: 5 }, fence(&[]));
        let cm = Gvk::new("", "v1", "ConfigMap");
        let started = tokio::time::Instant::now();
        // One token goes to the discovery query of ConfigMaps, 5 at once, then 10 a second.
        for _ in 0..25 {
            assert!(client.get(&cm, Some("team-a"), "x").await.unwrap().is_some());
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(2000) && took < Duration::from_millis(2200), "25 reads in {took:?}");
        client.set_limits(ClientLimits { qps: 1.0, burst: 1 });
        let lowered = tokio::time::Instant::now();
        for _ in 0..3 {
            client.get(&cm, Some("team-a"), "x").await.unwrap();
        }
        assert!(lowered.elapsed() >= Duration::from_secs(3), "3 reads at 1 a second in {:?}", lowered.elapsed());
        let gets = api.count(&http::Method::GET, "/api/v1/namespaces/team-a/configmaps/x");
        assert_eq!(gets, 28);
    }

    /// A live read in a namespace the host does not serve is refused before it is sent.
    #[tokio::test]
    async fn live_reads_stay_in_the_namespaces_served() {
        let api = serving_configmaps();
        let client = api_client(&api, ClientLimits::default(), fence(&["team-a"]));
        let cm = Gvk::new("", "v1", "ConfigMap");
        assert!(client.get(&cm, Some("team-a"), "x").await.is_ok());
        assert!(matches!(client.get(&cm, Some("team-b"), "x").await, Err(RequestError::NamespaceNotServed(ns)) if ns == "team-b"));
        assert_eq!(api.count(&http::Method::GET, "/api/v1/namespaces/team-b"), 0);
    }

    #[test]
    fn writes_outside_the_served_namespaces_and_to_the_hosts_objects_are_refused() {
        let lease = Gvk::new("coordination.k8s.io", "v1", "Lease");
        let cm = Gvk::new("", "v1", "ConfigMap");
        let all = fence(&[]);
        assert!(matches!(all.check_target(&request(lease.clone(), Some("kubewasm"), "kubewasm")), Err(RequestError::HostObject(_))));
        // The same object under another version of its group is the same object.
        let v2 = Gvk::new("coordination.k8s.io", "v2", "Lease");
        assert!(matches!(all.check_target(&request(v2, Some("kubewasm"), "kubewasm")), Err(RequestError::HostObject(_))));
        assert!(all.check_target(&request(lease.clone(), Some("kubewasm"), "other")).is_ok());
        assert!(all.check_target(&request(lease, Some("team-a"), "kubewasm")).is_ok());
        let some = fence(&["team-a"]);
        assert!(some.check_target(&request(cm.clone(), Some("team-a"), "x")).is_ok());
        assert!(matches!(some.check_target(&request(cm.clone(), Some("team-b"), "x")), Err(RequestError::NamespaceNotServed(ns)) if ns == "team-b"));
        assert!(some.check_target(&request(Gvk::new("", "v1", "Node"), None, "n1")).is_ok(), "cluster-scoped objects are in no namespace");
    }
}
