//! A throw-away certificate authority for tests: a CA, a server certificate for `localhost` and `127.0.0.1`, a
//! client certificate, and a second, untrusted CA with a client certificate of its own, all written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::tls::{ClientTlsFiles, ServerTlsFiles};

/// The files [`generate`] wrote.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The trusted CA certificate.
    pub ca: PathBuf,
    /// Server certificate (chain: itself) for `localhost` and `127.0.0.1`, signed by the CA.
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// Client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    /// A CA nobody trusts.
    pub rogue_ca: PathBuf,
    /// A client certificate signed by the rogue CA.
    pub rogue_client_cert: PathBuf,
    /// Its key.
    pub rogue_client_key: PathBuf,
}

impl TestPki {
    /// Server files; mutual TLS against the CA when `mutual`.
    pub fn server(&self, mutual: bool) -> ServerTlsFiles {
        ServerTlsFiles {
            cert_file: self.server_cert.clone(),
            key_file: self.server_key.clone(),
            client_ca_file: mutual.then(|| self.ca.clone()),
        }
    }

    /// [`TestPki::server`] as an inline TOML table (`{ cert_file = "...", ... }`).
    pub fn server_toml(&self, mutual: bool) -> String {
        let mut table = format!(
            "{{ cert_file = {:?}, key_file = {:?}",
            self.server_cert.display().to_string(),
            self.server_key.display().to_string()
        );
        if mutual {
            table.push_str(&format!(
                ", client_ca_file = {:?}",
                self.ca.display().to_string()
            ));
        }
        table + " }"
    }

    /// [`TestPki::client`] as an inline TOML table.
    pub fn client_toml(&self, with_cert: bool) -> String {
        let mut table = format!("{{ ca_file = {:?}", self.ca.display().to_string());
        if with_cert {
            table.push_str(&format!(
                ", cert_file = {:?}, key_file = {:?}",
                self.client_cert.display().to_string(),
                self.client_key.display().to_string()
            ));
        }
        table + " }"
    }

    /// Client files trusting the CA, presenting the client certificate when `with_cert`.
    pub fn client(&self, with_cert: bool) -> ClientTlsFiles {
        ClientTlsFiles {
            ca_file: Some(self.ca.clone()),
            cert_file: with_cert.then(|| self.client_cert.clone()),
            key_file: with_cert.then(|| self.client_key.clone()),
            server_name: None,
        }
    }
}

/// Generates the certificates into `dir`. Panics on failure (tests only).
#[allow(clippy::expect_used)]
pub fn generate(dir: &Path) -> TestPki {
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write test certificate");
        path
    };
    let ca_key = KeyPair::generate().expect("key");
    let ca = CertifiedIssuer::self_signed(ca_params("test CA"), ca_key).expect("CA");
    let rogue_key = KeyPair::generate().expect("key");
    let rogue = CertifiedIssuer::self_signed(ca_params("rogue CA"), rogue_key).expect("CA");

    let leaf = |names: Vec<String>,
                usage: ExtendedKeyUsagePurpose,
                issuer: &CertifiedIssuer<'_, KeyPair>| {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(names).expect("params");
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let cert = params.signed_by(&key, issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        &ca,
    );
    let (client_cert, client_key) = leaf(
        vec!["client".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        &ca,
    );
    let (rogue_cert, rogue_client_key) = leaf(
        vec!["client".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        &rogue,
    );
    TestPki {
        ca: write("ca.pem", ca.pem()),
        server_cert: write("server.pem", server_cert),
        server_key: write("server.key", server_key),
        client_cert: write("client.pem", client_cert),
        client_key: write("client.key", client_key),
        rogue_ca: write("rogue-ca.pem", rogue.pem()),
        rogue_client_cert: write("rogue-client.pem", rogue_cert),
        rogue_client_key: write("rogue-client.key", rogue_client_key),
    }
}

#[allow(clippy::expect_used)]
fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}
