//! What a member kubeconfig may say. A member's kubeconfig comes from whoever may write a
//! labelled Secret (or a file) — not from the host's operator — yet kube-rs acts on what it says
//! while building a client: it runs `exec` and `auth-provider` commands, reads `tokenFile` and
//! certificate paths from the host's disk (the host's own ServiceAccount token among them) and
//! sends them to `server`, and adds `as*` impersonation headers to every request. So before any
//! client is built, [`check`] refuses every field that is a program, a path, an impersonation or
//! a proxy: a member kubeconfig is data — an `https://` server, inline CA data and inline
//! credentials (`token`, `client-certificate-data` with `client-key-data`, or `username` with
//! `password`). Plain `http://` and `insecure-skip-tls-verify` only with
//! `--unsafe-member-clusters-allow-insecure`.

use kube::config::{AuthInfo, Cluster, Kubeconfig};

/// How a member's server may be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// `https://` with the server's certificate verified.
    #[default]
    Verified,
    /// Also `http://` and `insecure-skip-tls-verify` (`--unsafe-member-clusters-allow-insecure`):
    /// anyone on the path reads the credentials and answers for the member.
    AllowInsecure,
}

/// A field a member kubeconfig may not have, named as a path into it (`users[0].user.exec`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KubeconfigError {
    #[error("{field} runs a program on the host; give inline credentials instead (token, or client-certificate-data and client-key-data)")]
    Program { field: String },
    #[error("{field} names a file on the host; put its content inline as {inline}")]
    File { field: String, inline: &'static str },
    #[error("{field} impersonates another identity; remove it (the host chooses who plugins act as in a member)")]
    Impersonation { field: String },
    #[error("{field} sends the host's requests through a proxy; remove it")]
    Proxy { field: String },
    #[error("{field} {server:?} is not an https:// URL")]
    Server { field: String, server: String },
    #[error("{field}: {what} is allowed only with --unsafe-member-clusters-allow-insecure")]
    Insecure { field: String, what: &'static str },
}

impl KubeconfigError {
    /// The refusal's kind, for the `reason` label of `kubewasm_member_refusals_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            KubeconfigError::Program { .. } => "program",
            KubeconfigError::File { .. } => "file",
            KubeconfigError::Impersonation { .. } => "impersonation",
            KubeconfigError::Proxy { .. } => "proxy",
            KubeconfigError::Server { .. } => "server",
            KubeconfigError::Insecure { .. } => "insecure",
        }
    }
}

/// Refuses `kubeconfig` unless every cluster and user in it is data only (not only the current
/// context's: what kube-rs picks must not depend on a name the author also chooses).
pub fn check(kubeconfig: &Kubeconfig, transport: Transport) -> Result<(), KubeconfigError> {
    for (i, named) in kubeconfig.clusters.iter().enumerate() {
        if let Some(cluster) = &named.cluster {
            check_cluster(&format!("clusters[{i}].cluster"), cluster, transport)?;
        }
    }
    for (i, named) in kubeconfig.auth_infos.iter().enumerate() {
        if let Some(user) = &named.auth_info {
            check_user(&format!("users[{i}].user"), user)?;
        }
    }
    Ok(())
}

fn check_cluster(at: &str, cluster: &Cluster, transport: Transport) -> Result<(), KubeconfigError> {
    let field = |name: &str| format!("{at}.{name}");
    if cluster.certificate_authority.is_some() {
        return Err(KubeconfigError::File { field: field("certificate-authority"), inline: "certificate-authority-data" });
    }
    if cluster.proxy_url.is_some() {
        return Err(KubeconfigError::Proxy { field: field("proxy-url") });
    }
    let insecure = transport == Transport::AllowInsecure;
    if cluster.insecure_skip_tls_verify == Some(true) && !insecure {
        return Err(KubeconfigError::Insecure { field: field("insecure-skip-tls-verify"), what: "skipping the server's certificate check" });
    }
    if let Some(server) = &cluster.server {
        let scheme = server.parse::<http::Uri>().ok().and_then(|uri| uri.scheme_str().map(str::to_ascii_lowercase));
        match scheme.as_deref() {
            Some("https") => {}
            Some("http") if insecure => {}
            Some("http") => return Err(KubeconfigError::Insecure { field: field("server"), what: "a plain http:// server" }),
            _ => return Err(KubeconfigError::Server { field: field("server"), server: server.clone() }),
        }
    }
    Ok(())
}

