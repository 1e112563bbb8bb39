//! Guest stdout and stderr, routed to `tracing`: the output streams the
//! governed WASI surface ([`super::wasi`]) hands a guest for
//! `wasi:cli/stdout` and `wasi:cli/stderr`, and each call's buffered
//! output. It never reads host state and never blocks: a write is taken at
//! once (a log line is never back-pressured).
//!
//! # Output
//! Output is split into lines and logged with the guest's name (stdout at
//! info, stderr at warn), capped per call ([`MAX_OUTPUT_PER_CALL`]); the
//! tail of stderr is kept, past the cap too, so a panic's message, a
//! Python traceback or a JavaScript exception can be reported in the
//! call's error (see `guest::exception`).

use std::sync::{Arc, Mutex};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// At most this many bytes of output per call reach the logs.
pub const MAX_OUTPUT_PER_CALL: usize = 64 * 1024;
/// How much of a call's stderr is kept (past the log cap too) for
/// [`super::exception`].
const STDERR_TAIL: usize = 4 * 1024;

const STDOUT: u32 = 1;
const STDERR: u32 = 2;
/// What `check-write` grants: the most a guest may write at once. wasi-libc
/// and std split larger writes.
const WRITE_BUDGET: usize = 4096;

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

    /// Counts one more stream or pollable handed to the guest in this call;
    /// past `max` the call traps.
    pub fn new_handle(&mut self, max: u32) -> wasmtime::Result<()> {
        self.handles += 1;
        if self.handles > max {
            return Err(wasmtime::Error::msg(format!(
                "more than {max} stdio handles requested in one call"
            )));
        }
        Ok(())
    }

    /// The last few KiB this call wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        String::from_utf8_lossy(&self.stderr_tail).into_owned()
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

/// One store's buffered output, shared by its two streams and the call
/// that reads what it wrote.
pub type SharedOutput = Arc<Mutex<Output>>;

/// The stream a guest gets for `wasi:cli/stdout` or `wasi:cli/stderr`:
/// every write goes to the store's [`Output`] at once.
#[derive(Clone)]
pub struct GuestStream {
    guest: Arc<str>,
    stream: u32,
    output: SharedOutput,
}

impl GuestStream {
    /// The guest's stdout.
    pub fn stdout(guest: Arc<str>, output: SharedOutput) -> Self {
        GuestStream {
            guest,
            stream: STDOUT,
            output,
        }
    }

    /// The guest's stderr.
    pub fn stderr(guest: Arc<str>, output: SharedOutput) -> Self {
        GuestStream {
            guest,
            stream: STDERR,
            output,
        }
    }

    fn take(&self, bytes: &[u8]) {
        crate::sync::lock(&self.output).write(&self.guest, self.stream, bytes);
    }
}

impl IsTerminal for GuestStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStream {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestStream {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.take(&bytes);
        Ok(())
    }

    // Lines are forwarded as they complete, so a write is also a flush.
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestStream {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.take(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
