//! Plugins in OCI registries: `kubewasm push` and `kubewasm pull`, and the pulls behind Plugin
//! resources. The layout is the Wasm OCI artifact one (config `application/vnd.wasm.config.v0+json`,
//! one `application/wasm` layer), as `oci-wasm`, wkg and Kubewarden's tools use. Digests are
//! verified on pull (manifest and layer); a tag is resolved to a digest with one HEAD request per
//! poll. Credentials come from the docker config file (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`, credential helpers included). Plain HTTP is used only for loopback
//! registries and those named with `--insecure-registry`.
//!
//! A pull is bounded whatever the registry does ([`fetch`]): a manifest is at most
//! [`MAX_MANIFEST_BYTES`], a module at most `--max-module-bytes` and at most the size its manifest
//! declares — counted as the bytes arrive, which go to a file, not to memory — and the whole pull
//! (token, resolution, manifest, module) at most `--pull-timeout`, so a registry that trickles a
//! byte at a time cannot hold it forever. Redirects are limited and no response body reaches an
//! error. What was pulled is cached on disk ([`store`]), keyed so that a digest is served from
//! the cache only to a reference of the repository that served it.
//!
//! Pushing (an operator's command, to a registry they chose) is `oci-client`'s. Not `oci-wasm`:
//! it pins an older `oci-client` and `wit-component` than the host's, a second copy of each; the
//! few lines of layout it adds are here.

pub mod fetch;
mod store;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use reqwest::Method;
use sha2::{Digest as _, Sha256};

use fetch::{FetchError, Fetcher, Scope, Trusted};
pub use store::place;
use store::{Repository, Store};

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The default of `--max-module-bytes`: a module larger than this is refused.
pub const MAX_MODULE_BYTES: u64 = 256 << 20;
/// A manifest larger than this is refused (containerd's limit; a Wasm artifact's is ~500 bytes).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The default of `--pull-timeout`.
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(300);

/// What a manifest request accepts.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, \
                               application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json";

/// Why a push or a pull failed. [`OciError::reason`] names the kind, for a condition. No variant
/// carries text a registry sent, beyond its status and OCI error codes.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("{reference:?} is not an OCI reference (REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST): {message}")]
    Reference { reference: String, message: String },
    #[error("reading credentials for {registry} from the docker config: {message}")]
    Credentials { registry: String, message: String },
    #[error("resolving {reference}: {source}")]
    Resolve {
        reference: String,
        #[source]
        source: FetchError,
    },
    #[error("pulling the manifest of {reference}: {source}")]
    PullManifest {
        reference: String,
        #[source]
        source: FetchError,
    },
    #[error(
        "{reference} is not a Wasm artifact: {found}, expected a config of type {CONFIG_MEDIA_TYPE} and one layer of type {LAYER_MEDIA_TYPE} (push it with `kubewasm push`)"
    )]
    MediaType { reference: String, found: String },
    #[error("{reference}: the module is {size} bytes by its manifest, more than the {limit} a plugin may have (--max-module-bytes)")]
    TooLarge { reference: String, size: i64, limit: u64 },
    #[error("{reference}: the {what} does not match its Digest {expected} (received {actual})")]
    Digest { reference: String, what: &'static str, expected: String, actual: String },
    #[error("pulling the module of {reference}: {source}")]
    PullLayer {
        reference: String,
        #[source]
        source: FetchError,
    },
    #[error("pulling {reference} took longer than {after:?} (--pull-timeout)")]
    TimedOut { reference: String, after: Duration },
    #[error("pushing to {reference}: {source}")]
    Push {
        reference: String,
        #[source]
        source: OciDistributionError,
    },
    #[error("{path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OciError {
    /// A condition reason: what an admin should look at.
    pub fn reason(&self) -> &'static str {
        match self {
            OciError::Reference { .. } => "BadReference",
            OciError::Credentials { .. } => "Unauthorized",
            OciError::Resolve { source, .. } | OciError::PullManifest { source, .. } | OciError::PullLayer { source, .. } => source.reason(),
            OciError::MediaType { .. } => "WrongMediaType",
            OciError::TooLarge { .. } => "TooLarge",
            OciError::Digest { .. } => "DigestMismatch",
            OciError::TimedOut { .. } => "PullTimeout",
            OciError::Push { .. } => "PushFailed",
            OciError::Cache { .. } => "PullFailed",
        }
    }

    /// Whether the registry could not be reached (or took too long): the last module pulled may
    /// stand in ([`Registries::last_known`]).
    pub fn is_unreachable(&self) -> bool {
        matches!(self.reason(), "RegistryUnreachable" | "PullTimeout")
    }
}

