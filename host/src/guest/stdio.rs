//! Guest stdout and stderr, routed to `tracing`, and the few inert WASI
//! functions Rust's `std` calls on the way to them. Owns the only WASI
//! functions the host implements and each call's buffered output. It grants
//! no capability: the environment is empty, nothing here reads host state,
//! and every other WASI import (clocks, randomness, files, sockets, stdin,
//! arguments, terminals, exit) still traps.
//!
//! # The functions
//! Those a std guest built for `wasm32-wasip2` calls (through wasi-libc)
//! from `println!`, `eprintln!` and its panic handler. Observed with
//! `tests/guests/guest-println`: `wasi:cli/stdout` `get-stdout` /
//! `wasi:cli/stderr` `get-stderr`, then once per stream `wasi:io/streams`
//! output-stream `subscribe`, then per write `check-write`, `write`,
//! `blocking-flush`; a panic first reads `wasi:cli/environment`
//! `get-environment` (for `RUST_BACKTRACE`). Beside those:
//! `blocking-write-and-flush` and `flush` (other std and wit-bindgen
//! versions), and the `wasi:io/poll` pollable `subscribe` returns, which is
//! always ready (`ready`, `block`): a log line is never back-pressured.
//!
//! # Output
//! Output is split into lines and logged with the guest's name (stdout at
//! info, stderr at warn), capped per call ([`MAX_OUTPUT_PER_CALL`]); the
//! tail of stderr is kept, past the cap too, so a panic's message can be
//! reported in the call's error. A call that asks for more stream and
//! pollable handles than the per-call cap traps.

use wasmtime::component::{ComponentType, Linker, Lower, Resource, ResourceType};

use super::CallState;

/// The WASI version whose stdio this host implements.
pub const WASI_VERSION: &str = "0.2.6";
/// At most this many bytes of output per call reach the logs.
pub const MAX_OUTPUT_PER_CALL: usize = 64 * 1024;
/// How much of a call's stderr is kept (past the log cap too) for
/// [`Output::panic_message`].
const STDERR_TAIL: usize = 4 * 1024;

/// Host side of a guest's stdout (rep 1) or stderr (rep 2).
pub struct OutputStream;
/// `wasi:io/error` (never created: writes do not fail).
pub struct IoError;
/// `wasi:io/poll` pollable: always ready.
pub struct Pollable;

/// `wasi:io/streams` `stream-error`.
#[derive(ComponentType, Lower)]
#[component(variant)]
pub enum StreamError {
    /// The last operation failed.
    #[component(name = "last-operation-failed")]
    LastOperationFailed(Resource<IoError>),
    /// The stream is closed.
    #[component(name = "closed")]
    Closed,
}

const STDOUT: u32 = 1;
const STDERR: u32 = 2;
/// Handles (streams, pollables) one call may obtain: std takes four; the
/// cap keeps a guest from growing the host's handle table in a loop.
const MAX_HANDLES_PER_CALL: u32 = 256;
/// What `check-write` grants: the most a guest may write at once. wasi-libc
/// and std split larger writes.
const WRITE_BUDGET: u64 = 4096;

/// Buffered output of one call.
#[derive(Default)]
pub struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    total: usize,
    truncated: bool,
    stderr_tail: Vec<u8>,
    handles: u32,
}

impl Output {
    fn write(&mut self, guest: &str, stream: u32, bytes: &[u8]) {
        if stream == STDERR {
            self.stderr_tail.extend_from_slice(bytes);
            let excess = self.stderr_tail.len().saturating_sub(STDERR_TAIL);
            self.stderr_tail.drain(..excess);
        }
        let room = MAX_OUTPUT_PER_CALL.saturating_sub(self.total);
        let take = bytes.len().min(room);
        if take < bytes.len() && !self.truncated {
            self.truncated = true;
            tracing::warn!(target: "wasmctrl::guest", guest, "guest output over {MAX_OUTPUT_PER_CALL} bytes in one call; the rest is dropped");
        }
        self.total += take;
        let buf = if stream == STDERR {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        buf.extend_from_slice(&bytes[..take]);
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            emit(guest, stream, &line[..line.len() - 1]);
        }
    }

    /// Logs what is left without a trailing newline.
    pub fn flush(&mut self, guest: &str) {
        for (stream, buf) in [(STDOUT, &mut self.stdout), (STDERR, &mut self.stderr)] {
            if !buf.is_empty() {
                let line = std::mem::take(buf);
                emit(guest, stream, &line);
            }
        }
    }

    /// Empties the buffers for the next call (after [`Self::flush`]: what
    /// was left is logged, not dropped).
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// The message of the last panic Rust's `std` printed to stderr in this
    /// call (`thread '…' panicked at FILE:LINE:COL:` then the message), with
    /// its location: `told to panic (at src/lib.rs:9:5)`.
    pub fn panic_message(&self) -> Option<String> {
        panic_message(&String::from_utf8_lossy(&self.stderr_tail))
    }
}

