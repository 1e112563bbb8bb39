//! Replicas of the real `wasmctrl` binary, as a kubelet runs them: a child
//! process with its own scratch directory (log, caches, guest files), health
//! and metrics on free localhost ports, stopped by SIGTERM.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use wasmctrl_test_support::http::localhost;

use super::{bounded, http_get, http_status, prom, CONVERGE};

/// The longest a replica may take to exit after SIGTERM or a fatal error.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// One running replica. Killed if dropped.
pub struct Replica {
    pub id: String,
    pub child: tokio::process::Child,
    /// Where `--health-addr` serves (`/healthz`, `/readyz`).
    pub health: SocketAddr,
    /// Where `--metrics-addr` serves (`/metrics`).
    pub metrics: SocketAddr,
    /// Holds the replica's log (`stderr`) and whatever `configure` put there.
    dir: tempfile::TempDir,
}

impl Replica {
    /// Starts the binary as replica `id`. `configure` adds the arguments and
    /// environment, given the replica's scratch directory and the health and
    /// metrics ports it must serve on; stdout is dropped, stderr is the log.
    pub fn start(
        id: &str,
        configure: impl FnOnce(&mut tokio::process::Command, &Path, SocketAddr, SocketAddr),
    ) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("stderr")).unwrap();
        let (health, metrics) = (localhost(super::free_port()), localhost(super::free_port()));
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"));
        configure(&mut command, dir.path(), health, metrics);
        let child = command
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Replica {
            id: id.into(),
            child,
            health,
            metrics,
            dir,
        }
    }

    /// Everything the replica has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// Waits for `/readyz` to answer 200; fails at once if the process exits.
    pub async fn wait_ready(&mut self) {
        let deadline = Instant::now() + CONVERGE;
        while self.readyz().await != Some(200) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{} exited before it was ready: {status}\n{}",
                    self.id,
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} never became ready\n{}",
                self.id,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn healthz(&self) -> Option<u16> {
        http_status(self.health, "/healthz").await
    }

    pub async fn readyz(&self) -> Option<u16> {
        http_status(self.health, "/readyz").await
    }

    /// The `/metrics` text, if it answers 200.
    pub async fn scrape(&self) -> Option<String> {
        http_get(self.metrics, "/metrics")
            .await
            .filter(|(s, _)| *s == 200)
            .map(|(_, body)| body)
    }

    /// `leader_election_master_status{name="<lease>"}`, if exposed.
    pub async fn master_status(&self, lease: &str) -> Option<f64> {
        let name = format!("name=\"{lease}\"");
        let text = self.scrape().await?;
        prom::has_metric(&text, "leader_election_master_status")
            .then(|| prom::metric(&text, "leader_election_master_status", &[&name]))
    }

    /// `wasmctrl_writes_total` of the GPU guest, every verb.
    pub async fn writes(&self) -> Option<f64> {
        let text = self.scrape().await?;
        Some(prom::metric(
            &text,
            "wasmctrl_writes_total",
            &["guest=\"gpu-summary\""],
        ))
    }

    /// Waits until `leader_election_master_status` of `lease` reads `want`.
    pub async fn until_master_status(&self, lease: &str, want: f64) {
        let what = format!("{}: leader_election_master_status {want}", self.id);
        bounded(&what, CONVERGE, async {
            while self.master_status(lease).await != Some(want) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
    }

    /// SIGTERM, as the kubelet stops a container.
    pub fn sigterm(&self) {
        let pid = self.child.id().expect("still running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits for the process to exit: its status and when the test saw it
    /// (an upper bound of the exit).
    pub async fn exited(&mut self) -> (ExitStatus, Instant, SystemTime) {
        let status = tokio::time::timeout(EXIT_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not exit\n{}", self.id, self.log()))
            .unwrap();
        (status, Instant::now(), SystemTime::now())
    }

    /// SIGTERM and the exit status, which must be 0.
    pub async fn stop_cleanly(mut self) {
        self.sigterm();
        let (status, _, _) = self.exited().await;
        assert!(
            status.success(),
            "{} exits 0 on SIGTERM: {status}\n{}",
            self.id,
            self.log()
        );
    }
}
