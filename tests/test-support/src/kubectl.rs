//! The real kubectl binary against an embedded API server, with its own
//! kubeconfig and cache in a scratch directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmctrl_apiserver::RunningApiServer;

/// The longest one kubectl command may take.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);

/// kubectl pointed at one server with one identity. The scratch directory
/// (kubeconfig, discovery cache, files a test writes) lives as long as it.
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl as `server`'s admin; `None` when kubectl is not installed
    /// and the test is skipped (under CI that fails the test instead, see
    /// [`crate::tools`]).
    #[must_use]
    pub fn admin(server: &RunningApiServer) -> Option<Self> {
        let kubectl = Self::with_kubeconfig(crate::tools::kubectl()?, |path| {
            server.write_kubeconfig(path).unwrap();
        });
        Some(kubectl)
    }

    /// kubectl authenticating with `token` (see `RunningApiServer::add_token`);
    /// `None` as for [`Kubectl::admin`].
    #[must_use]
    pub fn for_token(server: &RunningApiServer, token: &str) -> Option<Self> {
        let kubectl = Self::with_kubeconfig(crate::tools::kubectl()?, |path| {
            std::fs::write(path, server.kubeconfig_for_token(token)).unwrap();
        });
        Some(kubectl)
    }

    fn with_kubeconfig(bin: PathBuf, write: impl FnOnce(&Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        write(&kubeconfig);
        Kubectl {
            bin,
            kubeconfig,
            dir,
        }
    }

    /// The scratch directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kubectl command with this kubeconfig and cache, killed when
    /// dropped; for what [`Kubectl::run`] cannot do (a watch in the
    /// background).
    #[must_use]
    pub fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.bin);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir().join("cache"))
            .kill_on_drop(true);
        command
    }

    /// Runs kubectl with `args`; returns (success, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(KUBECTL_TIMEOUT, self.command().args(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} took more than {KUBECTL_TIMEOUT:?}"))
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl with `args`, which must succeed; returns its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed: {err}\n{out}");
        out
    }

    /// Writes `content` to `name` in the scratch directory; returns the path.
    #[must_use]
    pub fn write(&self, name: &str, content: &str) -> String {
        let path = self.dir().join(name);
        std::fs::write(&path, content).unwrap();
        path.display().to_string()
    }
}