/// Parses a reference; a bare `repo:tag` (no registry) is refused rather than sent to Docker Hub.
pub fn parse_reference(text: &str) -> Result<Reference, OciError> {
    let bad = |message: String| OciError::Reference { reference: text.into(), message };
    let registry = text.split('/').next().unwrap_or_default();
    if !text.contains('/') || !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
        return Err(bad("name the registry, e.g. ghcr.io/team/plugin:1.0".into()));
    }
    let reference = text.parse::<Reference>().map_err(|e| bad(e.to_string()))?;
    if reference.digest().is_some_and(|d| !d.starts_with("sha256:")) {
        return Err(bad("only sha256 digests are supported".into()));
    }
    Ok(reference)
}

/// How the host reaches registries.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`HOST` or `HOST:PORT`) spoken to over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// Bound on connecting and on each read.
    pub timeout: Duration,
    /// Bound on a whole pull: token, resolution, manifest and module.
    pub pull_timeout: Duration,
    /// The largest module pulled.
    pub max_module_bytes: u64,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions { insecure: Vec::new(), timeout: Duration::from_secs(30), pull_timeout: DEFAULT_PULL_TIMEOUT, max_module_bytes: MAX_MODULE_BYTES }
    }
}

/// What a pull produced: the module, verified, in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// `sha256:…` of the manifest: what a tag resolved to.
    pub manifest_digest: String,
    /// `sha256:…` of the module itself.
    pub layer_digest: String,
    pub path: PathBuf,
}

/// The one layer of a Wasm artifact's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmLayer {
    pub digest: String,
    pub size: i64,
}

/// Reads a manifest as the Wasm artifact layout wants it: one config of
/// [`CONFIG_MEDIA_TYPE`], one layer of [`LAYER_MEDIA_TYPE`] with a sha256 digest. `Err` says
/// what was found instead. Untrusted bytes: it never panics.
pub fn wasm_layer(manifest: &[u8]) -> Result<WasmLayer, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire {
        media_type: Option<String>,
        config: Option<Descriptor>,
        #[serde(default)]
        layers: Vec<Descriptor>,
        manifests: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Descriptor {
        media_type: String,
        digest: String,
        size: i64,
    }
    let wire: Wire = serde_json::from_slice(manifest).map_err(|e| format!("a manifest that does not parse ({e})"))?;
    if wire.manifests.is_some() || wire.media_type.as_deref().is_some_and(|t| t.contains("index") || t.contains("list")) {
        return Err("an image index".into());
    }
    let config = wire.config.ok_or("a manifest without a config")?;
    if config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!("a config of type {}", config.media_type));
    }
    let [layer] = <[Descriptor; 1]>::try_from(wire.layers).map_err(|layers| format!("{} layers", layers.len()))?;
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(format!("a layer of type {}", layer.media_type));
    }
    let hex = layer.digest.strip_prefix("sha256:").filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    if hex.is_none() {
        return Err(format!("a layer whose digest is not sha256:HEX ({:.80})", layer.digest));
    }
    Ok(WasmLayer { digest: layer.digest, size: layer.size })
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Pushes and pulls; one per host (it keeps registry tokens).
pub struct Registries {
    /// For pushes (the operator's command): over HTTPS, and over plain HTTP to loopback and
    /// `--insecure-registry` hosts.
    push: Client,
    push_plain: Client,
    fetcher: Fetcher,
    store: Store,
    options: RegistryOptions,
}

impl Registries {
    /// `cache_dir` holds pulled modules and what each repository's manifests and tags named
    /// ([`store`]).
    pub fn new(options: &RegistryOptions, cache_dir: PathBuf) -> Registries {
        // reqwest's rustls asks for the process's crypto provider; kube brings ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let user_agent = concat!("kubewasm/", env!("CARGO_PKG_VERSION"));
        let config =
            |protocol| ClientConfig { protocol, read_timeout: Some(options.timeout), connect_timeout: Some(options.timeout), user_agent, ..Default::default() };
        Registries {
            push: Client::new(config(ClientProtocol::Https)),
            push_plain: Client::new(config(ClientProtocol::Http)),
            fetcher: Fetcher::new(Trusted::new(&options.insecure), options.timeout, user_agent),
            store: Store::new(cache_dir),
            options: options.clone(),
        }
    }

