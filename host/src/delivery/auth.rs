//! Registry credentials in the `.dockerconfigjson` format of a
//! `kubernetes.io/dockerconfigjson` Secret (what `imagePullSecrets` and
//! `kubectl create secret docker-registry` use): `auths` keyed by registry,
//! each with `auth` (base64 `user:password`) or `username`/`password`.
//! It never logs a credential.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use oci_client::secrets::RegistryAuth;

/// Why a credentials file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("registry credentials {}: {problem}", path.display())]
pub struct AuthError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong (never the secret itself).
    pub problem: String,
}

#[derive(serde::Deserialize)]
struct File {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(serde::Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// Credentials by registry host.
#[derive(Default, Clone)]
pub struct DockerConfig {
    by_host: BTreeMap<String, (String, String)>,
}

impl std::fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_host.keys()).finish()
    }
}

impl DockerConfig {
    /// Reads a `.dockerconfigjson` file.
    pub fn load(path: &Path) -> Result<Self, AuthError> {
        let raw = std::fs::read(path).map_err(|e| AuthError {
            path: path.to_path_buf(),
            problem: format!("cannot read: {e}"),
        })?;
        Self::parse(&raw).map_err(|problem| AuthError {
            path: path.to_path_buf(),
            problem,
        })
    }

    fn parse(raw: &[u8]) -> Result<Self, String> {
        let file: File = serde_json::from_slice(raw)
            .map_err(|e| format!("not a .dockerconfigjson ({{\"auths\": {{…}}}}): {e}"))?;
        let mut by_host = BTreeMap::new();
        for (key, entry) in file.auths {
            let pair = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|e| format!("auths.{key}.auth is not base64: {e}"))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| format!("auths.{key}.auth is not UTF-8"))?;
                    let (u, p) = text.split_once(':').ok_or_else(|| {
                        format!("auths.{key}.auth is not base64 of user:password")
                    })?;
                    (u.to_string(), p.to_string())
                }
                (None, Some(u), Some(p)) => (u, p),
                _ => {
                    return Err(format!(
                        "auths.{key} has neither auth nor username and password"
                    ))
                }
            };
            by_host.insert(host_of(&key).to_string(), pair);
        }
        Ok(DockerConfig { by_host })
    }

    /// The credentials for `registry` (a host, with its port if any), or
    /// anonymous access.
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        match self.by_host.get(registry) {
            Some((u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// `https://ghcr.io/v1/` → `ghcr.io`: keys may be URLs (Docker Hub's are).
fn host_of(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_and_username_password_entries_both_give_basic_credentials() {
        let raw = br#"{"auths": {
            "127.0.0.1:5000": {"auth": "dXNlcjpwYTpzcw=="},
            "https://ghcr.io/v1/": {"username": "bot", "password": "t"}
        }}"#;
        let c = DockerConfig::parse(raw).unwrap();
        assert_eq!(
            c.for_registry("127.0.0.1:5000"),
            RegistryAuth::Basic("user".into(), "pa:ss".into())
        );
        assert_eq!(
            c.for_registry("ghcr.io"),
            RegistryAuth::Basic("bot".into(), "t".into())
        );
        assert_eq!(c.for_registry("quay.io"), RegistryAuth::Anonymous);
        assert!(
            !format!("{c:?}").contains("pa:ss"),
            "Debug never shows a secret"
        );
    }

    #[test]
    fn unusable_files_name_the_entry_not_the_secret() {
        let e = DockerConfig::parse(br#"{"auths": {"r.io": {"auth": "!!"}}}"#).unwrap_err();
        assert!(e.contains("auths.r.io.auth"), "{e}");
        assert!(DockerConfig::parse(b"\"text\"").is_err());
        let e = DockerConfig::parse(br#"{"auths": {"r.io": {}}}"#).unwrap_err();
        assert!(e.contains("neither"), "{e}");
    }
}
