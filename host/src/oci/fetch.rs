//! The HTTP side of pulls, bounded: every body is read with a running count against a cap (a
//! `Content-Length` over it is refused before reading), redirects are followed at most
//! [`MAX_REDIRECTS`] times and never from HTTPS to plain HTTP, never to plain HTTP outside
//! loopback and `--insecure-registry` hosts, and never to a loopback or link-local address unless
//! the registry itself is on one (names are checked once resolved, so a DNS name pointing at
//! 127.0.0.1 or 169.254.169.254 is no way around it). A response that is not a success is reduced
//! to its status and the OCI error codes it names: no body text reaches an error, which ends up in
//! a Plugin's status and Events.
//!
//! Written on reqwest rather than through oci-client (which the host still uses to push):
//! oci-client 0.18 reads manifests, error bodies and token answers whole, and sets no redirect
//! policy of its own — none of which can be configured from outside. The registry token flow
//! (a `401` with a `Bearer` challenge, then the realm's token) is the few lines of the
//! distribution spec it needs; the challenge is parsed by `http-auth`, as oci-client does.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oci_client::secrets::RegistryAuth;
use parking_lot::Mutex;
use reqwest::{Method, Response, StatusCode, Url};

/// Redirects followed for one request (a registry sends a blob to its storage once, usually).
pub const MAX_REDIRECTS: usize = 5;
/// What is read of an error response, for its OCI error codes only.
const MAX_ERROR_BODY: u64 = 16 << 10;
/// A token service's answer.
const MAX_TOKEN_BODY: u64 = 64 << 10;
/// How long a token is kept when the service does not say.
const DEFAULT_TOKEN_LIFE: Duration = Duration::from_secs(60);

/// What a request of a pull failed on. No variant carries response text.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Connecting, a read timing out, a broken connection.
    #[error("{method} {url}: {message}")]
    Transport { method: Method, url: String, message: String },
    #[error("{method} {url}: refused a redirect: {why}")]
    Redirect { method: Method, url: String, why: String },
    #[error("{method} {url}: {status}{}", codes_suffix(.codes))]
    Status { method: Method, url: String, status: StatusCode, codes: Vec<String> },
    #[error("{method} {url}: the body is longer than {limit} bytes ({what})")]
    TooLarge { method: Method, url: String, limit: u64, what: &'static str },
    #[error("the token service of {registry} ({realm}): {message}")]
    Token { registry: String, realm: String, message: String },
}

fn codes_suffix(codes: &[String]) -> String {
    if codes.is_empty() { String::new() } else { format!(" ({})", codes.join(", ")) }
}

impl FetchError {
    /// A condition reason for it.
    pub fn reason(&self) -> &'static str {
        match self {
            FetchError::Transport { .. } => "RegistryUnreachable",
            FetchError::Redirect { .. } => "RedirectRefused",
            FetchError::Status { status, .. } if *status == StatusCode::UNAUTHORIZED || *status == StatusCode::FORBIDDEN => "Unauthorized",
            FetchError::Status { status, codes, .. }
                if *status == StatusCode::NOT_FOUND || codes.iter().any(|c| matches!(c.as_str(), "MANIFEST_UNKNOWN" | "NAME_UNKNOWN" | "BLOB_UNKNOWN")) =>
            {
                "NotFound"
            }
            FetchError::Status { status, .. } if status.is_server_error() => "RegistryUnreachable",
            FetchError::Status { .. } => "PullFailed",
            FetchError::TooLarge { .. } => "TooLarge",
            FetchError::Token { .. } => "Unauthorized",
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.reason() == "NotFound"
    }
}

/// Whether `host` (a name or an IP literal, without port) is loopback, as far as its text says.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Splits `HOST[:PORT]` into the host.
pub fn host_of(registry: &str) -> &str {
    match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !host.ends_with(':') => host,
        _ => registry,
    }
}

