//! The webhook server's serving certificate and the CA bundle the API server trusts it by. It
//! comes from one of two sources ([`CertSource`]): a directory (a mounted cert-manager Secret),
//! read again as controller-runtime's certwatcher reads it (directory events plus a 10 s poll; a
//! bad new pair keeps the old one); or a CA and certificate the host makes itself and keeps in a
//! Secret every replica shares, renewed before they expire, the CA with an overlap so no request
//! is refused. Either way the TLS configuration hands each new connection the newest certificate:
//! a rotation needs no restart.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use parking_lot::RwLock;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::metrics::CertMetrics;

/// The directory is read again this often even without an event (controller-runtime's
/// certwatcher interval): events can be missed, on a network filesystem say.
const DIR_POLL: Duration = Duration::from_secs(10);
/// After a directory event, the writer's other changes are given this long to land before the
/// pair is read: a writer that is not atomic (tls.crt, then tls.key) would be caught half-way.
const SETTLE: Duration = Duration::from_millis(200);
/// Every replica reads the managed Secret this often: to pick up a certificate another replica
/// renewed, and to renew one that is due.
const SECRET_POLL: Duration = Duration::from_secs(30);
/// The managed CA's validity.
const CA_VALIDITY: Duration = Duration::from_secs(5 * 365 * 24 * 3600);
/// The managed serving certificate's validity.
const SERVING_VALIDITY: Duration = Duration::from_secs(90 * 24 * 3600);
/// Managed certificates start this far in the past, so an API server whose clock is a little
/// behind this replica's accepts a certificate made a moment ago.
const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// A certificate, key or bundle file larger than this is refused without being read: any real
/// one is a few KiB, and a wrong mount must not be read into memory.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Writes of the managed Secret that conflict (another replica wrote first) are retried on what
/// that replica wrote at most this many times in one sync.
const WRITE_ATTEMPTS: usize = 3;

/// The names of the pair and the bundle, in a directory and in the managed Secret (cert-manager's
/// and `kubernetes.io/tls` Secrets' keys).
const TLS_CERT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const CA_CERT: &str = "ca.crt";
/// Only in the managed Secret: the CA's key, and the CA before the current one while it is still
/// valid (the serving certificate may still be signed by it, and API servers may not have the new
/// bundle yet).
const CA_KEY: &str = "ca.key";
const PREVIOUS_CA: &str = "ca-previous.crt";

