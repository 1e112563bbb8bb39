//! The faults the soak injects: the embedded server's admin endpoint
//! (`POST /wasmctrl/faults`, see `apiserver/src/http/faults.rs`) and a
//! SIGKILL of the host. Only picks and sends faults; it never measures.

use std::time::Duration;

use kube::Client;
use serde_json::{json, Value};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    DropWatches,
    /// Compact history, then drop watches, so they resume into a 410.
    CompactHistory,
    Fail409,
    Fail500,
    Fail503,
    Fail429,
    Latency,
    DenyVerb,
    RestartListener,
    KillHost,
}

impl Kind {
    /// Every kind, in table order.
    pub const ALL: [Kind; 10] = [
        Kind::DropWatches,
        Kind::CompactHistory,
        Kind::Fail409,
        Kind::Fail500,
        Kind::Fail503,
        Kind::Fail429,
        Kind::Latency,
        Kind::DenyVerb,
        Kind::RestartListener,
        Kind::KillHost,
    ];

    /// The kind's name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Kind::DropWatches => "drop-watches",
            Kind::CompactHistory => "compact-history",
            Kind::Fail409 => "fail-409",
            Kind::Fail500 => "fail-500",
            Kind::Fail503 => "fail-503",
            Kind::Fail429 => "fail-429",
            Kind::Latency => "latency",
            Kind::DenyVerb => "deny-verb",
            Kind::RestartListener => "restart-listener",
            Kind::KillHost => "sigkill-host",
        }
    }

    /// The admin commands that inject one fault of this kind (empty for
    /// [`Kind::KillHost`], which the bench does itself), with a short
    /// description of the parameters picked.
    pub fn commands(self, rng: &mut fastrand::Rng) -> (Vec<Value>, String) {
        let fail = |code: u16, rng: &mut fastrand::Rng| {
            let count = rng.u32(3..=30);
            (
                vec![json!({"action": "fail", "code": code, "count": count, "retry_after": 1})],
                format!("next {count} requests"),
            )
        };
        match self {
            Kind::DropWatches => (vec![json!({"action": "drop-watches"})], String::new()),
            Kind::CompactHistory => (
                vec![
                    json!({"action": "compact-history"}),
                    json!({"action": "drop-watches"}),
                ],
                String::new(),
            ),
            Kind::Fail409 => fail(409, rng),
            Kind::Fail500 => fail(500, rng),
            Kind::Fail503 => fail(503, rng),
            Kind::Fail429 => fail(429, rng),
            Kind::Latency => {
                let millis = rng.u64(100..=1000);
                (
                    vec![json!({"action": "latency", "millis": millis})],
                    format!("{millis} ms"),
                )
            }
            Kind::DenyVerb => {
                let verb = ["patch", "list", "watch", "get"][rng.usize(..4)];
                (
                    vec![json!({"action": "deny-verb", "verb": verb})],
                    verb.to_string(),
                )
            }
            Kind::RestartListener => {
                let down = rng.u64(200..=3000);
                (
                    vec![json!({"action": "restart-listener", "down_millis": down})],
                    format!("down {down} ms"),
                )
            }
            Kind::KillHost => (Vec::new(), "SIGKILL".into()),
        }
    }
}

/// Sends one admin command; Err with the reason when it did not land.
pub async fn send(client: &Client, command: &Value) -> Result<(), String> {
    let body = serde_json::to_vec(command).map_err(|e| e.to_string())?;
    let request = http::Request::post("/wasmctrl/faults")
        .header("content-type", "application/json")
        .body(body)
        .map_err(|e| e.to_string())?;
    client
        .request_text(request)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `clear`, retried while the listener is down (a restart-listener fault
/// keeps it down for a while).
pub async fn clear(client: &Client) {
    let clear = json!({"action": "clear"});
    for _ in 0..300 {
        if send(client, &clear).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the embedded server never took the clear command");
}
