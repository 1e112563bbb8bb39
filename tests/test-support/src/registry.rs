//! A real OCI registry for tests: Debian's `docker-registry` (distribution
//! 2.8) on loopback, on a free port, with its storage in a temporary
//! directory, stopped when the [`Registry`] is dropped.
//!
//! Owns the registry's configuration: TLS with a certificate signed by a CA
//! generated per registry (its PEM is [`Registry::ca_pem`], the `--registry-ca`
//! bundle), htpasswd auth with bcrypt entries, or plain HTTP. It never
//! talks the registry protocol itself: tests use `wasmctrl guest push/pull`,
//! the host, or skopeo.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tools;

/// How the registry listens and whom it lets in.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Serve TLS (a fresh CA signs the certificate for `127.0.0.1` and
    /// `localhost`); plain HTTP otherwise.
    pub tls: bool,
    /// htpasswd users `(name, password)`; none: no authentication.
    pub users: Vec<(String, String)>,
}

impl RegistryOptions {
    /// TLS and one user, as a production registry is reached.
    #[must_use]
    pub fn tls_with_user(user: &str, password: &str) -> Self {
        RegistryOptions {
            tls: true,
            users: vec![(user.to_string(), password.to_string())],
        }
    }

    /// Plain HTTP, no authentication (loopback only).
    #[must_use]
    pub fn plain() -> Self {
        RegistryOptions::default()
    }
}

/// A running registry; dropped, it stops and its storage goes.
pub struct Registry {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    ca_pem: Option<String>,
    options: RegistryOptions,
}

/// The `docker-registry` binary, or `None` (after [`tools::missing`]: a
/// failure under CI, a skip elsewhere).
#[must_use]
pub fn binary() -> Option<PathBuf> {
    let found = tools::on_path("docker-registry")
        .or_else(|| Some(PathBuf::from("/usr/bin/docker-registry")).filter(|p| p.is_file()));
    if found.is_none() {
        tools::missing(
            "docker-registry",
            "is not installed",
            "apt-get install -y docker-registry",
        );
    }
    found
}

/// `skopeo`, or `None` (after [`tools::missing`]).
#[must_use]
pub fn skopeo() -> Option<PathBuf> {
    let found = tools::on_path("skopeo");
    if found.is_none() {
        tools::missing("skopeo", "is not on PATH", "apt-get install -y skopeo");
    }
    found
}

impl Registry {
    /// Starts a registry with `options`; `None` when `docker-registry` is
    /// missing outside CI (see [`binary`]). Panics when it does not come up.
    #[must_use]
    pub fn start(options: RegistryOptions) -> Option<Registry> {
        let binary = binary()?;
        let dir = tempfile::tempdir().expect("registry temp dir");
        let port = crate::free_port();
        let ca_pem = options.tls.then(|| write_tls(dir.path()));
        write_htpasswd(dir.path(), &options.users);
        let config = dir.path().join("config.yml");
        std::fs::write(&config, config_yaml(dir.path(), port, &options)).expect("registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("registry log");
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning docker-registry");
        let mut registry = Registry {
            child,
            dir,
            port,
            ca_pem,
            options,
        };
        registry.wait_listening();
        Some(registry)
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + crate::CONVERGE;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited ({status}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not listen on {}: {}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `127.0.0.1:PORT`, the registry part of a reference.
    #[must_use]
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate (PEM) that signed its TLS certificate, when TLS.
    #[must_use]
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// A directory holding `ca.crt` (skopeo's `--cert-dir` layout), when TLS.
    #[must_use]
    pub fn cert_dir(&self) -> Option<PathBuf> {
        self.ca_pem.as_ref().map(|_| self.dir.path().join("certs"))
    }

    /// The `.dockerconfigjson` content (a `kubernetes.io/dockerconfigjson`
    /// Secret's key) for `user`/`password` at this registry, with `auth`
    /// base64-encoded as `kubectl create secret docker-registry` writes it.
    #[must_use]
    pub fn docker_config(&self, user: &str, password: &str) -> String {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        serde_json::json!({"auths": {self.host(): {"auth": auth}}}).to_string()
    }

    /// Its first user, if it authenticates.
    #[must_use]
    pub fn user(&self) -> Option<(&str, &str)> {
        self.options
            .users
            .first()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// What the registry logged so far.
    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Stops it (its storage stays until drop); a stopped registry refuses
    /// connections, as one that is down.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port with the same storage.
    pub fn restart(&mut self) {
        self.stop();
        let binary = binary().expect("docker-registry was found at start");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("registry.log"))
            .expect("registry log");
        self.child = Command::new(binary)
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning docker-registry");
        self.wait_listening();
    }

    /// The registry's storage of blobs (for tests that corrupt one).
    #[must_use]
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn config_yaml(dir: &Path, port: u16, options: &RegistryOptions) -> String {
    let mut yaml = format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
        dir.join("storage").display()
    );
    if options.tls {
        yaml.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("server.crt").display(),
            dir.join("server.key").display()
        ));
    }
    if !options.users.is_empty() {
        yaml.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: wasmctrl-test\n    path: {}\n",
            dir.join("htpasswd").display()
        ));
    }
    yaml
}

/// Writes a CA, a server certificate it signs (for `127.0.0.1` and
/// `localhost`) and the CA again as `certs/ca.crt`; returns the CA's PEM.
fn write_tls(dir: &Path) -> String {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "wasmctrl test registry CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("server cert");
    std::fs::write(dir.join("server.crt"), cert.pem()).expect("server.crt");
    std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("server.key");
    std::fs::create_dir_all(dir.join("certs")).expect("certs dir");
    std::fs::write(dir.join("certs/ca.crt"), ca.pem()).expect("ca.crt");
    ca.pem()
}

fn write_htpasswd(dir: &Path, users: &[(String, String)]) {
    let lines: String = users
        .iter()
        .map(|(user, password)| {
            // The lowest cost bcrypt allows: every request is checked.
            let hash = bcrypt::hash_with_result(password, 4)
                .expect("bcrypt")
                .format_for_version(bcrypt::Version::TwoY);
            format!("{user}:{hash}\n")
        })
        .collect();
    std::fs::write(dir.join("htpasswd"), lines).expect("htpasswd");
}