/// Where the serving certificate comes from.
pub enum CertSource {
    /// A directory with `tls.crt` and `tls.key` (a mounted cert-manager Secret); `ca.crt` if
    /// present is the CA bundle.
    Dir(PathBuf),
    /// The host makes a CA and a serving certificate for `dns_names` (and IP SANs for entries that
    /// parse as IPs), keeps them in Secret `name` in `namespace` shared by every replica, rotates
    /// them before expiry.
    Managed { api: kube::Client, namespace: String, name: String, dns_names: Vec<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is larger than {MAX_FILE_BYTES} bytes, more than any certificate or key needs: not read", path.display())]
    TooLarge { path: PathBuf },
    #[error("{origin} is missing")]
    Missing { origin: String },
    #[error("{origin} holds no PEM certificate: {source}")]
    ParseCertificate {
        origin: String,
        #[source]
        source: pem::Error,
    },
    #[error("{origin} is not an X.509 certificate: {source}")]
    Decode {
        origin: String,
        #[source]
        source: x509_parser::error::X509Error,
    },
    #[error("{origin} holds no PEM private key: {source}")]
    ParseKey {
        origin: String,
        #[source]
        source: pem::Error,
    },
    #[error("the key in {origin} cannot serve the certificate beside it: {source}")]
    Key {
        origin: String,
        #[source]
        source: rustls::Error,
    },
    #[error("{origin}: cannot sign with the CA or make a certificate: {source}")]
    Generate {
        origin: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("cannot set up TLS: {0}")]
    Tls(#[source] rustls::Error),
    #[error("cannot read Secret {namespace}/{name}: {source}")]
    ReadSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create Secret {namespace}/{name}: {source}")]
    CreateSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update Secret {namespace}/{name}: {source}")]
    UpdateSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl CertError {
    /// Another replica wrote the Secret first (it created it, or rotated since it was read).
    fn conflict(&self) -> bool {
        matches!(self, CertError::CreateSecret { source: kube::Error::Api(status), .. } | CertError::UpdateSecret { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

/// The serving certificate, kept fresh by a task until shutdown.
#[derive(Debug, Clone)]
pub struct ServingCerts {
    tls: Arc<rustls::ServerConfig>,
    bundle: watch::Receiver<Option<Arc<[u8]>>>,
}

impl ServingCerts {
    /// Loads the first certificate (an error if none can be had: a missing/bad file, a Secret that
    /// can't be read or made) and spawns the task keeping it fresh until `shutdown`.
    pub async fn start(source: CertSource, metrics: CertMetrics, shutdown: CancellationToken) -> Result<ServingCerts, CertError> {
        match source {
            CertSource::Dir(dir) => {
                let watch = DirWatch::load(dir, metrics).await?;
                let certs = ServingCerts::serving(&watch.current)?;
                tokio::spawn(watch.run(shutdown));
                Ok(certs)
            }
            CertSource::Managed { api, namespace, name, dns_names } => {
                let managed = Managed { secrets: kube::Api::namespaced(api, &namespace), namespace, name, dns_names };
                let first = counted(&metrics, managed.sync(SystemTime::now()).await)?;
                let current = Current::new(first, metrics);
                let certs = ServingCerts::serving(&current)?;
                tokio::spawn(managed.run(current, shutdown));
                Ok(certs)
            }
        }
    }

    fn serving(current: &Current) -> Result<ServingCerts, CertError> {
        Ok(ServingCerts { tls: server_config(current.newest.clone())?, bundle: current.bundle.subscribe() })
    }

    /// The TLS configuration to accept connections with (HTTP/1.1 ALPN): its certificate resolver
    /// always hands out the newest certificate, so a rotation takes effect for new connections
    /// without a restart and established ones are untouched.
    pub fn tls_config(&self) -> Arc<rustls::ServerConfig> {
        self.tls.clone()
    }

    /// The PEM CA bundle the API server should trust (`caBundle` of the configurations), changing
    /// when the CA changes; None when the source has none (a Dir without ca.crt: cert-manager's CA
    /// injector's job).
    pub fn ca_bundle(&self) -> watch::Receiver<Option<Arc<[u8]>>> {
        self.bundle.clone()
    }
}

/// The server configuration over `newest`. HTTP/1.1 only: what the API server speaks to webhooks,
/// and all the webhook server serves.
fn server_config(newest: Arc<Newest>) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(CertError::Tls)?
        .with_no_client_auth()
        .with_cert_resolver(newest);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificate resolver of the TLS configuration: whatever certificate was loaded last.
#[derive(Debug)]
struct Newest(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Newest {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().clone())
    }
}

/// A certificate with its key, ready to serve, and the bundle that came with it.
struct Loaded {
    certified: Arc<CertifiedKey>,
    bundle: Option<Arc<[u8]>>,
}

/// What a reload updates: the certificate new connections get, the published bundle, the read
/// counters.
struct Current {
    newest: Arc<Newest>,
    bundle: watch::Sender<Option<Arc<[u8]>>>,
    metrics: CertMetrics,
}

impl Current {
    fn new(first: Loaded, metrics: CertMetrics) -> Current {
        Current { newest: Arc::new(Newest(RwLock::new(first.certified))), bundle: watch::Sender::new(first.bundle), metrics }
    }

    /// Serves `loaded` from now on; says whether the certificate is a new one. The bundle's
    /// watchers are woken only when it changed, so a poll rereading the same files is silent.
    fn install(&self, loaded: Loaded) -> bool {
        let renewed = {
            let mut newest = self.newest.0.write();
            let renewed = newest.cert != loaded.certified.cert;
            if renewed {
                *newest = loaded.certified;
            }
            renewed
        };
        self.bundle.send_if_modified(|bundle| {
            let changed = *bundle != loaded.bundle;
            if changed {
                *bundle = loaded.bundle;
            }
            changed
        });
        renewed
    }
}

/// Counts a read of the certificate, and its failure, as controller-runtime's certwatcher does.
fn counted<T>(metrics: &CertMetrics, read: Result<T, CertError>) -> Result<T, CertError> {
    metrics.reads.inc();
    if read.is_err() {
        metrics.read_errors.inc();
    }
    read
}

/// A certificate directory, its watch, and what was last loaded from it.
struct DirWatch {
    dir: PathBuf,
    current: Current,
    /// Something changed in the directory. Closed when it could not be watched: the poll alone
    /// reloads then.
    events: tokio::sync::mpsc::UnboundedReceiver<()>,
    /// Watches for as long as this lives.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl DirWatch {
    /// Watches `dir`, then loads it: a change made while the first pair is read is not missed.
    /// The directory is watched rather than the files: a mounted Secret changes by swapping its
    /// `..data` symlink, which leaves the files' own paths untouched.
    async fn load(dir: PathBuf, metrics: CertMetrics) -> Result<DirWatch, CertError> {
        use notify::Watcher;
        let (events_tx, events) = tokio::sync::mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Reading the files raises access events: reacting to them would read forever.
            if let Ok(event) = event
                && !matches!(event.kind, notify::EventKind::Access(_))
            {
                let _ = events_tx.send(());
            }
        })
        .and_then(|mut watcher| watcher.watch(&dir, notify::RecursiveMode::NonRecursive).map(|()| watcher))
        .inspect_err(|e| tracing::warn!(dir = %dir.display(), "cannot watch the webhook certificate directory, polling it: {e}"))
        .ok();
        let first = counted(&metrics, load_dir(&dir).await)?;
        Ok(DirWatch { dir, current: Current::new(first, metrics), events, _watcher: watcher })
    }

    /// Reads the directory again and serves its pair if it is a good one; a bad one leaves the
    /// current certificate in place.
    async fn reload(&self) -> Result<(), CertError> {
        let loaded = counted(&self.current.metrics, load_dir(&self.dir).await)?;
        if self.current.install(loaded) {
            tracing::info!(dir = %self.dir.display(), "serving the webhook certificate the directory now holds");
        }
        Ok(())
    }

    /// Reloads on the directory's events and every [`DIR_POLL`] until `shutdown`.
    async fn run(mut self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(DIR_POLL) => {}
                Some(()) = self.events.recv() => {
                    tokio::time::sleep(SETTLE).await;
                    while self.events.try_recv().is_ok() {}
                }
            }
            if let Err(e) = self.reload().await {
                tracing::warn!(dir = %self.dir.display(), "keeping the current webhook certificate: {e}");
            }
        }
    }
}

/// The pair (and bundle, if any) in `dir`.
async fn load_dir(dir: &Path) -> Result<Loaded, CertError> {
    let (cert_path, key_path, ca_path) = (dir.join(TLS_CERT), dir.join(TLS_KEY), dir.join(CA_CERT));
    let cert = read_bounded(&cert_path).await?;
    let key = read_bounded(&key_path).await?;
    let certified = certified_key(&cert, &cert_path.display().to_string(), &key, &key_path.display().to_string())?;
    let bundle = match read_bounded(&ca_path).await {
        Ok(pem) => {
            certificates(&pem, &ca_path.display().to_string())?;
            Some(Arc::from(pem))
        }
        // The bundle is then someone else's to inject (cert-manager's CA injector).
        Err(CertError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(Loaded { certified, bundle })
}

/// The file at `path`, refused if it is larger than [`MAX_FILE_BYTES`].
async fn read_bounded(path: &Path) -> Result<Vec<u8>, CertError> {
    let failed = |source| CertError::Read { path: path.to_path_buf(), source };
    let file = tokio::fs::File::open(path).await.map_err(failed)?;
    if file.metadata().await.map_err(failed)?.len() > MAX_FILE_BYTES {
        return Err(CertError::TooLarge { path: path.to_path_buf() });
    }
    // Bounded again while reading: the file may have grown since its size was asked.
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).await.map_err(failed)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(CertError::TooLarge { path: path.to_path_buf() });
    }
    Ok(bytes)
}

/// The X.509 certificates of a PEM file, at least one.
fn certificates(pem_bytes: &[u8], origin: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CertError::ParseCertificate { origin: origin.into(), source })?;
    if certs.is_empty() {
        return Err(CertError::ParseCertificate { origin: origin.into(), source: pem::Error::NoItemsFound });
    }
    for cert in &certs {
        x509_parser::parse_x509_certificate(cert).map_err(|e| CertError::Decode { origin: origin.into(), source: e.into() })?;
    }
    Ok(certs)
}

/// A certificate chain and its key, checked to belong together.
fn certified_key(cert: &[u8], cert_origin: &str, key: &[u8], key_origin: &str) -> Result<Arc<CertifiedKey>, CertError> {
    let chain = certificates(cert, cert_origin)?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|source| CertError::ParseKey { origin: key_origin.into(), source })?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|source| CertError::Key { origin: key_origin.into(), source })?;
    Ok(Arc::new(certified))
}

