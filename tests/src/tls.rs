//! A throwaway certificate authority and a server certificate for `localhost` and
//! 127.0.0.1, written as PEM files for `baton-server --tls-cert/--tls-key` and `--ca-cert`.

use std::path::PathBuf;

use anyhow::Result;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

pub struct TestCa {
    pub dir: tempfile::TempDir,
    /// The CA's certificate: what a client trusts.
    pub ca_pem: String,
    pub ca_path: PathBuf,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
}

impl TestCa {
    pub fn new() -> Result<Self> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "Baton test CA");
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, "baton-server");
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;

        let dir = tempfile::tempdir()?;
        let (ca_path, cert_path, key_path) =
            (dir.path().join("ca.pem"), dir.path().join("server.pem"), dir.path().join("server-key.pem"));
        std::fs::write(&ca_path, ca_cert.pem())?;
        std::fs::write(&cert_path, cert.pem())?;
        std::fs::write(&key_path, key.serialize_pem())?;
        Ok(Self { dir, ca_pem: ca_cert.pem(), ca_path, cert_path, key_path })
    }

    /// The server flags that turn TLS on with this CA's server certificate.
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert_path.display().to_string(),
            "--tls-key".into(),
            self.key_path.display().to_string(),
        ]
    }
}
