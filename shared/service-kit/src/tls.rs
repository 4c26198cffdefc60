//! TLS from PEM files, the same way in both services.
//!
//! A service that serves TLS names its certificate chain, its private key and, for mutual TLS, the CA whose
//! certificates clients must present ([`ServerTlsFiles`], a `[server.tls]` table in either service's config). A
//! client names the CA it trusts (the system's roots when absent) and, when the server wants one, its own
//! certificate and key ([`ClientTlsFiles`]). Files are read and checked once, at start-up or `--check`: each must
//! exist, parse as PEM of the right kind, and a key must belong to its certificate; the error names the key
//! (`cert_file`, `key_file`, ...) so a service can prefix it with its table.
//!
//! rustls does the TLS, with the aws-lc-rs crypto provider ([`install_crypto_provider`]); TLS 1.2 and 1.3.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// Makes aws-lc-rs the process's rustls crypto provider, so every TLS user in the process (tonic, the Redis client)
/// agrees on one. Idempotent; call it at start-up before any TLS is configured.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is all this wants.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// A TLS file that cannot be used; `key` is the configuration key that named it.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct TlsError {
    /// The key within its table (`cert_file`, `key_file`, `client_ca_file`, `ca_file`).
    pub key: &'static str,
    /// What is wrong, naming the file.
    pub message: String,
}

fn fail(key: &'static str, message: impl Into<String>) -> TlsError {
    TlsError {
        key,
        message: message.into(),
    }
}

/// The files of a TLS server (`[server.tls]`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsFiles {
    /// PEM certificate chain, the server's own certificate first.
    pub cert_file: PathBuf,
    /// PEM private key of that certificate (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM CA certificate(s) client certificates must chain to. Set: mutual TLS, a client without a valid
    /// certificate is refused during the handshake. Unset: any client may connect (and then authenticates with
    /// its bearer token as usual).
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}

impl ServerTlsFiles {
    /// `file` (the config's `[server.tls]`) with the environment's `<PREFIX>_TLS_CERT_FILE`, `<PREFIX>_TLS_KEY_FILE`
    /// and `<PREFIX>_TLS_CLIENT_CA_FILE` over it, key by key; `None` when neither sets a certificate. `var` looks a
    /// variable up (set and not empty).
    pub fn with_env(
        file: Option<ServerTlsFiles>,
        prefix: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ServerTlsFiles>, TlsError> {
        let env = |name: &str| var(&format!("{prefix}_TLS_{name}")).map(PathBuf::from);
        let (cert, key, ca) = (env("CERT_FILE"), env("KEY_FILE"), env("CLIENT_CA_FILE"));
        let (file_cert, file_key, file_ca) = match file {
            Some(f) => (Some(f.cert_file), Some(f.key_file), f.client_ca_file),
            None => (None, None, None),
        };
        match (cert.or(file_cert), key.or(file_key), ca.or(file_ca)) {
            (None, None, None) => Ok(None),
            (Some(cert_file), Some(key_file), client_ca_file) => Ok(Some(ServerTlsFiles {
                cert_file,
                key_file,
                client_ca_file,
            })),
            (None, _, _) => Err(fail(
                "cert_file",
                format!("TLS needs a certificate (cert_file or {prefix}_TLS_CERT_FILE)"),
            )),
            (Some(_), None, _) => Err(fail(
                "key_file",
                format!("TLS needs a private key (key_file or {prefix}_TLS_KEY_FILE)"),
            )),
        }
    }
}

/// The files of a TLS client (`[gateway.tls]`, `[redis.tls]`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClientTlsFiles {
    /// PEM CA certificate(s) the server's certificate must chain to; the system's roots when unset.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain to present (mutual TLS); with `key_file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Name the server's certificate must carry, when it is not the host of the URL (e.g. connecting by address).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// A PEM certificate chain and its key, checked to belong together.
#[derive(Clone)]
pub struct KeyedCert {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl std::fmt::Debug for KeyedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedCert(<certificate and private key>)")
    }
}