/// Whether a certificate valid from `not_before` to `not_after` is to be renewed at `now`: once
/// less than a third of its validity remains (cert-manager's default): the third left (30 days of
/// a serving certificate, 20 months of the CA) is for every replica's poll and the API servers'
/// bundle to catch up, and for a host that was down to renew late but in time.
fn due(not_before: SystemTime, not_after: SystemTime, now: SystemTime) -> bool {
    let Ok(validity) = not_after.duration_since(not_before) else {
        return true;
    };
    match not_after.duration_since(now) {
        Ok(remaining) => remaining < validity / 3,
        Err(_) => true,
    }
}

/// What renewal looks at in a certificate.
struct Inspected {
    not_before: SystemTime,
    not_after: SystemTime,
    /// The subject alternative names, as `dns_names` spells them.
    names: Vec<String>,
}

fn inspect(pem_text: &str, origin: &str) -> Result<Inspected, CertError> {
    let der = certificates(pem_text.as_bytes(), origin)?.swap_remove(0);
    let decode = |source| CertError::Decode { origin: origin.into(), source };
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| decode(e.into()))?;
    let instant = |t: &x509_parser::time::ASN1Time| UNIX_EPOCH + Duration::from_secs(t.timestamp().max(0).unsigned_abs());
    let mut names = Vec::new();
    if let Some(san) = cert.subject_alternative_name().map_err(decode)? {
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(dns) => names.push(dns.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(ip) => match <[u8; 4]>::try_from(*ip) {
                    Ok(v4) => names.push(std::net::Ipv4Addr::from(v4).to_string()),
                    Err(_) => names.extend(<[u8; 16]>::try_from(*ip).ok().map(|v6| std::net::Ipv6Addr::from(v6).to_string())),
                },
                _ => {}
            }
        }
    }
    Ok(Inspected { not_before: instant(&cert.validity().not_before), not_after: instant(&cert.validity().not_after), names })
}

