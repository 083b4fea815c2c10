//! Certificates for the local control plane: one CA, the apiserver's serving certificate, client certificates
//! (CN = user, O = groups, as kube-apiserver's x509 authenticator reads them) and the service-account key pair.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// File paths of the generated PKI, all inside one folder.
#[derive(Debug, Clone)]
pub struct Pki {
    /// CA certificate (PEM); clients trust it, the apiserver uses it as `--client-ca-file`.
    pub ca_cert: PathBuf,
    /// CA private key (PEM); KCM's cluster signer.
    pub ca_key: PathBuf,
    /// Serving certificate of kube-apiserver (SANs: 127.0.0.1, localhost, kubernetes.default…).
    pub serving_cert: PathBuf,
    /// Serving key of kube-apiserver.
    pub serving_key: PathBuf,
    /// Service-account token signing key (private, PEM).
    pub sa_key: PathBuf,
    /// Service-account token verification key (public, PEM).
    pub sa_pub: PathBuf,
}

/// A client certificate and key in PEM, for a kubeconfig user.
#[derive(Debug, Clone)]
pub struct ClientCert {
    /// Certificate PEM.
    pub cert_pem: String,
    /// Private key PEM.
    pub key_pem: String,
}

fn rc(what: &'static str) -> impl FnOnce(rcgen::Error) -> Error {
    move |source| Error::Pki { what, source }
}

fn write(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|source| Error::Io { path: path.to_owned(), source })
}

/// The CA, kept in memory so more client certificates can be issued (e.g. a dedicated user per benchmark run).
pub struct CertificateAuthority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl CertificateAuthority {
    /// Generates the CA and every file of [`Pki`] in `dir`.
    pub fn generate(dir: &Path) -> Result<(Self, Pki), Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_owned(), source })?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(rc("CA params"))?;
        ca_params.distinguished_name = dn("reloader-testenv-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_key = KeyPair::generate().map_err(rc("CA key"))?;
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(rc("CA certificate"))?;

        let mut serving = CertificateParams::new(vec![
            "127.0.0.1".to_owned(),
            "10.96.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
            "kubernetes.default.svc.cluster.local".to_owned(),
        ])
        .map_err(rc("serving params"))?;
        serving.distinguished_name = dn("kube-apiserver", None);
        serving.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = KeyPair::generate().map_err(rc("serving key"))?;
        let serving_cert = serving.signed_by(&serving_key, &issuer).map_err(rc("serving certificate"))?;

        let sa = KeyPair::generate().map_err(rc("service-account key"))?;

        let pki = Pki {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            sa_key: dir.join("sa.key"),
            sa_pub: dir.join("sa.pub"),
        };
        write(&pki.ca_cert, &issuer.pem())?;
        write(&pki.ca_key, &ca_key_pem)?;
        write(&pki.serving_cert, &serving_cert.pem())?;
        write(&pki.serving_key, &serving_key.serialize_pem())?;
        write(&pki.sa_key, &sa.serialize_pem())?;
        write(&pki.sa_pub, &sa.public_key_pem())?;
        Ok((Self { issuer }, pki))
    }

    /// Issues a client certificate for `user` in `groups`.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rc("client params"))?;
        params.distinguished_name = dn(user, Some(groups));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().map_err(rc("client key"))?;
        let cert = params.signed_by(&key, &self.issuer).map_err(rc("client certificate"))?;
        Ok(ClientCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// The CA certificate in PEM.
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }
}

/// A self-signed serving certificate for 127.0.0.1, for a test's own HTTPS server (e.g. an admission webhook the
/// API server calls); the certificate is also the CA its clients trust.
pub struct SelfSigned {
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The certificate, PEM (a webhook's `caBundle`).
    pub cert_pem: String,
    /// Its PKCS#8 private key, DER.
    pub key_der: Vec<u8>,
}

/// Generates a [`SelfSigned`] certificate for 127.0.0.1.
pub fn self_signed_localhost() -> Result<SelfSigned, Error> {
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).map_err(rc("webhook params"))?;
    params.distinguished_name = dn("127.0.0.1", None);
    let key = KeyPair::generate().map_err(rc("webhook key"))?;
    let cert = params.self_signed(&key).map_err(rc("webhook certificate"))?;
    Ok(SelfSigned { cert_der: cert.der().to_vec(), cert_pem: cert.pem(), key_der: key.serialize_der() })
}

fn dn(common_name: &str, groups: Option<&[&str]>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for group in groups.unwrap_or_default() {
        dn.push(DnType::OrganizationName, *group);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}
