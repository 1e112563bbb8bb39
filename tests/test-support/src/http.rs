//! Plain HTTP/1.1 probes of localhost endpoints (health, readiness,
//! metrics), and free ports to serve them on.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The longest one probe may take before it counts as no answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A free localhost port for a child process to bind, outside the
/// kernel's ephemeral range (Linux: 32768-60999): a port handed out by
/// binding port 0 and releasing it could be taken by anyone else's bind of
/// port 0 (another test's server, an outgoing connection) before the child
/// binds it. Ports are handed out once per test process, from a start that
/// differs between processes, each checked free by binding it.
#[must_use]
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        (std::process::id().wrapping_mul(7919)) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        let Ok(port) = u16::try_from(FIRST + offset) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    // Every port of the span is taken: fall back to the kernel's choice.
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(FIRST as u16)
}

/// `GET path` at `addr`: the status code and body, or `None` if nothing
/// answers (in time, or with an HTTP response).
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response).into_owned();
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
        Some((status, body))
    };
    tokio::time::timeout(PROBE_TIMEOUT, exchange)
        .await
        .ok()
        .flatten()
}

/// The status code of `GET path` at `addr`, or `None` if nothing answers.
pub async fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    http_get(addr, path).await.map(|(status, _)| status)
}

/// `127.0.0.1:port`.
#[must_use]
pub fn localhost(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}