/// `dns_names` as [`Inspected::names`] spells them, to compare: sorted, IPs in their canonical
/// form.
fn wanted_names(dns_names: &[String]) -> Vec<String> {
    let mut names: Vec<String> = dns_names.iter().map(|name| name.parse::<std::net::IpAddr>().map_or_else(|_| name.clone(), |ip| ip.to_string())).collect();
    names.sort();
    names.dedup();
    names
}

/// A PEM certificate and its PEM key.
struct Pair {
    cert: String,
    key: String,
}

/// A new self-signed CA valid for [`CA_VALIDITY`] from `now`. Its name carries the time, so two
/// CAs in one bundle are told apart (as client-go names its self-signed CAs).
fn new_ca(now: SystemTime, origin: &str) -> Result<Pair, CertError> {
    let generate = |source| CertError::Generate { origin: origin.into(), source };
    let mut params = rcgen::CertificateParams::default();
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("kubewasm-webhook-ca@{since}"));
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign, rcgen::KeyUsagePurpose::DigitalSignature];
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + CA_VALIDITY).into();
    let key = rcgen::KeyPair::generate().map_err(generate)?;
    let cert = params.self_signed(&key).map_err(generate)?;
    Ok(Pair { cert: cert.pem(), key: key.serialize_pem() })
}

/// A serving certificate for `dns_names` signed by `ca`, valid for [`SERVING_VALIDITY`] from
/// `now` but never past the CA (a certificate outliving its issuer would be refused before it is
/// due).
fn issue(ca: &Pair, dns_names: &[String], now: SystemTime, origin: &str) -> Result<Pair, CertError> {
    let generate = |source| CertError::Generate { origin: origin.into(), source };
    let ca_until = inspect(&ca.cert, origin)?.not_after;
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert, rcgen::KeyPair::from_pem(&ca.key).map_err(generate)?).map_err(generate)?;
    let mut params = rcgen::CertificateParams::new(dns_names.to_vec()).map_err(generate)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, dns_names.first().map_or("kubewasm-webhook", String::as_str));
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + SERVING_VALIDITY).min(ca_until).into();
    let key = rcgen::KeyPair::generate().map_err(generate)?;
    let cert = params.signed_by(&key, &issuer).map_err(generate)?;
    Ok(Pair { cert: cert.pem(), key: key.serialize_pem() })
}

/// The managed Secret's contents: the CA, the CA before it while that is still valid, and the
/// serving certificate.
#[derive(Clone, PartialEq)]
struct Issued {
    ca_cert: String,
    ca_key: String,
    previous_ca: Option<String>,
    tls_cert: String,
    tls_key: String,
}

impl Issued {
    /// A new CA and a serving certificate signed by it.
    fn generate(dns_names: &[String], now: SystemTime, origin: &str) -> Result<Issued, CertError> {
        let ca = new_ca(now, origin)?;
        let serving = issue(&ca, dns_names, now, origin)?;
        Ok(Issued { ca_cert: ca.cert, ca_key: ca.key, previous_ca: None, tls_cert: serving.cert, tls_key: serving.key })
    }

    /// What is to be written instead at `now`, if anything. A CA that is due is replaced, and kept
    /// in the bundle as the previous CA until it expires; a serving certificate that is due, or
    /// that does not name `dns_names`, is issued again. When both happen at once the serving
    /// certificate is signed by the outgoing CA, which every API server already trusts; the
    /// next renewal moves it to the new CA, long after the bundle carrying that one went out.
    fn renewed(&self, dns_names: &[String], now: SystemTime, origin: &str) -> Result<Option<Issued>, CertError> {
        let mut next = self.clone();
        if let Some(previous) = &self.previous_ca
            && inspect(previous, origin)?.not_after <= now
        {
            next.previous_ca = None;
        }
        let ca = inspect(&self.ca_cert, origin)?;
        let signer = Pair { cert: self.ca_cert.clone(), key: self.ca_key.clone() };
        let signer = if due(ca.not_before, ca.not_after, now) {
            let fresh = new_ca(now, origin)?;
            (next.ca_cert, next.ca_key) = (fresh.cert.clone(), fresh.key.clone());
            if ca.not_after > now {
                next.previous_ca = Some(self.ca_cert.clone());
                signer
            } else {
                // The outgoing CA has expired: nothing it signs would be accepted.
                fresh
            }
        } else {
            signer
        };
        let serving = inspect(&self.tls_cert, origin)?;
        if due(serving.not_before, serving.not_after, now) || wanted_names(&serving.names) != wanted_names(dns_names) {
            let pair = issue(&signer, dns_names, now, origin)?;
            (next.tls_cert, next.tls_key) = (pair.cert, pair.key);
        }
        Ok((next != *self).then_some(next))
    }

    /// The CA bundle: the current CA, then the previous one while it is kept.
    fn bundle(&self) -> Arc<[u8]> {
        let mut bundle = self.ca_cert.clone();
        if let Some(previous) = &self.previous_ca {
            if !bundle.ends_with('\n') {
                bundle.push('\n');
            }
            bundle.push_str(previous);
        }
        Arc::from(bundle.into_bytes())
    }

