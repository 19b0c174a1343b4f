//! Plugins in OCI registries: `kubewasm push` and `kubewasm pull`, and the pulls behind Plugin
//! resources. The layout is the Wasm OCI artifact one (config `application/vnd.wasm.config.v0+json`,
//! one `application/wasm` layer), as `oci-wasm`, wkg and Kubewarden's tools use. Digests are
//! verified on pull (manifest and layer); a pulled module is cached by digest; a tag is resolved
//! to a digest with one HEAD request per poll. Credentials come from the docker config file
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, credential helpers included).
//! Plain HTTP is used only for loopback registries and those named with `--insecure-registry`.
//!
//! The transport is `oci-client`. Not `oci-wasm`: it pins an older `oci-client` and
//! `wit-component` than the host's, a second copy of each; the few lines of layout it adds are
//! here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// A module larger than this is refused before it is downloaded.
pub const MAX_MODULE_BYTES: i64 = 256 << 20;

/// Why a push or a pull failed. [`OciError::reason`] names the kind, for a condition.
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
        source: OciDistributionError,
    },
    #[error("pulling the manifest of {reference}: {source}")]
    PullManifest {
        reference: String,
        #[source]
        source: OciDistributionError,
    },
    #[error(
        "{reference} is not a Wasm artifact: {found}, expected a config of type {CONFIG_MEDIA_TYPE} and one layer of type {LAYER_MEDIA_TYPE} (push it with `kubewasm push`)"
    )]
    MediaType { reference: String, found: String },
    #[error("{reference}: the module is {size} bytes, more than the {MAX_MODULE_BYTES} a plugin may have")]
    TooLarge { reference: String, size: i64 },
    #[error("pulling the module of {reference}: {source}")]
    PullLayer {
        reference: String,
        #[source]
        source: OciDistributionError,
    },
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
        let transport = |e: &OciDistributionError| match e {
            OciDistributionError::DigestError(_) => "DigestMismatch",
            OciDistributionError::AuthenticationFailure(_) | OciDistributionError::UnauthorizedError { .. } => "Unauthorized",
            OciDistributionError::ImageManifestNotFoundError(_) => "NotFound",
            OciDistributionError::ServerError { code: 404, .. } => "NotFound",
            OciDistributionError::RegistryError { envelope, .. }
                if envelope.errors.iter().any(|e| {
                    matches!(
                        e.code,
                        oci_client::errors::OciErrorCode::ManifestUnknown
                            | oci_client::errors::OciErrorCode::NameUnknown
                            | oci_client::errors::OciErrorCode::BlobUnknown
                    )
                }) =>
            {
                "NotFound"
            }
            OciDistributionError::RequestError(_) => "RegistryUnreachable",
            _ => "PullFailed",
        };
        match self {
            OciError::Reference { .. } => "BadReference",
            OciError::Credentials { .. } => "Unauthorized",
            OciError::Resolve { source, .. } | OciError::PullManifest { source, .. } | OciError::PullLayer { source, .. } | OciError::Push { source, .. } => {
                transport(source)
            }
            OciError::MediaType { .. } => "WrongMediaType",
            OciError::TooLarge { .. } => "TooLarge",
            OciError::Cache { .. } => "PullFailed",
        }
    }
}

/// Parses a reference; a bare `repo:tag` (no registry) is refused rather than sent to Docker Hub.
pub fn parse_reference(text: &str) -> Result<Reference, OciError> {
    let bad = |message: String| OciError::Reference { reference: text.into(), message };
    let registry = text.split('/').next().unwrap_or_default();
    if !text.contains('/') || !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
        return Err(bad("name the registry, e.g. ghcr.io/team/plugin:1.0".into()));
    }
    text.parse::<Reference>().map_err(|e| bad(e.to_string()))
}

/// How the host reaches registries.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`HOST` or `HOST:PORT`) spoken to over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// Bound on connecting and on each read.
    pub timeout: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions { insecure: Vec::new(), timeout: Duration::from_secs(30) }
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

/// Pushes and pulls; one per host (it keeps registry tokens).
pub struct Registries {
    client: Client,
    /// For loopback registries: plain HTTP.
    loopback: Client,
    cache_dir: PathBuf,
}

