//! Guest stdout and stderr, routed to `tracing`.
//!
//! Owns the only WASI functions the host implements: `get-stdout`,
//! `get-stderr` and the output-stream writes Rust's `std` uses for
//! `println!`/`eprintln!` (`wasi:io/streams@0.2.6` `check-write`, `write`,
//! `blocking-flush`). Output is split into lines and logged with the guest's
//! name (stdout at info, stderr at warn), capped per call. It grants no
//! other capability: every other WASI import still traps.

use wasmtime::component::{ComponentType, Linker, Lower, Resource, ResourceType};

use super::CallState;

/// The WASI version whose stdio this host implements.
pub const WASI_VERSION: &str = "0.2.6";
/// At most this many bytes of output per call reach the logs.
pub const MAX_OUTPUT_PER_CALL: usize = 64 * 1024;

/// Host side of a guest's stdout (rep 1) or stderr (rep 2).
pub struct OutputStream;
/// `wasi:io/error` (never created: writes do not fail).
pub struct IoError;

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

/// Buffered output of one call.
#[derive(Default)]
pub struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    total: usize,
    truncated: bool,
}

impl Output {
    fn write(&mut self, guest: &str, stream: u32, bytes: &[u8]) {
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
}

fn emit(guest: &str, stream: u32, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    if stream == STDERR {
        tracing::warn!(target: "wasmctrl::guest::stderr", guest, "{text}");
    } else {
        tracing::info!(target: "wasmctrl::guest::stdout", guest, "{text}");
    }
}

/// Defines stdout/stderr in `linker`.
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let io_error = format!("wasi:io/error@{WASI_VERSION}");
    let streams = format!("wasi:io/streams@{WASI_VERSION}");
    linker.instance(&io_error)?.resource(
        "error",
        ResourceType::host::<IoError>(),
        |_, _| Ok(()),
    )?;
    let mut s = linker.instance(&streams)?;
    s.resource("error", ResourceType::host::<IoError>(), |_, _| Ok(()))?;
    s.resource(
        "output-stream",
        ResourceType::host::<OutputStream>(),
        |_, _| Ok(()),
    )?;
    s.func_wrap(
        "[method]output-stream.check-write",
        |_, (_this,): (Resource<OutputStream>,)| Ok((Ok::<u64, StreamError>(4096),)),
    )?;
    // Lines are forwarded as they complete, so a write is also a flush.
    for method in [
        "[method]output-stream.write",
        "[method]output-stream.blocking-write-and-flush",
    ] {
        s.func_wrap(
            method,
            |mut store: wasmtime::StoreContextMut<'_, CallState>,
             (this, bytes): (Resource<OutputStream>, Vec<u8>)| {
                let state = store.data_mut();
                let guest = state.guest.clone();
                state.output.write(&guest, this.rep(), &bytes);
                Ok((Ok::<(), StreamError>(()),))
            },
        )?;
    }
    for method in [
        "[method]output-stream.blocking-flush",
        "[method]output-stream.flush",
    ] {
        s.func_wrap(method, |_, (_this,): (Resource<OutputStream>,)| {
            Ok((Ok::<(), StreamError>(()),))
        })?;
    }
    for (iface, func, rep) in [
        ("stdout", "get-stdout", STDOUT),
        ("stderr", "get-stderr", STDERR),
    ] {
        let mut i = linker.instance(&format!("wasi:cli/{iface}@{WASI_VERSION}"))?;
        i.resource(
            "output-stream",
            ResourceType::host::<OutputStream>(),
            |_, _| Ok(()),
        )?;
        i.func_wrap(func, move |_, (): ()| {
            Ok((Resource::<OutputStream>::new_own(rep),))
        })?;
    }
    Ok(())
}