    fn load(&self, origin: &str) -> Result<Loaded, CertError> {
        let certified = certified_key(self.tls_cert.as_bytes(), &format!("{origin} {TLS_CERT}"), self.tls_key.as_bytes(), &format!("{origin} {TLS_KEY}"))?;
        Ok(Loaded { certified, bundle: Some(self.bundle()) })
    }

    /// The contents of `secret`, checked to be usable: the pair serves, the CA can sign.
    fn from_secret(secret: &Secret, origin: &str) -> Result<Issued, CertError> {
        let get = |key: &str| secret.data.as_ref().and_then(|data| data.get(key)).map(|value| String::from_utf8_lossy(&value.0).into_owned());
        let need = |key: &str| get(key).ok_or_else(|| CertError::Missing { origin: format!("{origin} {key}") });
        let issued =
            Issued { ca_cert: need(CA_CERT)?, ca_key: need(CA_KEY)?, previous_ca: get(PREVIOUS_CA), tls_cert: need(TLS_CERT)?, tls_key: need(TLS_KEY)? };
        issued.load(origin)?;
        inspect(&issued.ca_cert, &format!("{origin} {CA_CERT}"))?;
        rcgen::KeyPair::from_pem(&issued.ca_key).map_err(|source| CertError::Generate { origin: format!("{origin} {CA_KEY}"), source })?;
        if let Some(previous) = &issued.previous_ca {
            inspect(previous, &format!("{origin} {PREVIOUS_CA}"))?;
        }
        Ok(issued)
    }

    /// Writes the contents into `secret`'s data, leaving its other keys alone.
    fn write_into(&self, secret: &mut Secret) {
        let data = secret.data.get_or_insert_with(BTreeMap::new);
        for (key, value) in [(CA_CERT, &self.ca_cert), (CA_KEY, &self.ca_key), (TLS_CERT, &self.tls_cert), (TLS_KEY, &self.tls_key)] {
            data.insert(key.into(), ByteString(value.clone().into_bytes()));
        }
        match &self.previous_ca {
            Some(previous) => data.insert(PREVIOUS_CA.into(), ByteString(previous.clone().into_bytes())),
            None => data.remove(PREVIOUS_CA),
        };
    }
}

/// The managed Secret, and the names its serving certificate is for.
struct Managed {
    secrets: kube::Api<Secret>,
    namespace: String,
    name: String,
    dns_names: Vec<String>,
}

impl Managed {
    /// How errors and logs name the Secret.
    fn origin(&self) -> String {
        format!("Secret {}/{}", self.namespace, self.name)
    }

    /// Reads the Secret, makes it or renews what is due in it, and returns the certificate it
    /// holds then. A write that conflicts means another replica wrote first: what it wrote is read
    /// and judged instead.
    async fn sync(&self, now: SystemTime) -> Result<Loaded, CertError> {
        let origin = self.origin();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let written = match self.read().await? {
                None => {
                    let issued = Issued::generate(&self.dns_names, now, &origin)?;
                    self.create(&issued).await.map(|()| issued)
                }
                Some(mut secret) => {
                    let next = match Issued::from_secret(&secret, &origin) {
                        Ok(issued) => match issued.renewed(&self.dns_names, now, &origin)? {
                            None => return issued.load(&origin),
                            Some(next) => {
                                log_renewal(&issued, &next, &origin);
                                next
                            }
                        },
                        Err(e) => {
                            tracing::warn!(secret = %origin, "making a new webhook CA and certificate in place of unusable ones: {e}");
                            Issued::generate(&self.dns_names, now, &origin)?
                        }
                    };
                    next.write_into(&mut secret);
                    self.update(&secret).await.map(|()| next)
                }
            };
            match written {
                Ok(issued) => return issued.load(&origin),
                Err(e) if e.conflict() && attempt < WRITE_ATTEMPTS => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Syncs every [`SECRET_POLL`] until `shutdown`, serving what the Secret holds.
    async fn run(self, current: Current, shutdown: CancellationToken) {
        let origin = self.origin();
        loop {
            let synced = tokio::select! {
                _ = shutdown.cancelled() => return,
                synced = async {
                    tokio::time::sleep(SECRET_POLL).await;
                    self.sync(SystemTime::now()).await
                } => synced,
            };
            match counted(&current.metrics, synced) {
                Ok(loaded) => {
                    if current.install(loaded) {
                        tracing::info!(secret = %origin, "serving the webhook certificate the Secret now holds");
                    }
                }
                Err(e) => tracing::warn!(secret = %origin, "keeping the current webhook certificate: {e}"),
            }
        }
    }

    async fn read(&self) -> Result<Option<Secret>, CertError> {
        self.secrets.get_opt(&self.name).await.map_err(|source| CertError::ReadSecret { namespace: self.namespace.clone(), name: self.name.clone(), source })
    }

    async fn create(&self, issued: &Issued) -> Result<(), CertError> {
        let mut secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some([("app.kubernetes.io/managed-by".to_owned(), "kubewasm".to_owned())].into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            ..Secret::default()
        };
        issued.write_into(&mut secret);
        self.secrets.create(&PostParams::default(), &secret).await.map(drop).map_err(|source| CertError::CreateSecret {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        })
    }

    /// Replaces the Secret as it was read: its resourceVersion makes the write fail if another
    /// replica wrote in between, and its type and other keys are kept.
    async fn update(&self, secret: &Secret) -> Result<(), CertError> {
        self.secrets.replace(&self.name, &PostParams::default(), secret).await.map(drop).map_err(|source| CertError::UpdateSecret {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        })
    }
}

fn log_renewal(before: &Issued, after: &Issued, origin: &str) {
    if before.ca_cert != after.ca_cert {
        tracing::info!(secret = %origin, "making a new webhook CA: the bundle carries the previous one too until it expires");
    }
    if before.tls_cert != after.tls_cert {
        tracing::info!(secret = %origin, "renewing the webhook serving certificate");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);
    const ORIGIN: &str = "Secret test/webhook";

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    fn write_pair(dir: &Path, issued: &Issued, with_ca: bool) {
        std::fs::write(dir.join(TLS_CERT), &issued.tls_cert).unwrap();
        std::fs::write(dir.join(TLS_KEY), &issued.tls_key).unwrap();
        if with_ca {
            std::fs::write(dir.join(CA_CERT), &issued.ca_cert).unwrap();
        }
    }

    fn served(current: &Current) -> Vec<CertificateDer<'static>> {
        current.newest.0.read().cert.clone()
    }

    fn der(pem_text: &str) -> Vec<CertificateDer<'static>> {
        certificates(pem_text.as_bytes(), "test").unwrap()
    }