impl Registries {
    /// `cache_dir` holds pulled modules (`layers/HEX.wasm`) and which layer each manifest names
    /// (`manifests/HEX`).
    pub fn new(options: &RegistryOptions, cache_dir: PathBuf) -> Registries {
        // reqwest's rustls asks for the process's crypto provider; kube brings ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = |protocol| ClientConfig {
            protocol,
            read_timeout: Some(options.timeout),
            connect_timeout: Some(options.timeout),
            user_agent: concat!("kubewasm/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        };
        Registries {
            client: Client::new(config(ClientProtocol::HttpsExcept(options.insecure.clone()))),
            loopback: Client::new(config(ClientProtocol::Http)),
            cache_dir,
        }
    }

    /// Whether `registry` (`HOST` or `HOST:PORT`) is on loopback.
    fn is_loopback(registry: &str) -> bool {
        let host = match registry.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => registry,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    fn client_for(&self, reference: &Reference) -> &Client {
        if Self::is_loopback(reference.resolve_registry()) { &self.loopback } else { &self.client }
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
        self.client_for(reference)
            .push(reference, &[layer], config, &Self::auth(reference)?, Some(manifest))
            .await
            .map_err(|source| OciError::Push { reference: reference.whole(), source })?;
        self.resolve(reference).await
    }

    /// What `reference` names now: its digest, or for a tag the digest it resolves to.
    pub async fn resolve(&self, reference: &Reference) -> Result<String, OciError> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.to_string());
        }
        self.client_for(reference)
            .fetch_manifest_digest(reference, &Self::auth(reference)?)
            .await
            .map_err(|source| OciError::Resolve { reference: reference.whole(), source })
    }

    /// The module `reference` names, from the cache or the registry, verified.
    pub async fn pull(&self, reference: &Reference) -> Result<Pulled, OciError> {
        let manifest_digest = self.resolve(reference).await?;
        if let Some(pulled) = self.cached(&manifest_digest) {
            return Ok(pulled);
        }
        let pinned = reference.clone_with_digest(manifest_digest.clone());
        let client = self.client_for(reference);
        let auth = Self::auth(reference)?;
        let (manifest, digest) =
            client.pull_manifest(&pinned, &auth).await.map_err(|source| OciError::PullManifest { reference: reference.whole(), source })?;
        let media = |found: String| OciError::MediaType { reference: reference.whole(), found };
        let OciManifest::Image(manifest) = manifest else {
            return Err(media("an image index".into()));
        };
        if manifest.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(media(format!("a config of type {}", manifest.config.media_type)));
        }
        let [layer] = manifest.layers.as_slice() else {
            return Err(media(format!("{} layers", manifest.layers.len())));
        };
        if layer.media_type != LAYER_MEDIA_TYPE {
            return Err(media(format!("a layer of type {}", layer.media_type)));
        }
        if layer.size > MAX_MODULE_BYTES {
            return Err(OciError::TooLarge { reference: reference.whole(), size: layer.size });
        }
        let mut module = Vec::with_capacity(layer.size.max(0) as usize);
        // Checks the bytes against the layer's digest as they arrive.
        client.pull_blob(&pinned, layer, &mut module).await.map_err(|source| OciError::PullLayer { reference: reference.whole(), source })?;
        self.store(&digest, &layer.digest, &module)
    }

    fn layer_path(&self, layer_digest: &str) -> PathBuf {
        self.cache_dir.join("layers").join(format!("{}.wasm", hex_of(layer_digest)))
    }

    fn manifest_path(&self, manifest_digest: &str) -> PathBuf {
        self.cache_dir.join("manifests").join(hex_of(manifest_digest))
    }

    fn cached(&self, manifest_digest: &str) -> Option<Pulled> {
        let layer_digest = std::fs::read_to_string(self.manifest_path(manifest_digest)).ok()?;
        let path = self.layer_path(&layer_digest);
        path.is_file().then(|| Pulled { manifest_digest: manifest_digest.into(), layer_digest, path })
    }

    fn store(&self, manifest_digest: &str, layer_digest: &str, module: &[u8]) -> Result<Pulled, OciError> {
        let path = self.layer_path(layer_digest);
        write_atomically(&path, module)?;
        write_atomically(&self.manifest_path(manifest_digest), layer_digest.as_bytes())?;
        Ok(Pulled { manifest_digest: manifest_digest.into(), layer_digest: layer_digest.into(), path })
    }
}

/// `sha256:HEX` → `HEX`, safe as a file name whatever a registry sent.
fn hex_of(digest: &str) -> String {
    digest.rsplit(':').next().unwrap_or_default().chars().filter(char::is_ascii_alphanumeric).collect()
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

    #[test]
    fn loopback_registries_speak_plain_http() {
        assert!(Registries::is_loopback("127.0.0.1:5000"));
        assert!(Registries::is_loopback("127.8.0.1"));
        assert!(Registries::is_loopback("localhost:5000"));
        assert!(Registries::is_loopback("[::1]:5000"));
        assert!(!Registries::is_loopback("ghcr.io"));
        assert!(!Registries::is_loopback("127.example.com:5000"));
    }

    #[test]
    fn digests_become_file_names_only() {
        assert_eq!(hex_of("sha256:abc123"), "abc123");
        assert_eq!(hex_of("sha256:../../etc"), "etc");
    }
}