impl KeyedCert {
    fn load(cert: &Path, key: &Path) -> Result<KeyedCert, TlsError> {
        let cert_pem = read(cert, "cert_file")?;
        let chain = certificates(&cert_pem, cert, "cert_file")?;
        let key_pem = read(key, "key_file")?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            fail(
                "key_file",
                format!("{}: no usable PEM private key ({e})", key.display()),
            )
        })?;
        rustls::sign::CertifiedKey::from_der(chain, private, &provider()).map_err(|e| {
            fail(
                "key_file",
                format!(
                    "{} does not fit the certificate in {}: {e}",
                    key.display(),
                    cert.display()
                ),
            )
        })?;
        Ok(KeyedCert { cert_pem, key_pem })
    }

    /// The certificate chain, PEM.
    pub fn cert_pem(&self) -> &[u8] {
        &self.cert_pem
    }

    /// The private key, PEM.
    pub fn key_pem(&self) -> &[u8] {
        &self.key_pem
    }

    fn identity(&self) -> Identity {
        Identity::from_pem(&self.cert_pem, &self.key_pem)
    }
}

/// Checked server TLS: what tonic's server needs.
#[derive(Debug, Clone)]
pub struct ServerTls {
    identity: KeyedCert,
    client_ca_pem: Option<Vec<u8>>,
}

impl ServerTls {
    /// Reads and checks `files`.
    pub fn load(files: &ServerTlsFiles) -> Result<ServerTls, TlsError> {
        let identity = KeyedCert::load(&files.cert_file, &files.key_file)?;
        let client_ca_pem = match &files.client_ca_file {
            None => None,
            Some(path) => Some(ca_bundle(path, "client_ca_file")?),
        };
        Ok(ServerTls {
            identity,
            client_ca_pem,
        })
    }

    /// True when clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.client_ca_pem.is_some()
    }

    /// tonic's server configuration (ALPN h2; client certificates required when [`ServerTls::mutual`]).
    pub fn tonic_config(&self) -> ServerTlsConfig {
        let config = ServerTlsConfig::new().identity(self.identity.identity());
        match &self.client_ca_pem {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca)),
            None => config,
        }
    }
}

/// Checked client TLS: what tonic's channel (or another client) needs.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    ca_pem: Option<Vec<u8>>,
    identity: Option<KeyedCert>,
    server_name: Option<String>,
}

impl ClientTls {
    /// Reads and checks `files`; `cert_file` and `key_file` go together.
    pub fn load(files: &ClientTlsFiles) -> Result<ClientTls, TlsError> {
        let ca_pem = match &files.ca_file {
            None => None,
            Some(path) => Some(ca_bundle(path, "ca_file")?),
        };
        let identity = match (&files.cert_file, &files.key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(KeyedCert::load(cert, key)?),
            (Some(_), None) => return Err(fail("key_file", "cert_file needs key_file")),
            (None, Some(_)) => return Err(fail("cert_file", "key_file needs cert_file")),
        };
        if files.server_name.as_deref() == Some("") {
            return Err(fail("server_name", "must not be empty"));
        }
        Ok(ClientTls {
            ca_pem,
            identity,
            server_name: files.server_name.clone(),
        })
    }

    /// The trusted CA bundle (PEM); `None`: the system's roots.
    pub fn ca_pem(&self) -> Option<&[u8]> {
        self.ca_pem.as_deref()
    }

    /// The client certificate and key, when configured.
    pub fn identity(&self) -> Option<&KeyedCert> {
        self.identity.as_ref()
    }

    /// The configured server name, when it differs from the URL's host.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// tonic's channel configuration. `host` is the name to verify when no server name is configured (needed when
    /// the channel connects to an address rather than to the URL's host); `None` leaves it to the URL.
    pub fn tonic_config(&self, host: Option<&str>) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new();
        config = match &self.ca_pem {
            Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
            None => config.with_native_roots(),
        };
        if let Some(identity) = &self.identity {
            config = config.identity(identity.identity());
        }
        match self.server_name.as_deref().or(host) {
            Some(name) => config.domain_name(name),
            None => config,
        }
    }
}

fn read(path: &Path, key: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| fail(key, format!("cannot read {}: {e}", path.display())))
}

fn certificates(
    pem: &[u8],
    path: &Path,
    key: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| fail(key, format!("{}: not valid PEM ({e})", path.display())))?;
    if certs.is_empty() {
        return Err(fail(
            key,
            format!("{}: no PEM certificate in it", path.display()),
        ));
    }
    Ok(certs)
}

/// Reads a CA bundle and checks that every certificate in it is a usable trust anchor.
fn ca_bundle(path: &Path, key: &'static str) -> Result<Vec<u8>, TlsError> {
    let pem = read(path, key)?;
    let mut roots = RootCertStore::empty();
    for cert in certificates(&pem, path, key)? {
        roots.add(cert).map_err(|e| {
            fail(
                key,
                format!("{}: a certificate is not a usable CA ({e})", path.display()),
            )
        })?;
    }
    Ok(pem)
}

#[cfg(test)]
mod tests;
