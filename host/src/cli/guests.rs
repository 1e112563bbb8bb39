//! `wasmctrl guests`: a running host asked for each guest's state over
//! HTTP (`/guests` on its health address), printed as a table — one row
//! per guest, then a line for each version waiting or refused and why.
//! Owns the flags and the table; the states are
//! [`wasmctrl::supervisor::status`]'s.

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;

use wasmctrl::supervisor::status::{GuestSource, GuestStatus, Version};

#[derive(Args)]
pub struct GuestsArgs {
    /// The host's health address (`run --health-addr`).
    #[arg(long, default_value = "127.0.0.1:8081")]
    address: SocketAddr,
    /// Print the answer as JSON, as `/guests` gives it.
    #[arg(long)]
    json: bool,
}

/// The answer of `/guests`.
#[derive(serde::Deserialize)]
struct Answer {
    guests: Vec<GuestStatus>,
}

/// Fetches `/guests` from a running host and prints it.
pub async fn guests(args: GuestsArgs) -> anyhow::Result<()> {
    let (status, text) = super::health_get::get(args.address, "/guests").await?;
    let url = format!("http://{}/guests", args.address);
    if !status.is_success() {
        anyhow::bail!("GET {url}: {status}: {}", text.trim());
    }
    let answer: Answer = serde_json::from_str(&text)
        .with_context(|| format!("GET {url}: the answer is not a list of guests"))?;
    if args.json {
        print!("{text}");
    } else {
        print!("{}", table(&answer.guests));
    }
    Ok(())
}

/// Where a version comes from, in a word: the ConfigMap key, the file, or
/// the OCI reference.
fn source(s: &GuestSource) -> String {
    match s {
        GuestSource::ConfigMap { key, .. } => key.clone(),
        other => other.to_string(),
    }
}

/// The contract's version alone (`0.3.0`).
fn contract(v: &Version) -> &str {
    v.contract.as_deref().map_or("-", |c| {
        c.rsplit_once('@').map_or(c, |(_, version)| version)
    })
}

fn state(v: &Version) -> String {
    format!("{} {}", v.state.name(), v.short_digest())
}

fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

/// One row per guest and a line for each version waiting or refused.
fn table(guests: &[GuestStatus]) -> String {
    let header = [
        "GUEST",
        "SOURCE",
        "DIGEST",
        "CONTRACT",
        "STATE",
        "SHADOW",
        "LAST SWAP",
        "RECONCILES",
        "ERRORS",
    ];
    let rows: Vec<[String; 9]> = guests
        .iter()
        .map(|g| {
            [
                g.name.clone(),
                source(&g.current.source),
                g.current.short_digest().to_string(),
                contract(&g.current).to_string(),
                g.current.state.name().to_string(),
                g.shadow.as_ref().map_or_else(|| "-".into(), state),
                g.last_swap.map_or_else(
                    || "-".into(),
                    |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                ),
                count(g.reconciles),
                count(g.errors),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&header.map(String::from));
    for (g, row) in guests.iter().zip(&rows) {
        out.push_str(&line(row));
        let why = |label: &str, v: &Version| {
            v.state.message().map(|m| {
                format!(
                    "  {label}{} {} from {}: {m}\n",
                    v.state.name(),
                    v.short_digest(),
                    source(&v.source)
                )
            })
        };
        let lines = [
            why("", &g.current),
            g.candidate.as_ref().and_then(|c| why("new version ", c)),
            g.shadow.as_ref().and_then(|s| why("shadow ", s)),
        ];
        out.extend(lines.into_iter().flatten());
    }
    if guests.is_empty() {
        out.push_str("(no guests)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmctrl::supervisor::status::{LoadState, Statuses};

    fn cm(key: &str) -> GuestSource {
        GuestSource::ConfigMap {
            key: key.into(),
            path: format!("/guests/{key}"),
            compression: None,
        }
    }

    #[test]
    fn each_guest_is_a_row_and_each_version_not_running_says_why() {
        let s = Statuses::default();
        s.report(
            "a",
            "alpha",
            Version::loaded(cm("a.wasm.gz"), "0123456789abcdef"),
        );
        let bad = LoadState::Refused {
            reason: "compile".into(),
            message: "guest alpha: not a component".into(),
        };
        s.report(
            "a",
            "alpha",
            Version::new(cm("a.wasm.gz"), bad).digest("fedcba9876543210"),
        );
        let waits =
            Version::waiting_for_kind(cm("w.wasm"), "aaaabbbbccccdddd", "example.com/v1/Widget");
        s.report("w", "w", waits);
        let mut guests = s.all();
        guests[0].reconciles = Some(12);
        guests[0].errors = Some(1);
        let out = table(&guests);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "GUEST  SOURCE     DIGEST        CONTRACT  STATE    SHADOW  LAST SWAP  RECONCILES  ERRORS"
        );
        assert_eq!(
            lines[1],
            "alpha  a.wasm.gz  0123456789ab  0.3.0     loaded   -       -          12          1"
        );
        assert_eq!(
            lines[2],
            "  new version refused fedcba987654 from a.wasm.gz: guest alpha: not a component"
        );
        assert_eq!(
            lines[3],
            "w      w.wasm     aaaabbbbcccc  0.3.0     waiting  -       -          -           -"
        );
        assert!(
            lines[4].starts_with(
                "  waiting aaaabbbbcccc from w.wasm: waiting for example.com/v1/Widget"
            ),
            "{out}"
        );
        assert_eq!(lines.len(), 5);
        assert_eq!(
            table(&[]),
            "GUEST  SOURCE  DIGEST  CONTRACT  STATE  SHADOW  LAST SWAP  RECONCILES  ERRORS\n(no guests)\n"
        );
    }
}
