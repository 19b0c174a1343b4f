//! HTTPS servers the tests stand up on loopback (a fake webhook, a hostile member cluster): a
//! self-signed certificate for 127.0.0.1 and a listener on a free port.

use std::sync::Arc;

use tokio::net::TcpListener;

#[derive(Debug, thiserror::Error)]
pub enum LoopbackTlsError {
    #[error("making the certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("setting up TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("listening on loopback: {0}")]
    Listen(#[from] std::io::Error),
}

/// A listener on a free loopback port, the TLS acceptor for its connections (HTTP/1.1), and the
/// certificate clients trust (its PEM is the CA bundle).
pub struct LoopbackTls {
    pub certificate: rcgen::Certificate,
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub listener: TcpListener,
}

impl LoopbackTls {
    pub async fn bind() -> Result<LoopbackTls, LoopbackTlsError> {
        let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])?;
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Ok(LoopbackTls { certificate: cert, acceptor, listener })
    }
}