    /// A TLS handshake over an in-memory pipe between `server` and a client trusting only
    /// `bundle`, reaching the server as `name`: the certificates the server presented.
    async fn handshake(server: Arc<rustls::ServerConfig>, bundle: &[u8], name: &str) -> io::Result<Vec<CertificateDer<'static>>> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(bundle) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let (client_end, server_end) = tokio::io::duplex(64 * 1024);
        let name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let (accepted, connected) = tokio::join!(
            tokio_rustls::TlsAcceptor::from(server).accept(server_end),
            tokio_rustls::TlsConnector::from(Arc::new(client)).connect(name, client_end)
        );
        let connected = connected?;
        accepted?;
        assert_eq!(connected.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        Ok(connected.get_ref().1.peer_certificates().unwrap().to_vec())
    }

    fn serving(issued: &Issued) -> Arc<rustls::ServerConfig> {
        let loaded = issued.load(ORIGIN).unwrap();
        server_config(Arc::new(Newest(RwLock::new(loaded.certified)))).unwrap()
    }

    #[tokio::test]
    async fn dir_loads_the_pair_and_its_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let issued = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        write_pair(dir.path(), &issued, true);
        let metrics = CertMetrics::default();
        let watch = DirWatch::load(dir.path().into(), metrics.clone()).await.unwrap();
        assert!(served(&watch.current) == der(&issued.tls_cert));
        assert_eq!(watch.current.bundle.borrow().as_deref(), Some(issued.ca_cert.as_bytes()));
        assert_eq!((metrics.reads.get(), metrics.read_errors.get()), (1, 0));

