//! `wasmctrl replay`: every case recorded with `run --record` run again
//! through a guest, the plans that differ printed. Owns the flags and the
//! report; replaying a case is [`wasmctrl::recording`]'s.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use wasmctrl::guest::GuestRuntime;
use wasmctrl::recording::{case_files, replay as replay_case, RecordedCase, Replayed};

use super::sandbox::SandboxArgs;

#[derive(Args)]
pub struct ReplayArgs {
    /// The guest component (.wasm) to replay the cases through.
    #[arg(long)]
    guest: PathBuf,
    /// A directory of recorded cases (`run --record DIR`, or one guest's
    /// subdirectory of it); read recursively.
    dir: PathBuf,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

/// Replays every case; prints one line per case that differs or fails and
/// a summary. Ok(false) when any did.
pub fn replay(args: ReplayArgs) -> anyhow::Result<bool> {
    let runtime = GuestRuntime::new(args.sandbox.runtime_config()?)?;
    let module = runtime.load_file(&args.guest)?;
    let files = case_files(&args.dir)?;
    if files.is_empty() {
        anyhow::bail!("{}: no recorded cases (*.json) in it", args.dir.display());
    }
    let (mut same, mut differ, mut failed) = (0u64, 0u64, 0u64);
    let mut out = std::io::stdout().lock();
    for path in &files {
        let case = RecordedCase::read(path)?;
        let key = &case.request.key;
        match replay_case(&module, &case) {
            Replayed::Same => same += 1,
            Replayed::Differs {
                recorded_only,
                replayed_only,
            } => {
                differ += 1;
                writeln!(out, "{}: key {key}: the plan differs", path.display())?;
                for item in &recorded_only {
                    writeln!(out, "  - recorded: {item}")?;
                }
                for item in &replayed_only {
                    writeln!(out, "  + replayed: {item}")?;
                }
            }
            Replayed::Error(why) => {
                failed += 1;
                writeln!(out, "{}: key {key}: not replayed: {why}", path.display())?;
            }
        }
    }
    writeln!(
        out,
        "{} cases: {same} same, {differ} differ, {failed} not replayed",
        files.len()
    )?;
    Ok(differ == 0 && failed == 0)
}