    fn push_client_for(&self, reference: &Reference) -> &Client {
        if self.fetcher.trusted().is_trusted(reference.resolve_registry()) { &self.push_plain } else { &self.push }
    }

    /// The registry's credentials from the docker config file; anonymous without one.
    fn auth(reference: &Reference) -> Result<RegistryAuth, OciError> {
        use docker_credential::{CredentialRetrievalError as E, DockerCredential};
        let registry = reference.resolve_registry();
        let dir = std::env::var_os("DOCKER_CONFIG").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")));
        let Some(file) = dir.map(|d| d.join("config.json")).and_then(|path| std::fs::File::open(path).ok()) else {
            return Ok(RegistryAuth::Anonymous);
        };
        match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
            Ok(DockerCredential::UsernamePassword(user, password)) => Ok(RegistryAuth::Basic(user, password)),
            Ok(DockerCredential::IdentityToken(token)) => Ok(RegistryAuth::Bearer(token)),
            Err(E::NoCredentialConfigured) => Ok(RegistryAuth::Anonymous),
            Err(e) => Err(OciError::Credentials { registry: registry.into(), message: e.to_string() }),
        }
    }

    /// Pushes a component; returns the manifest digest the registry now serves. The same bytes
    /// always give the same digest (the config's time is fixed).
    pub async fn push(&self, reference: &Reference, wasm: Vec<u8>) -> Result<String, OciError> {
        let config = Config { data: wasm_config(&wasm).into(), media_type: CONFIG_MEDIA_TYPE.into(), annotations: None };
        let layer = ImageLayer { data: wasm.into(), media_type: LAYER_MEDIA_TYPE.into(), annotations: None };
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let client = self.push_client_for(reference);
        let fail = |source| OciError::Push { reference: reference.whole(), source };
        client.store_auth_if_needed(reference.resolve_registry(), &Self::auth(reference)?).await;
        // The blobs one by one rather than `Client::push`, which fails a finished upload (201)
        // without a `Location` header; `crane registry serve` sends none. oci-client lets a
        // manifest go without one, not a blob: such a blob counts as pushed if the registry has it.
        for (data, digest) in [(layer.data, &manifest.layers[0].digest), (config.data, &manifest.config.digest)] {
            match client.push_blob(reference, data, digest).await {
                Ok(_) => {}
                Err(OciDistributionError::RegistryNoLocationError) if client.blob_exists(reference, digest).await.map_err(fail)? => {}
                Err(e) => return Err(fail(e)),
            }
        }
        client.push_manifest(reference, &manifest.into()).await.map_err(fail)?;
        self.resolve(reference).await
    }

    /// What `reference` names now: its digest, or for a tag the digest it resolves to.
    pub async fn resolve(&self, reference: &Reference) -> Result<String, OciError> {
        let auth = Self::auth(reference)?;
        let scope = Scope { registry: reference.resolve_registry(), repository: reference.repository(), auth: &auth };
        let deadline = tokio::time::Instant::now() + self.options.pull_timeout;
        let resolved = tokio::time::timeout_at(deadline, self.resolution(reference, &scope)).await;
        resolved.map_err(|_| OciError::TimedOut { reference: reference.whole(), after: self.options.pull_timeout })?.map(|(digest, _)| digest)
    }

    /// The digest `reference` names; for a tag also the manifest, when the registry had to send
    /// it to tell (no `Docker-Content-Digest` on HEAD).
    async fn resolution(&self, reference: &Reference, scope: &Scope<'_>) -> Result<(String, Option<Vec<u8>>), OciError> {
        if let Some(digest) = reference.digest() {
            return Ok((digest.to_string(), None));
        }
        let fail = |source| OciError::Resolve { reference: reference.whole(), source };
        let tag = reference.tag().unwrap_or("latest");
        let url = self.fetcher.url(scope, "manifests", tag).map_err(fail)?;
        let head = self.fetcher.send(Method::HEAD, &url, scope, MANIFEST_ACCEPT).await.map_err(fail)?;
        let header = head.headers().get("docker-content-digest").and_then(|v| v.to_str().ok());
        if let Some(digest) = header.filter(|d| d.starts_with("sha256:") && d.len() == 71) {
            return Ok((digest.to_string(), None));
        }
        let mut response = self.fetcher.send(Method::GET, &url, scope, MANIFEST_ACCEPT).await.map_err(fail)?;
        let body = fetch::read_to_vec(&mut response, MAX_MANIFEST_BYTES, "the largest manifest", &Method::GET, &url).await.map_err(fail)?;
        Ok((sha256_digest(&body), Some(body)))
    }

    /// The module `reference` names, from the cache or the registry, verified; within
    /// `--pull-timeout` as a whole.
    pub async fn pull(&self, reference: &Reference) -> Result<Pulled, OciError> {
        let deadline = tokio::time::Instant::now() + self.options.pull_timeout;
        match tokio::time::timeout_at(deadline, self.pull_within(reference)).await {
            Ok(pulled) => pulled,
            Err(_) => Err(OciError::TimedOut { reference: reference.whole(), after: self.options.pull_timeout }),
        }
    }

    async fn pull_within(&self, reference: &Reference) -> Result<Pulled, OciError> {
        let auth = Self::auth(reference)?;
        let (registry, repository) = (reference.resolve_registry(), reference.repository());
        let scope = Scope { registry, repository, auth: &auth };
        let repo = Repository { registry, repository };
        let (manifest_digest, manifest) = self.resolution(reference, &scope).await?;
        let remember = |pulled: Pulled| -> Result<Pulled, OciError> {
            if reference.digest().is_none() {
                self.store.remember_tag(&repo, reference.tag().unwrap_or("latest"), &pulled.manifest_digest)?;
            }
            Ok(pulled)
        };
        if let Some(pulled) = self.store.cached(&repo, &manifest_digest) {
            return remember(pulled);
        }
        let manifest = match manifest {
            Some(manifest) => manifest,
            None => {
                let fail = |source| OciError::PullManifest { reference: reference.whole(), source };
                let url = self.fetcher.url(&scope, "manifests", &manifest_digest).map_err(fail)?;
                let mut response = self.fetcher.send(Method::GET, &url, &scope, MANIFEST_ACCEPT).await.map_err(fail)?;
                fetch::read_to_vec(&mut response, MAX_MANIFEST_BYTES, "the largest manifest", &Method::GET, &url).await.map_err(fail)?
            }
        };
        let actual = sha256_digest(&manifest);
        if actual != manifest_digest {
            return Err(OciError::Digest { reference: reference.whole(), what: "manifest", expected: manifest_digest, actual });
        }
        let layer = wasm_layer(&manifest).map_err(|found| OciError::MediaType { reference: reference.whole(), found })?;
        let limit = self.options.max_module_bytes;
        let size =
            u64::try_from(layer.size).ok().filter(|&s| s <= limit).ok_or(OciError::TooLarge { reference: reference.whole(), size: layer.size, limit })?;
        let fail = |source| OciError::PullLayer { reference: reference.whole(), source };
        let url = self.fetcher.url(&scope, "blobs", &layer.digest).map_err(fail)?;
        if self.store.has_layer(&layer.digest) {
            // Pulled before, maybe through another repository: used only if this one serves it
            // too (one HEAD), so that a manifest naming another team's module gets nothing.
            match self.fetcher.send(Method::HEAD, &url, &scope, "").await {
                Ok(_) => return remember(self.store.record(&repo, &manifest_digest, &layer.digest)?),
                Err(e) if e.is_not_found() || e.reason() == "Unauthorized" => return Err(fail(e)),
                // A registry that does not answer HEAD on blobs: download it.
                Err(_) => {}
            }
        }
        let mut response = self.fetcher.send(Method::GET, &url, &scope, "").await.map_err(fail)?;
        let file = self.store.new_layer_file()?;
        let mut hasher = Sha256::new();
        let mut writer = std::io::BufWriter::new(file.as_file());
        let what = if size < limit { "the size the manifest declares for the module" } else { "--max-module-bytes" };
        fetch::read_limited(&mut response, size, what, &Method::GET, &url, |chunk| {
            hasher.update(chunk);
            std::io::Write::write_all(&mut writer, chunk)
        })
        .await
        .map_err(fail)?;
        std::io::Write::flush(&mut writer).map_err(|source| OciError::Cache { path: file.path().to_path_buf(), source })?;
        drop(writer);
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != layer.digest {
            return Err(OciError::Digest { reference: reference.whole(), what: "module", expected: layer.digest, actual });
        }
        self.store.keep_layer(file, &layer.digest)?;
        remember(self.store.record(&repo, &manifest_digest, &layer.digest)?)
    }

    /// The last module pulled for `reference` and still cached, without asking the registry: for
    /// a digest, that manifest as its repository served it; for a tag, what it last resolved to.
    pub fn last_known(&self, reference: &Reference) -> Option<Pulled> {
        let repo = Repository { registry: reference.resolve_registry(), repository: reference.repository() };
        let digest = match reference.digest() {
            Some(digest) => digest.to_string(),
            None => self.store.last_resolution(&repo, reference.tag().unwrap_or("latest"))?,
        };
        self.store.cached(&repo, &digest)
    }
}

