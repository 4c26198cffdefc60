use super::*;
use crate::test_certs::{TestPki, generate};

fn pki() -> (tempfile::TempDir, TestPki) {
    let dir = tempfile::tempdir().unwrap();
    let pki = generate(dir.path());
    (dir, pki)
}

#[test]
fn good_files_load_and_say_whether_tls_is_mutual() {
    install_crypto_provider();
    let (_d, pki) = pki();
    assert!(!ServerTls::load(&pki.server(false)).unwrap().mutual());
    assert!(ServerTls::load(&pki.server(true)).unwrap().mutual());
    let client = ClientTls::load(&pki.client(true)).unwrap();
    assert!(client.identity().is_some() && client.ca_pem().is_some());
    let anonymous = ClientTls::load(&ClientTlsFiles::default()).unwrap();
    assert!(anonymous.ca_pem().is_none() && anonymous.identity().is_none());
}

#[test]
fn bad_files_name_their_key_and_path() {
    let (dir, pki) = pki();
    let missing = dir.path().join("missing.pem");
    let server = |f: &dyn Fn(&mut ServerTlsFiles)| {
        let mut files = pki.server(true);
        f(&mut files);
        ServerTls::load(&files).unwrap_err()
    };
    let e = server(&|f| f.cert_file = missing.clone());
    assert_eq!(e.key, "cert_file");
    assert!(e.message.contains("missing.pem"), "{e}");
    let e = server(&|f| f.cert_file = pki.server_key.clone());
    assert_eq!(
        (e.key, e.message.contains("no PEM certificate")),
        ("cert_file", true),
        "{e}"
    );
    let e = server(&|f| f.key_file = pki.server_cert.clone());
    assert_eq!(
        (e.key, e.message.contains("no usable PEM private key")),
        ("key_file", true),
        "{e}"
    );
    let e = server(&|f| f.key_file = pki.client_key.clone());
    assert_eq!(
        (e.key, e.message.contains("does not fit the certificate")),
        ("key_file", true),
        "{e}"
    );
    let e = server(&|f| f.client_ca_file = Some(pki.client_key.clone()));
    assert_eq!(e.key, "client_ca_file", "{e}");

    let client = |f: &dyn Fn(&mut ClientTlsFiles)| {
        let mut files = pki.client(true);
        f(&mut files);
        ClientTls::load(&files).unwrap_err()
    };
    assert_eq!(client(&|f| f.key_file = None).key, "key_file");
    assert_eq!(client(&|f| f.cert_file = None).key, "cert_file");
    assert_eq!(
        client(&|f| f.ca_file = Some(missing.clone())).key,
        "ca_file"
    );
    assert_eq!(
        client(&|f| f.server_name = Some(String::new())).key,
        "server_name"
    );
}

#[test]
fn keys_never_show_in_debug_output() {
    let (_d, pki) = pki();
    let key = std::fs::read_to_string(&pki.server_key).unwrap();
    let shown = format!("{:?}", ServerTls::load(&pki.server(true)).unwrap());
    let body = key.lines().nth(1).unwrap();
    assert!(!shown.contains(body), "{shown}");
}

#[test]
fn the_environment_overrides_the_file_key_by_key() {
    let file = ServerTlsFiles {
        cert_file: "/etc/tls/a.pem".into(),
        key_file: "/etc/tls/a.key".into(),
        client_ca_file: None,
    };
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(
        ServerTlsFiles::with_env(None, "SVC", env(&[])).unwrap(),
        None
    );
    let merged = ServerTlsFiles::with_env(
        Some(file.clone()),
        "SVC",
        env(&[
            ("SVC_TLS_KEY_FILE", "/run/k.key"),
            ("SVC_TLS_CLIENT_CA_FILE", "/run/ca.pem"),
        ]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (merged.cert_file, merged.key_file, merged.client_ca_file),
        (
            "/etc/tls/a.pem".into(),
            "/run/k.key".into(),
            Some("/run/ca.pem".into())
        )
    );
    let only_env = env(&[("SVC_TLS_CERT_FILE", "/c"), ("SVC_TLS_KEY_FILE", "/k")]);
    assert!(
        ServerTlsFiles::with_env(None, "SVC", only_env)
            .unwrap()
            .is_some()
    );
    let e = ServerTlsFiles::with_env(None, "SVC", env(&[("SVC_TLS_CERT_FILE", "/c")])).unwrap_err();
    assert_eq!(e.key, "key_file");
    assert!(e.message.contains("SVC_TLS_KEY_FILE"), "{e}");
    let e = ServerTlsFiles::with_env(None, "SVC", env(&[("SVC_TLS_CLIENT_CA_FILE", "/ca")]))
        .unwrap_err();
    assert_eq!(e.key, "cert_file");
}