/// Finds the last std panic report in `stderr`.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")?;
    let report = &stderr[start + "panicked at ".len()..];
    let (location, rest) = report.split_once(":\n")?;
    let message = rest
        .split("\nnote: run with `RUST_BACKTRACE")
        .next()
        .unwrap_or(rest)
        .trim_end();
    Some(format!("{message} (at {location})"))
}

fn emit(guest: &str, stream: u32, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    if stream == STDERR {
        tracing::warn!(target: "wasmctrl::guest::stderr", guest, "{text}");
    } else {
        tracing::info!(target: "wasmctrl::guest::stdout", guest, "{text}");
    }
}

/// Counts one more handle handed to the guest; past the cap the call traps.
fn new_handle(store: &mut wasmtime::StoreContextMut<'_, CallState>) -> wasmtime::Result<()> {
    let output = &mut store.data_mut().output;
    output.handles += 1;
    if output.handles > MAX_HANDLES_PER_CALL {
        return Err(wasmtime::Error::msg(format!(
            "more than {MAX_HANDLES_PER_CALL} stdio handles requested in one call"
        )));
    }
    Ok(())
}

fn write_to(
    mut store: wasmtime::StoreContextMut<'_, CallState>,
    (this, bytes): (Resource<OutputStream>, Vec<u8>),
) -> wasmtime::Result<(Result<(), StreamError>,)> {
    let state = store.data_mut();
    let guest = state.guest.clone();
    state.output.write(&guest, this.rep(), &bytes);
    Ok((Ok(()),))
}

/// Defines stdout/stderr, and the inert functions std calls around them, in
/// `linker`. Whatever else a guest imports is left undefined (the caller
/// defines it to trap).
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let pollable = || ResourceType::host::<Pollable>();
    let mut poll = linker.instance(&format!("wasi:io/poll@{WASI_VERSION}"))?;
    poll.resource("pollable", pollable(), |_, _| Ok(()))?;
    poll.func_wrap(
        "[method]pollable.ready",
        |_, (_this,): (Resource<Pollable>,)| Ok((true,)),
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |_, (_this,): (Resource<Pollable>,)| Ok(()),
    )?;

    linker
        .instance(&format!("wasi:io/error@{WASI_VERSION}"))?
        .resource("error", ResourceType::host::<IoError>(), |_, _| Ok(()))?;

    let output_stream = || ResourceType::host::<OutputStream>();
    let mut s = linker.instance(&format!("wasi:io/streams@{WASI_VERSION}"))?;
    s.resource("error", ResourceType::host::<IoError>(), |_, _| Ok(()))?;
    s.resource("pollable", pollable(), |_, _| Ok(()))?;
    s.resource("output-stream", output_stream(), |_, _| Ok(()))?;
    s.func_wrap(
        "[method]output-stream.check-write",
        |_, (_this,): (Resource<OutputStream>,)| Ok((Ok::<u64, StreamError>(WRITE_BUDGET),)),
    )?;
    // Lines are forwarded as they complete, so a write is also a flush.
    s.func_wrap("[method]output-stream.write", write_to)?;
    s.func_wrap("[method]output-stream.blocking-write-and-flush", write_to)?;
    for method in [
        "[method]output-stream.blocking-flush",
        "[method]output-stream.flush",
    ] {
        s.func_wrap(method, |_, (_this,): (Resource<OutputStream>,)| {
            Ok((Ok::<(), StreamError>(()),))
        })?;
    }
    // Ready at once: wasi-libc waits on it when `check-write` grants less
    // than it wants to write.
    s.func_wrap(
        "[method]output-stream.subscribe",
        |mut store: wasmtime::StoreContextMut<'_, CallState>,
         (_this,): (Resource<OutputStream>,)| {
            new_handle(&mut store)?;
            Ok((Resource::<Pollable>::new_own(0),))
        },
    )?;

    for (iface, func, rep) in [
        ("stdout", "get-stdout", STDOUT),
        ("stderr", "get-stderr", STDERR),
    ] {
        let mut i = linker.instance(&format!("wasi:cli/{iface}@{WASI_VERSION}"))?;
        i.resource("output-stream", output_stream(), |_, _| Ok(()))?;
        i.func_wrap(func, move |mut store, (): ()| {
            new_handle(&mut store)?;
            Ok((Resource::<OutputStream>::new_own(rep),))
        })?;
    }

    // Empty, rather than a trap: std's panic handler asks for
    // RUST_BACKTRACE before it prints the message.
    let mut env = linker.instance(&format!("wasi:cli/environment@{WASI_VERSION}"))?;
    env.func_wrap("get-environment", |_, (): ()| {
        Ok((Vec::<(String, String)>::new(),))
    })?;

    Ok(())
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn std_panic_report_yields_message_and_location() {
        let stderr = "reconcile k: to stderr\n\nthread '<unnamed>' panicked at src/lib.rs:120:13:\ntold to panic\nin two lines\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("told to panic\nin two lines (at src/lib.rs:120:13)")
        );
        assert_eq!(panic_message("no panic here\n"), None);
    }
}