        // Without ca.crt there is no bundle to publish: cert-manager's CA injector's job.
        std::fs::remove_file(dir.path().join(CA_CERT)).unwrap();
        let watch = DirWatch::load(dir.path().into(), CertMetrics::default()).await.unwrap();
        assert!(watch.current.bundle.borrow().is_none());
    }

    #[tokio::test]
    async fn dir_rewritten_pair_is_picked_up() {
        let dir = tempfile::tempdir().unwrap();
        let first = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        write_pair(dir.path(), &first, true);
        let watch = DirWatch::load(dir.path().into(), CertMetrics::default()).await.unwrap();
        let mut bundle = watch.current.bundle.subscribe();
        bundle.borrow_and_update();

        let second = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        write_pair(dir.path(), &second, true);
        watch.reload().await.unwrap();
        assert!(served(&watch.current) == der(&second.tls_cert));
        assert!(bundle.has_changed().unwrap());
        assert_eq!(bundle.borrow_and_update().as_deref(), Some(second.ca_cert.as_bytes()));

        // Rereading the same files wakes no one.
        watch.reload().await.unwrap();
        assert!(!bundle.has_changed().unwrap());
    }

    #[tokio::test]
    async fn dir_broken_pair_keeps_the_old_one_and_counts_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let issued = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        write_pair(dir.path(), &issued, true);
        let metrics = CertMetrics::default();
        let watch = DirWatch::load(dir.path().into(), metrics.clone()).await.unwrap();

        std::fs::write(dir.path().join(TLS_CERT), "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n").unwrap();
        let error = watch.reload().await.unwrap_err();
        assert!(matches!(&error, CertError::Decode { origin, .. } if origin.ends_with(TLS_CERT)), "{error}");
        std::fs::write(dir.path().join(TLS_CERT), "not PEM at all").unwrap();
        let error = watch.reload().await.unwrap_err();
        assert!(matches!(&error, CertError::ParseCertificate { origin, .. } if origin.ends_with(TLS_CERT)), "{error}");

        assert!(served(&watch.current) == der(&issued.tls_cert));
        assert_eq!((metrics.reads.get(), metrics.read_errors.get()), (3, 2));
    }

    #[tokio::test]
    async fn dir_key_not_matching_the_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let one = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        let other = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        std::fs::write(dir.path().join(TLS_CERT), &one.tls_cert).unwrap();
        std::fs::write(dir.path().join(TLS_KEY), &other.tls_key).unwrap();
        let error = DirWatch::load(dir.path().into(), CertMetrics::default()).await.err().unwrap();
        assert!(matches!(&error, CertError::Key { source: rustls::Error::InconsistentKeys(_), .. }), "{error}");
    }

    #[tokio::test]
    async fn dir_oversized_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let issued = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        write_pair(dir.path(), &issued, false);
        let mut big = issued.tls_cert.clone().into_bytes();
        big.resize(MAX_FILE_BYTES as usize + 1, b'\n');
        std::fs::write(dir.path().join(TLS_CERT), big).unwrap();
        let error = DirWatch::load(dir.path().into(), CertMetrics::default()).await.err().unwrap();
        assert!(matches!(&error, CertError::TooLarge { path } if path.ends_with(TLS_CERT)), "{error}");
        assert!(error.to_string().contains("larger than 1048576 bytes"), "{error}");
    }

    /// A mounted Secret's update as the kubelet makes it: the files are symlinks through `..data`,
    /// which is swapped to a new directory in one rename.
    #[tokio::test]
    async fn dir_watcher_follows_a_secret_mount_swap() {
        let dir = tempfile::tempdir().unwrap();
        let mount = |version: &str, issued: &Issued| {
            let data = dir.path().join(version);
            std::fs::create_dir(&data).unwrap();
            write_pair(&data, issued, true);
            std::os::unix::fs::symlink(version, dir.path().join("..data_tmp")).unwrap();
            std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
        };
        let first = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        mount("..v1", &first);
        for file in [TLS_CERT, TLS_KEY, CA_CERT] {
            std::os::unix::fs::symlink(format!("..data/{file}"), dir.path().join(file)).unwrap();
        }
        let shutdown = CancellationToken::new();
        let certs = ServingCerts::start(CertSource::Dir(dir.path().into()), CertMetrics::default(), shutdown.clone()).await.unwrap();
        let mut bundle = certs.ca_bundle();
        assert_eq!(bundle.borrow_and_update().as_deref(), Some(first.ca_cert.as_bytes()));

        let second = Issued::generate(&names(&["webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        mount("..v2", &second);
        // Well inside the 10 s poll: only the event can have woken it.
        tokio::time::timeout(Duration::from_secs(5), bundle.changed()).await.expect("the swap was noticed").unwrap();
        assert_eq!(bundle.borrow().as_deref(), Some(second.ca_cert.as_bytes()));
        let presented = handshake(certs.tls_config(), second.ca_cert.as_bytes(), "webhook.test.svc").await.unwrap();
        assert!(presented == der(&second.tls_cert));
        shutdown.cancel();
    }

    #[tokio::test]
    async fn managed_certificate_serves_tls_for_its_names_and_ips() {
        let issued = Issued::generate(&names(&["127.0.0.1", "webhook.test.svc"]), SystemTime::now(), ORIGIN).unwrap();
        let presented = handshake(serving(&issued), &issued.bundle(), "127.0.0.1").await.unwrap();
        let (_, leaf) = x509_parser::parse_x509_certificate(&presented[0]).unwrap();
        let sans = &leaf.subject_alternative_name().unwrap().unwrap().value.general_names;
        assert!(sans.contains(&x509_parser::extensions::GeneralName::IPAddress(&[127, 0, 0, 1])), "{sans:?}");
        assert!(sans.contains(&x509_parser::extensions::GeneralName::DNSName("webhook.test.svc")), "{sans:?}");
        handshake(serving(&issued), &issued.bundle(), "webhook.test.svc").await.unwrap();
        // A name the certificate does not carry is refused.
        assert!(handshake(serving(&issued), &issued.bundle(), "other.test.svc").await.is_err());
    }

    #[test]
    fn due_once_less_than_a_third_remains() {
        let start = UNIX_EPOCH + 1000 * DAY;
        let end = start + 90 * DAY;
        assert!(!due(start, end, start));
        assert!(!due(start, end, start + 60 * DAY), "exactly a third remains");
        assert!(due(start, end, start + 60 * DAY + Duration::from_secs(1)));
        assert!(due(start, end, end));
        assert!(due(start, end, end + DAY));
        assert!(!due(start, end, start - DAY), "not yet valid is not due");
        assert!(due(end, start, start), "a validity that ends before it starts");
    }

    #[test]
    fn serving_certificate_is_renewed_by_the_same_ca() {
        let dns = names(&["webhook.test.svc"]);
        let start = SystemTime::now();
        let issued = Issued::generate(&dns, start, ORIGIN).unwrap();
        assert!(issued.renewed(&dns, start + DAY, ORIGIN).unwrap().is_none());
        assert!(issued.renewed(&dns, start + 59 * DAY, ORIGIN).unwrap().is_none());

        let renewed = issued.renewed(&dns, start + 61 * DAY, ORIGIN).unwrap().expect("due");
        assert!(renewed.tls_cert != issued.tls_cert);
        assert!((&renewed.ca_cert, &renewed.ca_key, &renewed.previous_ca) == (&issued.ca_cert, &issued.ca_key, &None));
        assert!(renewed.bundle() == issued.bundle(), "the bundle does not change");
        assert!(inspect(&renewed.tls_cert, ORIGIN).unwrap().not_after > start + 150 * DAY);
        // Signed by the CA: a client trusting the unchanged bundle accepts it.
        renewed.load(ORIGIN).unwrap();
    }

    #[test]
    fn changed_names_reissue_the_serving_certificate() {
        let start = SystemTime::now();
        let issued = Issued::generate(&names(&["webhook.test.svc", "10.0.0.1"]), start, ORIGIN).unwrap();
        // The same names in another order or spelling are the same.
        assert!(issued.renewed(&names(&["10.0.0.1", "webhook.test.svc"]), start, ORIGIN).unwrap().is_none());
        let renamed = issued.renewed(&names(&["webhook.other.svc", "::1"]), start, ORIGIN).unwrap().expect("names changed");
        assert_eq!(wanted_names(&inspect(&renamed.tls_cert, ORIGIN).unwrap().names), names(&["::1", "webhook.other.svc"]));
        assert!(renamed.ca_cert == issued.ca_cert);
    }

    /// Made four years ago, the CA is due now: the bundle carries both CAs, and a client trusting
    /// only the bundle accepts a certificate signed by either.
    #[tokio::test]
    async fn ca_rotation_overlaps_the_old_and_new_ca() {
        let dns = names(&["127.0.0.1"]);
        let now = SystemTime::now();
        let made = now - 4 * 365 * DAY;
        let old = Issued::generate(&dns, made, ORIGIN).unwrap();
        let rotated = old.renewed(&dns, now, ORIGIN).unwrap().expect("the CA and the certificate are due");
        assert!(rotated.ca_cert != old.ca_cert && rotated.ca_key != old.ca_key);
        assert!(rotated.previous_ca.as_ref() == Some(&old.ca_cert));
        let bundle = rotated.bundle();
        assert_eq!(certificates(&bundle, "bundle").unwrap().len(), 2);

        // The certificate renewed in the same step is signed by the old CA, which API servers
        // without the new bundle still trust.
        let only_old = handshake(serving(&rotated), old.ca_cert.as_bytes(), "127.0.0.1").await.unwrap();
        assert!(only_old == der(&rotated.tls_cert));
        handshake(serving(&rotated), &bundle, "127.0.0.1").await.unwrap();

        // Signed by the new CA (as the next renewal will be): the same bundle accepts it.
        let pair = issue(&Pair { cert: rotated.ca_cert.clone(), key: rotated.ca_key.clone() }, &dns, now, ORIGIN).unwrap();
        let by_new = Issued { tls_cert: pair.cert, tls_key: pair.key, ..rotated.clone() };
        handshake(serving(&by_new), &bundle, "127.0.0.1").await.unwrap();
        assert!(handshake(serving(&by_new), old.ca_cert.as_bytes(), "127.0.0.1").await.is_err());

        // The next renewal moves to the new CA; the old one leaves the bundle once expired.
        let later = rotated.renewed(&dns, now + 80 * DAY, ORIGIN).unwrap().expect("due");
        let names_of = |pem_text: &str| {
            let der = der(pem_text).swap_remove(0);
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            (cert.issuer().to_string(), cert.subject().to_string())
        };
        assert_eq!(names_of(&later.tls_cert).0, names_of(&rotated.ca_cert).1);
        assert!(later.previous_ca.is_some());
        let expired = later.renewed(&dns, made + 5 * 365 * DAY + DAY, ORIGIN).unwrap().expect("due");
        assert!(expired.previous_ca.is_none());
        assert!(expired.bundle() == Arc::<[u8]>::from(later.ca_cert.clone().into_bytes()));
    }

    #[test]
    fn secret_contents_round_trip() {
        let dns = names(&["webhook.test.svc"]);
        let now = SystemTime::now();
        let issued = Issued { previous_ca: Some(Issued::generate(&dns, now, ORIGIN).unwrap().ca_cert), ..Issued::generate(&dns, now, ORIGIN).unwrap() };
        let mut secret = Secret { data: Some([("other".to_owned(), ByteString(b"kept".to_vec()))].into()), ..Secret::default() };
        issued.write_into(&mut secret);
        assert!(Issued::from_secret(&secret, ORIGIN).unwrap() == issued);
        assert_eq!(secret.data.as_ref().unwrap()["other"].0, b"kept");

        let without_previous = Issued { previous_ca: None, ..issued };
        without_previous.write_into(&mut secret);
        assert!(!secret.data.as_ref().unwrap().contains_key(PREVIOUS_CA));

        secret.data.as_mut().unwrap().remove(CA_KEY);
        let error = Issued::from_secret(&secret, ORIGIN).err().unwrap();
        assert_eq!(error.to_string(), "Secret test/webhook ca.key is missing");
    }
}
