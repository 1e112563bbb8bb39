//! `wasmctrl reconcile`: a guest run once over objects from files, its plans
//! printed as JSON. Owns the flags (`--now` parsed here) and the output;
//! the run itself is [`wasmctrl::offline`]'s, exactly as the host would do
//! it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use wasmctrl::guest::{self, GuestRuntime};
use wasmctrl::offline::{self, objects};

use super::sandbox::SandboxArgs;

#[derive(Args)]
pub struct ReconcileArgs {
    /// The guest component (.wasm).
    #[arg(long)]
    guest: PathBuf,
    /// Objects to reconcile over: kubectl JSON (a List or one object) or
    /// multi-document YAML; `-` reads stdin. Repeatable.
    #[arg(long = "objects", required = true)]
    objects: Vec<PathBuf>,
    /// Guest configuration, KEY=VALUE. Repeatable.
    #[arg(long = "config")]
    config: Vec<String>,
    /// The namespace the guest is told the host runs in.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Reconcile only this request key (`namespace/name`, `name`, or an
    /// aggregate key); default: every key the objects produce, one plan
    /// (JSON document) each.
    #[arg(long)]
    key: Option<String>,
    /// The clock the guest sees (`env.now-ms`): RFC 3339
    /// (`2026-01-02T03:04:05Z`) or milliseconds since the Unix epoch;
    /// default: now.
    #[arg(long, value_parser = parse_now)]
    now: Option<u64>,
    /// Refuse an `--objects` input larger than this many bytes.
    #[arg(long, default_value_t = objects::DEFAULT_MAX_INPUT_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    max_input_bytes: u64,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

/// `--now`: RFC 3339 or milliseconds since the epoch, no later than the
/// last instant an API server stores (`metav1.Time` is RFC 3339 with a
/// four-digit year).
fn parse_now(s: &str) -> Result<u64, String> {
    const LAST_MS: u64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let ms = match s.parse::<u64>() {
        Ok(ms) => ms,
        Err(_) => {
            let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|e| {
                format!("{s:?} is neither RFC 3339 nor milliseconds since the epoch: {e}")
            })?;
            u64::try_from(t.timestamp_millis()).map_err(|_| format!("{s:?} is before 1970"))?
        }
    };
    if ms > LAST_MS {
        return Err(format!(
            "{s:?} is after 9999-12-31T23:59:59.999Z, the last time an API server stores"
        ));
    }
    Ok(ms)
}

/// Prints one JSON document per key reconciled: the request and its plan.
pub fn reconcile(args: ReconcileArgs) -> anyhow::Result<()> {
    let config = wasmctrl::config::parse_pairs(&args.config)?;
    let runtime = GuestRuntime::new(args.sandbox.runtime_config()?)?;
    let module = runtime.load_file(&args.guest)?;
    let env = guest::environment(&args.namespace, &config);
    // Decode only what the guest's watches need (the same projection the
    // host caches), which is what makes large dumps fast.
    let manifest = module.manifest(&env)?;
    let keep = offline::keep_for(&manifest);
    let mut read = Vec::new();
    for path in &args.objects {
        read.extend(objects::read_objects_limited(
            path,
            &keep,
            args.max_input_bytes,
        )?);
    }
    let duplicates = objects::duplicates(&read);
    if !duplicates.is_empty() {
        return Err(objects::ObjectsError::Duplicates(duplicates).into());
    }
    let env = env.at(args.now.unwrap_or_else(guest::now_ms));
    let plans = offline::reconcile(&module, &env, &manifest, &read, args.key.as_deref())?;
    let mut out = std::io::stdout().lock();
    for plan in &plans {
        serde_json::to_writer_pretty(&mut out, plan).context("writing the plan")?;
        writeln!(out).context("writing the plan")?;
    }
    Ok(())
}
