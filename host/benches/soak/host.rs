//! The host under test: the real `wasmctrl run` binary as a child process,
//! restarted when it exits (as a Deployment would) and SIGKILLed on demand;
//! a sampler reads its RSS and `wasmctrl_writes_total` across restarts.
//! It never creates pods or injects server faults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use wasmctrl_test_support::http::{free_port, http_get, localhost};
use wasmctrl_test_support::prom;

/// How often the sampler looks at the process.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// RSS is sampled only once a process is this old (a process that has
/// just been exec'd is a few MiB and says nothing about the host).
const RSS_SETTLED: Duration = Duration::from_secs(3);

/// Counters the sampler keeps; read and reset per fault cycle.
#[derive(Debug, Default, Clone)]
pub struct Sampled {
    /// `wasmctrl_writes_total{guest="gpu-summary"}` summed over every
    /// process so far (a new process counts from zero again).
    pub writes: f64,
    /// Times the process exited on its own and was restarted.
    pub exits: u32,
    /// RSS samples (bytes) since the last [`Host::take_rss`].
    pub rss: Vec<u64>,
    /// Every RSS sample of the run: (seconds since start, bytes).
    pub rss_all: Vec<(f64, u64)>,
}

struct Proc {
    child: Child,
    metrics: SocketAddr,
    /// The writes counter this process last reported.
    last_writes: f64,
    spawned: std::time::Instant,
}

struct Inner {
    proc: Option<Proc>,
    sampled: Sampled,
    started: std::time::Instant,
}

/// Handle to the supervised host; cheap to clone.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Mutex<Inner>>,
    spec: Arc<Spec>,
}

struct Spec {
    exe: PathBuf,
    guest: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    dir: PathBuf,
}

impl Host {
    /// Starts the host and its supervisor task.
    pub async fn start(guest: &Path, kubeconfig: &Path, namespace: &str, dir: &Path) -> Host {
        let spec = Arc::new(Spec {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_wasmctrl")),
            guest: guest.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: namespace.to_string(),
            dir: dir.to_path_buf(),
        });
        let host = Host {
            inner: Arc::new(Mutex::new(Inner {
                proc: Some(spawn(&spec)),
                sampled: Sampled::default(),
                started: std::time::Instant::now(),
            })),
            spec,
        };
        let supervisor = host.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SAMPLE_EVERY).await;
                supervisor.sample().await;
            }
        });
        host
    }

    /// One supervision step: restart an exited process, read RSS and the
    /// writes counter.
    async fn sample(&self) {
        let (metrics, pid) = {
            let mut inner = self.inner.lock().await;
            let exited = inner
                .proc
                .as_mut()
                .is_some_and(|p| p.child.try_wait().ok().flatten().is_some());
            if exited {
                inner.sampled.exits += 1;
                inner.proc = Some(spawn(&self.spec));
            }
            let Some(p) = inner.proc.as_ref() else { return };
            let settled = p.spawned.elapsed() >= RSS_SETTLED;
            (p.metrics, p.child.id().filter(|_| settled))
        };
        if let Some(rss) = pid.and_then(rss_bytes) {
            let mut inner = self.inner.lock().await;
            let at = inner.started.elapsed().as_secs_f64();
            inner.sampled.rss.push(rss);
            inner.sampled.rss_all.push((at, rss));
        }
        if let Some((200, text)) = http_get(metrics, "/metrics").await {
            let now = prom::metric(&text, "wasmctrl_writes_total", &["guest=\"gpu-summary\""]);
            let mut inner = self.inner.lock().await;
            let Inner { proc, sampled, .. } = &mut *inner;
            // Only count for the process that answered (a restart may have
            // replaced it meanwhile).
            if let Some(p) = proc.as_mut().filter(|p| p.metrics == metrics) {
                if now >= p.last_writes {
                    sampled.writes += now - p.last_writes;
                    p.last_writes = now;
                }
            }
        }
    }

    /// SIGKILLs the process and starts a new one at once (a Deployment
    /// restarts a killed pod's container).
    pub async fn kill_and_restart(&self) {
        let mut inner = self.inner.lock().await;
        if let Some(mut p) = inner.proc.take() {
            // kill() sends SIGKILL.
            let _ = p.child.kill().await;
        }
        inner.proc = Some(spawn(&self.spec));
    }

    /// A copy of the counters.
    pub async fn sampled(&self) -> Sampled {
        self.inner.lock().await.sampled.clone()
    }

    /// The RSS samples since the last call, emptied.
    pub async fn take_rss(&self) -> Vec<u64> {
        std::mem::take(&mut self.inner.lock().await.sampled.rss)
    }

    /// Takes a fresh writes reading now (instead of waiting for the
    /// sampler), so a window's end is precise.
    pub async fn writes_now(&self) -> f64 {
        self.sample().await;
        self.inner.lock().await.sampled.writes
    }

    /// The host's log so far (every process appends to one file).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.spec.dir.join("host.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the process (SIGKILL: the run is over).
    pub async fn stop(&self) {
        if let Some(mut p) = self.inner.lock().await.proc.take() {
            let _ = p.child.kill().await;
        }
    }
}

fn spawn(spec: &Spec) -> Proc {
    let (health, metrics) = (localhost(free_port()), localhost(free_port()));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(spec.dir.join("host.log"))
        .expect("host log file");
    let child = Command::new(&spec.exe)
        .arg("run")
        .arg("--guest")
        .arg(&spec.guest)
        .arg(format!("--kubeconfig={}", spec.kubeconfig.display()))
        .arg(format!("--namespace={}", spec.namespace))
        .arg(format!("--health-addr={health}"))
        .arg(format!("--metrics-addr={metrics}"))
        .arg(format!(
            "--guest-cache-dir={}",
            spec.dir.join("cache").display()
        ))
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("the wasmctrl binary starts");
    Proc {
        child,
        metrics,
        last_writes: 0.0,
        spawned: std::time::Instant::now(),
    }
}

/// `VmRSS` of `pid` in bytes.
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}