/// Written whole under a temporary name, then renamed: a reader never sees half a module.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let cache = |source| OciError::Cache { path: path.to_path_buf(), source };
    let dir = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir).map_err(cache)?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(cache)?;
    std::io::Write::write_all(&mut file, bytes).map_err(cache)?;
    file.persist(path).map_err(|e| cache(e.error))?;
    Ok(())
}

/// The Wasm OCI config: what the component imports and exports, so that registries and tools
/// can show it. The creation time is the epoch, as reproducible image builders write it.
fn wasm_config(wasm: &[u8]) -> Vec<u8> {
    let component = match wit_component::decode(wasm) {
        Ok(wit_component::DecodedWasm::Component(resolve, world)) => {
            let world = &resolve.worlds[world];
            let exports: Vec<String> = world.exports.keys().map(|k| resolve.name_world_key(k)).collect();
            let imports: Vec<String> = world.imports.keys().map(|k| resolve.name_world_key(k)).collect();
            serde_json::json!({ "exports": exports, "imports": imports, "target": null })
        }
        _ => serde_json::Value::Null,
    };
    let config = serde_json::json!({
        "created": "1970-01-01T00:00:00Z",
        "author": null,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [format!("sha256:{}", hex::encode(Sha256::digest(wasm)))],
        "component": component,
    });
    serde_json::to_vec(&config).expect("JSON serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_must_name_their_registry() {
        assert!(parse_reference("ghcr.io/team/plugin:1.0").is_ok());
        assert!(parse_reference("127.0.0.1:5000/plugin@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").is_ok());
        assert!(parse_reference("localhost/plugin").is_ok());
        let e = parse_reference("plugin:1.0").unwrap_err();
        assert_eq!(e.reason(), "BadReference");
        assert!(e.to_string().contains("name the registry"), "{e}");
        assert_eq!(parse_reference("ghcr.io/Team/UPPER:1").unwrap_err().reason(), "BadReference");
    }

    fn manifest(config: &str, layers: &[(&str, &str)]) -> Vec<u8> {
        let layers: Vec<_> = layers.iter().map(|(t, d)| serde_json::json!({"mediaType": t, "digest": d, "size": 10})).collect();
        serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "config": {"mediaType": config, "digest": "sha256:00", "size": 2}, "layers": layers}))
            .unwrap()
    }

    #[test]
    fn a_wasm_artifact_has_one_wasm_layer() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let layer = wasm_layer(&manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, &digest)])).unwrap();
        assert_eq!(layer, WasmLayer { digest: digest.clone(), size: 10 });
        assert_eq!(
            wasm_layer(&manifest("application/vnd.oci.image.config.v1+json", &[])).unwrap_err(),
            "a config of type application/vnd.oci.image.config.v1+json"
        );
        assert_eq!(wasm_layer(&manifest(CONFIG_MEDIA_TYPE, &[])).unwrap_err(), "0 layers");
        assert_eq!(wasm_layer(&manifest(CONFIG_MEDIA_TYPE, &[("x", &digest)])).unwrap_err(), "a layer of type x");
        assert!(wasm_layer(&manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, "sha256:../../x")])).unwrap_err().contains("not sha256:HEX"));
        assert_eq!(wasm_layer(br#"{"schemaVersion":2,"manifests":[]}"#).unwrap_err(), "an image index");
        assert!(wasm_layer(b"\xff").unwrap_err().contains("does not parse"));
    }
}