/// An address no registry reached by name should send the host to: loopback (sidecars' admin
/// ports), unspecified, link-local (cloud metadata services at 169.254.169.254).
fn is_local_addr(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified() || v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// Registries the host may speak plain HTTP to and that may send it to local addresses: those
/// on loopback and those named with `--insecure-registry`.
#[derive(Debug, Clone, Default)]
pub struct Trusted {
    insecure: Arc<[String]>,
}

impl Trusted {
    pub fn new(insecure: &[String]) -> Self {
        Trusted { insecure: insecure.iter().map(|r| r.to_ascii_lowercase()).collect() }
    }

    /// `registry` is `HOST[:PORT]`.
    pub fn is_trusted(&self, registry: &str) -> bool {
        let registry = registry.to_ascii_lowercase();
        is_loopback_host(host_of(&registry)) || self.insecure.iter().any(|r| *r == registry || r == host_of(&registry))
    }

    fn url_trusted(&self, url: &Url) -> bool {
        url.host_str().is_some_and(|host| self.is_trusted(&authority(url, host)))
    }

    /// The scheme the host speaks to `registry`.
    pub fn scheme(&self, registry: &str) -> &'static str {
        if self.is_trusted(registry) { "http" } else { "https" }
    }

    /// Whether a request that started at `origin` and came to `from` may go on to `to`: the
    /// rules of the module's header.
    pub fn verdict(&self, origin: &Url, from: &Url, to: &Url) -> Result<(), String> {
        let place = |u: &Url| format!("{}://{}", u.scheme(), u.host_str().map(|h| authority(u, h)).unwrap_or_default());
        match to.scheme() {
            "https" => {}
            "http" if from.scheme() == "https" => return Err(format!("from HTTPS to plain HTTP ({})", place(to))),
            "http" if !self.url_trusted(to) => return Err(format!("plain HTTP to {}, which is neither on loopback nor an --insecure-registry", place(to))),
            "http" => {}
            other => return Err(format!("to a {other:?} URL")),
        }
        let local =
            to.host_str().is_some_and(|h| is_loopback_host(h) || h.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok_and(is_local_addr));
        if local && !self.url_trusted(origin) {
            return Err(format!("to a loopback or link-local address ({}) from a registry that is not on loopback", place(to)));
        }
        Ok(())
    }
}

