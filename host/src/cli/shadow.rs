//! `wasmctrl shadow report`: a running host asked about a shadow over HTTP
//! (`/shadow/GUEST` on its health address), the report printed with its
//! verdict. Owns the flags, the request and the printing; the verdict's
//! rule is [`wasmctrl::shadow::verdict`]'s.

use std::net::SocketAddr;

use anyhow::Context;
use clap::{Args, Subcommand};

use wasmctrl::shadow::verdict::Verdict;

#[derive(Subcommand)]
pub enum ShadowCommand {
    /// Print a shadow's report from a running host's health address and
    /// exit 0 when the shadow agreed with its guest on every key compared
    /// since it loaded (at least one), 1 otherwise: a promotion gate.
    Report(ShadowReportArgs),
}

#[derive(Args)]
pub struct ShadowReportArgs {
    /// The guest the shadow runs beside (its declared name).
    guest: String,
    /// The host's health address (`run --health-addr`).
    #[arg(long, default_value = "127.0.0.1:8081")]
    address: SocketAddr,
    /// Print the whole report as JSON too.
    #[arg(long)]
    json: bool,
}

impl ShadowCommand {
    /// Runs the command; Ok(false) when the shadow has not agreed.
    pub async fn execute(self) -> anyhow::Result<bool> {
        match self {
            ShadowCommand::Report(args) => report(args).await,
        }
    }
}

/// Fetches `/shadow/GUEST` from a running host, prints it and the verdict;
/// Ok(false) when the shadow has not agreed on every key.
async fn report(args: ShadowReportArgs) -> anyhow::Result<bool> {
    let path = format!("/shadow/{}", args.guest);
    let url = format!("http://{}{path}", args.address);
    let (status, text) = super::health_get::get(args.address, &path).await?;
    if status == hyper::StatusCode::NOT_FOUND {
        anyhow::bail!("{}", text.trim());
    }
    if !status.is_success() {
        anyhow::bail!("GET {url}: {status}: {}", text.trim());
    }
    let report: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("GET {url}: the answer is not a shadow report"))?;
    let verdict = Verdict::of(&report);
    let n = |f: &str| report[f].as_u64().unwrap_or(0);
    println!(
        "shadow {} of guest {}: {} same, {} differ ({} keys), {} errors, {} skipped, {} dry runs ({} refused)",
        report["shadow"].as_str().unwrap_or("?"),
        args.guest,
        n("same"),
        n("differs"),
        n("differing_keys"),
        n("errors"),
        n("skipped"),
        n("dry_runs"),
        n("dry_run_refusals"),
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    if verdict.agreed() {
        println!("agreed on every key compared since it loaded");
    } else {
        println!("not agreed:");
        for reason in &verdict.reasons {
            println!("  - {reason}");
        }
    }
    Ok(verdict.agreed())
}