fn check_user(at: &str, user: &AuthInfo) -> Result<(), KubeconfigError> {
    let field = |name: &str| format!("{at}.{name}");
    let program = [(user.exec.is_some(), "exec"), (user.auth_provider.is_some(), "auth-provider")];
    if let Some((_, name)) = program.iter().find(|(set, _)| *set) {
        return Err(KubeconfigError::Program { field: field(name) });
    }
    let files = [
        (user.token_file.is_some(), "tokenFile", "token"),
        (user.client_certificate.is_some(), "client-certificate", "client-certificate-data"),
        (user.client_key.is_some(), "client-key", "client-key-data"),
    ];
    if let Some((_, name, inline)) = files.iter().find(|(set, ..)| *set) {
        return Err(KubeconfigError::File { field: field(name), inline });
    }
    let impersonation = [
        (user.impersonate.is_some(), "as"),
        (user.impersonate_uid.is_some(), "as-uid"),
        (user.impersonate_groups.is_some(), "as-groups"),
        (user.impersonate_user_extra.is_some(), "as-user-extra"),
    ];
    if let Some((_, name)) = impersonation.iter().find(|(set, _)| *set) {
        return Err(KubeconfigError::Impersonation { field: field(name) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data-only kubeconfig with a second user, so refusals name the index they are at.
    const DATA_ONLY: &str = r#"
apiVersion: v1
kind: Config
current-context: m
clusters:
- name: m
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: Y2E=}
users:
- name: admin
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
- name: robot
  user: {token: abc}
contexts:
- name: m
  context: {cluster: m, user: admin}
"#;

    /// `DATA_ONLY` with `extra` added to the second user (or, for a `cluster` key, the cluster).
    fn refusal(section: &str, extra: &str, transport: Transport) -> Option<KubeconfigError> {
        let text = match section {
            "user" => DATA_ONLY.replace("{token: abc}", &format!("{{token: abc, {extra}}}")),
            _ => DATA_ONLY.replace("certificate-authority-data: Y2E=}", &format!("certificate-authority-data: Y2E=, {extra}}}")),
        };
        check(&Kubeconfig::from_yaml(&text).unwrap(), transport).err()
    }

    #[test]
    fn inline_credentials_and_ca_data_over_https_are_accepted() {
        assert_eq!(check(&Kubeconfig::from_yaml(DATA_ONLY).unwrap(), Transport::Verified), Ok(()));
        let basic = DATA_ONLY.replace("{token: abc}", "{username: u, password: p}");
        assert_eq!(check(&Kubeconfig::from_yaml(&basic).unwrap(), Transport::Verified), Ok(()));
    }

    #[test]
    fn programs_are_refused() {
        let exec =
            refusal("user", "exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'touch /tmp/x']}", Transport::AllowInsecure);
        assert_eq!(exec, Some(KubeconfigError::Program { field: "users[1].user.exec".into() }));
        let provider = refusal("user", "auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}", Transport::AllowInsecure);
        assert_eq!(provider, Some(KubeconfigError::Program { field: "users[1].user.auth-provider".into() }));
    }

    #[test]
    fn file_references_are_refused_with_their_inline_field_named() {
        for (extra, field, inline) in [
            ("tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", "users[1].user.tokenFile", "token"),
            ("client-certificate: /etc/cert.pem", "users[1].user.client-certificate", "client-certificate-data"),
            ("client-key: /etc/key.pem", "users[1].user.client-key", "client-key-data"),
        ] {
            let e = refusal("user", extra, Transport::AllowInsecure).unwrap();
            assert_eq!(e, KubeconfigError::File { field: field.into(), inline });
            assert!(e.to_string().contains(field) && e.to_string().ends_with(inline), "{e}");
        }
        let ca = refusal("cluster", "certificate-authority: /etc/ca.pem", Transport::AllowInsecure);
        assert_eq!(ca, Some(KubeconfigError::File { field: "clusters[0].cluster.certificate-authority".into(), inline: "certificate-authority-data" }));
    }

    #[test]
    fn impersonation_fields_are_refused() {
        for (extra, field) in [
            ("as: admin", "users[1].user.as"),
            ("as-uid: '0'", "users[1].user.as-uid"),
            ("as-groups: [system:masters]", "users[1].user.as-groups"),
            ("as-user-extra: {scopes: [all]}", "users[1].user.as-user-extra"),
        ] {
            assert_eq!(refusal("user", extra, Transport::AllowInsecure), Some(KubeconfigError::Impersonation { field: field.into() }), "{extra}");
        }
    }

    #[test]
    fn proxies_are_refused() {
        let proxy = refusal("cluster", "proxy-url: 'http://proxy:3128'", Transport::AllowInsecure);
        assert_eq!(proxy, Some(KubeconfigError::Proxy { field: "clusters[0].cluster.proxy-url".into() }));
    }

    #[test]
    fn plain_http_and_skipped_verification_need_the_unsafe_flag() {
        let http = DATA_ONLY.replace("https://", "http://");
        let http = Kubeconfig::from_yaml(&http).unwrap();
        let e = check(&http, Transport::Verified).unwrap_err();
        assert_eq!(e.reason(), "insecure");
        assert!(
            e.to_string().starts_with("clusters[0].cluster.server: a plain http:// server")
                && e.to_string().contains("--unsafe-member-clusters-allow-insecure"),
            "{e}"
        );
        assert_eq!(check(&http, Transport::AllowInsecure), Ok(()));

        let skip = refusal("cluster", "insecure-skip-tls-verify: true", Transport::Verified).unwrap();
        assert!(skip.to_string().starts_with("clusters[0].cluster.insecure-skip-tls-verify:"), "{skip}");
        assert_eq!(refusal("cluster", "insecure-skip-tls-verify: true", Transport::AllowInsecure), None);
    }

    #[test]
    fn a_server_that_is_not_a_url_is_refused() {
        for server in ["unix:///var/run/docker.sock", "127.0.0.1:6443", "file:///etc/passwd"] {
            let text = DATA_ONLY.replace("https://127.0.0.1:6443", server);
            let e = check(&Kubeconfig::from_yaml(&text).unwrap(), Transport::AllowInsecure).unwrap_err();
            assert_eq!(e.reason(), "server", "{server}: {e}");
        }
    }
}