/// `HOST` or `HOST:PORT` as the URL names it.
fn authority(url: &Url, host: &str) -> String {
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// Resolves names as the system does, then drops local addresses unless the name is trusted.
struct GuardedResolver {
    trusted: Trusted,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_string();
        let trusted = self.trusted.is_trusted(&name);
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = addrs.iter().copied().filter(|a| trusted || !is_local_addr(a.ip())).collect();
            if kept.is_empty() && !addrs.is_empty() {
                return Err(format!("{name} resolves only to loopback or link-local addresses, and is not an --insecure-registry").into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A redirect refused by [`Trusted::verdict`], found again in reqwest's error chain.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RefusedRedirect(String);

/// Who asks: the repository's scope for tokens, and the credentials of the docker config.
pub struct Scope<'a> {
    pub registry: &'a str,
    pub repository: &'a str,
    pub auth: &'a RegistryAuth,
}

/// How a request after a challenge authenticates.
enum Authorization {
    Bearer(String),
    /// The docker config's user and password.
    Basic,
}

/// Bounded requests to registries; keeps tokens per repository.
pub struct Fetcher {
    http: reqwest::Client,
    trusted: Trusted,
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl Fetcher {
    /// `timeout` bounds connecting and each read; the caller bounds the whole pull.
    pub fn new(trusted: Trusted, timeout: Duration, user_agent: &str) -> Fetcher {
        let policy = {
            let trusted = trusted.clone();
            reqwest::redirect::Policy::custom(move |attempt| {
                let previous = attempt.previous();
                if previous.len() > MAX_REDIRECTS {
                    return attempt.error(RefusedRedirect(format!("more than {MAX_REDIRECTS} redirects")));
                }
                let (origin, from) = (previous.first().cloned(), previous.last().cloned());
                match (origin, from) {
                    (Some(origin), Some(from)) => match trusted.verdict(&origin, &from, attempt.url()) {
                        Ok(()) => attempt.follow(),
                        Err(why) => attempt.error(RefusedRedirect(why)),
                    },
                    _ => attempt.follow(),
                }
            })
        };
        let http = reqwest::Client::builder()
            .redirect(policy)
            .dns_resolver(GuardedResolver { trusted: trusted.clone() })
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .user_agent(user_agent)
            .build()
            .expect("a reqwest client with no custom TLS builds");
        Fetcher { http, trusted, tokens: Mutex::default() }
    }

    pub fn trusted(&self) -> &Trusted {
        &self.trusted
    }

    /// `/v2/REPOSITORY/{kind}/{reference}` of `scope`'s registry.
    pub fn url(&self, scope: &Scope<'_>, kind: &str, reference: &str) -> Result<Url, FetchError> {
        let text = format!("{}://{}/v2/{}/{kind}/{reference}", self.trusted.scheme(scope.registry), scope.registry, scope.repository);
        Url::parse(&text).map_err(|e| FetchError::Transport { method: Method::GET, url: text, message: format!("not a URL: {e}") })
    }

    /// Sends `method url` with the scope's credentials, answering a registry's challenge once.
    /// `Ok` only for a success; anything else is a [`FetchError::Status`] (its body read only for
    /// the OCI error codes).
    pub async fn send(&self, method: Method, url: &Url, scope: &Scope<'_>, accept: &str) -> Result<Response, FetchError> {
        let key = format!("{}/{}", scope.registry, scope.repository);
        let mut authorization = self.cached_token(&key).map(Authorization::Bearer);
        let mut challenged = false;
        loop {
            let mut request = self.http.request(method.clone(), url.clone());
            if !accept.is_empty() {
                request = request.header(reqwest::header::ACCEPT, accept);
            }
            match (&authorization, scope.auth) {
                (Some(Authorization::Bearer(token)), _) => request = request.bearer_auth(token),
                (Some(Authorization::Basic), RegistryAuth::Basic(user, password)) => request = request.basic_auth(user, Some(password)),
                _ => {}
            }
            let response = request.send().await.map_err(|e| transport(&method, url, e))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if status == StatusCode::UNAUTHORIZED && !challenged {
                challenged = true;
                let challenge = response.headers().get(reqwest::header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).map(str::to_owned);
                if let Some(answer) = self.answer(challenge.as_deref(), url, scope, &key).await? {
                    authorization = Some(answer);
                    continue;
                }
            }
            return Err(FetchError::Status { codes: error_codes(response, &method, url).await, method, url: url.to_string(), status });
        }
    }

    fn cached_token(&self, key: &str) -> Option<String> {
        let mut tokens = self.tokens.lock();
        match tokens.get(key) {
            Some((token, until)) if Instant::now() < *until => Some(token.clone()),
            Some(_) => {
                tokens.remove(key);
                None
            }
            None => None,
        }
    }

    /// What to retry with after a `401`, if the challenge can be answered.
    async fn answer(&self, challenge: Option<&str>, url: &Url, scope: &Scope<'_>, key: &str) -> Result<Option<Authorization>, FetchError> {
        let Some(challenge) = challenge else { return Ok(None) };
        let mut bearer = None;
        let mut basic = false;
        for parsed in http_auth::ChallengeParser::new(challenge).flatten() {
            if parsed.scheme.eq_ignore_ascii_case("bearer") {
                let param = |name: &str| parsed.params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.to_unescaped());
                bearer = param("realm").map(|realm| (realm, param("service")));
            } else if parsed.scheme.eq_ignore_ascii_case("basic") {
                basic = true;
            }
        }
        if let Some((realm, service)) = bearer {
            let (token, life) = self.token(url, scope, &realm, service.as_deref()).await?;
            self.tokens.lock().insert(key.to_string(), (token.clone(), Instant::now() + life));
            return Ok(Some(Authorization::Bearer(token)));
        }
        Ok((basic && matches!(scope.auth, RegistryAuth::Basic(..))).then_some(Authorization::Basic))
    }

    /// A pull token from the realm a registry named (held to the same rules as a redirect).
    async fn token(&self, url: &Url, scope: &Scope<'_>, realm: &str, service: Option<&str>) -> Result<(String, Duration), FetchError> {
        let fail = |message: String| FetchError::Token { registry: scope.registry.into(), realm: realm.into(), message };
        let mut realm_url = Url::parse(realm).map_err(|e| fail(format!("not a URL: {e}")))?;
        self.trusted.verdict(url, url, &realm_url).map_err(|why| fail(format!("refused: {why}")))?;
        {
            let mut query = realm_url.query_pairs_mut();
            query.append_pair("scope", &format!("repository:{}:pull", scope.repository));
            if let Some(service) = service {
                query.append_pair("service", service);
            }
        }
        let mut request = self.http.get(realm_url.clone());
        match scope.auth {
            RegistryAuth::Basic(user, password) => request = request.basic_auth(user, Some(password)),
            RegistryAuth::Bearer(token) => request = request.bearer_auth(token),
            RegistryAuth::Anonymous => {}
        }
        let mut response = request.send().await.map_err(|e| fail(reqwest_message(e)))?;
        if !response.status().is_success() {
            return Err(fail(format!("{}", response.status())));
        }
        let body = read_to_vec(&mut response, MAX_TOKEN_BODY, "a token answer", &Method::GET, &realm_url).await.map_err(|e| fail(e.to_string()))?;
        #[derive(serde::Deserialize)]
        struct Answer {
            token: Option<String>,
            access_token: Option<String>,
            expires_in: Option<u64>,
        }
        let answer: Answer = serde_json::from_slice(&body).map_err(|e| fail(format!("not a token answer: {e}")))?;
        let token = answer.token.or(answer.access_token).filter(|t| !t.is_empty()).ok_or_else(|| fail("the answer names no token".into()))?;
        // A little early, so that a token never expires between the look and the request.
        let life = answer.expires_in.map_or(DEFAULT_TOKEN_LIFE, |s| Duration::from_secs(s.clamp(10, 3600) - 5));
        Ok((token, life))
    }
}

/// Reads at most `limit` bytes of `response` into memory; more is [`FetchError::TooLarge`].
pub async fn read_to_vec(response: &mut Response, limit: u64, what: &'static str, method: &Method, url: &Url) -> Result<Vec<u8>, FetchError> {
    let mut body = Vec::new();
    read_limited(response, limit, what, method, url, |chunk| {
        body.extend_from_slice(chunk);
        Ok(())
    })
    .await?;
    Ok(body)
}

/// Hands `response`'s body to `sink` piece by piece, counting: a declared or actual length over
/// `limit` ends the read with [`FetchError::TooLarge`] (`what` says which limit). Returns the
/// bytes read.
pub async fn read_limited(
    response: &mut Response,
    limit: u64,
    what: &'static str,
    method: &Method,
    url: &Url,
    mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<u64, FetchError> {
    let too_large = || FetchError::TooLarge { method: method.clone(), url: url.to_string(), limit, what };
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut count: u64 = 0;
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(method, url, e))? {
        count = count.saturating_add(chunk.len() as u64);
        if count > limit {
            return Err(too_large());
        }
        sink(&chunk).map_err(|e| FetchError::Transport { method: method.clone(), url: url.to_string(), message: format!("storing what arrived: {e}") })?;
    }
    Ok(count)
}

/// The OCI error codes of an error response (`{"errors":[{"code":"MANIFEST_UNKNOWN",...}]}`),
/// from at most [`MAX_ERROR_BODY`] bytes; only codes that look like codes are kept.
async fn error_codes(mut response: Response, method: &Method, url: &Url) -> Vec<String> {
    let Ok(body) = read_to_vec(&mut response, MAX_ERROR_BODY, "an error answer", method, url).await else { return Vec::new() };
    parse_error_codes(&body)
}

/// The codes of an OCI error envelope: upper-case words of at most 64 characters, at most 4.
pub fn parse_error_codes(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Code>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: String,
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(body) else { return Vec::new() };
    envelope
        .errors
        .into_iter()
        .map(|e| e.code)
        .filter(|c| !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .take(4)
        .collect()
}

fn transport(method: &Method, url: &Url, e: reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(error) = source {
        if let Some(refused) = error.downcast_ref::<RefusedRedirect>() {
            return FetchError::Redirect { method: method.clone(), url: url.to_string(), why: refused.0.clone() };
        }
        source = error.source();
    }
    FetchError::Transport { method: method.clone(), url: url.to_string(), message: reqwest_message(e) }
}

/// What went wrong, with its causes, without the URL (the caller names the one it asked for, not
/// where a redirect led).
fn reqwest_message(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut message = if e.is_timeout() { "timed out".to_string() } else { e.to_string() };
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn redirects_keep_to_the_rules() {
        let trusted = Trusted::new(&["registry.internal:5000".to_string()]);
        let public = url("https://ghcr.io/v2/team/p/blobs/sha256:00");
        let local = url("http://127.0.0.1:5000/v2/team/p/blobs/sha256:00");
        // A CDN over HTTPS is fine from anywhere.
        assert!(trusted.verdict(&public, &public, &url("https://cdn.example.com/blob?sig=1")).is_ok());
        assert!(trusted.verdict(&local, &local, &url("https://cdn.example.com/blob")).is_ok());
        // Never down to plain HTTP; plain HTTP only to trusted hosts.
        assert!(trusted.verdict(&public, &public, &url("http://cdn.example.com/blob")).unwrap_err().contains("HTTPS to plain HTTP"));
        assert!(trusted.verdict(&local, &local, &url("http://cdn.example.com/blob")).unwrap_err().contains("neither on loopback"));
        assert!(trusted.verdict(&local, &local, &url("http://registry.internal:5000/x")).is_ok());
        // Loopback and link-local only from a registry on loopback (or named insecure).
        for to in
            ["https://127.0.0.1:8081/readyz?x", "https://localhost/x", "https://169.254.169.254/latest", "https://[::1]:8080/", "https://[::ffff:127.0.0.1]/"]
        {
            assert!(trusted.verdict(&public, &public, &url(to)).unwrap_err().contains("loopback or link-local"), "{to}");
        }
        assert!(trusted.verdict(&local, &local, &url("http://127.0.0.1:8081/readyz?x")).is_ok());
        let insecure = url("http://registry.internal:5000/v2/p/blobs/sha256:00");
        assert!(trusted.verdict(&insecure, &insecure, &url("http://127.0.0.1:9/")).is_ok());
        assert!(trusted.verdict(&public, &public, &url("file:///etc/passwd")).is_err());
    }

    #[test]
    fn plain_http_only_for_loopback_and_insecure_registries() {
        let trusted = Trusted::new(&["Registry.Internal".to_string()]);
        assert_eq!(trusted.scheme("127.0.0.1:5000"), "http");
        assert_eq!(trusted.scheme("localhost:5000"), "http");
        assert_eq!(trusted.scheme("[::1]:5000"), "http");
        assert_eq!(trusted.scheme("registry.internal:5000"), "http");
        assert_eq!(trusted.scheme("ghcr.io"), "https");
        assert_eq!(trusted.scheme("127.example.com:5000"), "https");
        assert!(is_local_addr("169.254.169.254".parse().unwrap()) && is_local_addr("::ffff:127.0.0.2".parse().unwrap()));
        assert!(!is_local_addr("10.0.0.1".parse().unwrap()) && !is_local_addr("140.82.112.3".parse().unwrap()));
    }

    #[test]
    fn error_bodies_give_codes_only() {
        let body = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"secret marker"},{"code":"<script>"}]}"#;
        assert_eq!(parse_error_codes(body), vec!["MANIFEST_UNKNOWN".to_string()]);
        assert!(parse_error_codes(b"<html>secret marker</html>").is_empty());
        let error =
            FetchError::Status { method: Method::GET, url: "http://r/v2/x".into(), status: StatusCode::NOT_FOUND, codes: vec!["MANIFEST_UNKNOWN".into()] };
        assert_eq!(error.to_string(), "GET http://r/v2/x: 404 Not Found (MANIFEST_UNKNOWN)");
        assert_eq!(error.reason(), "NotFound");
    }
}
