//! Guest stdout and stderr, routed to `tracing`: the output streams the
//! governed WASI surface ([`super::wasi`]) hands a guest for
//! `wasi:cli/stdout` and `wasi:cli/stderr`, and each call's buffered
//! output. It never reads host state and never blocks: a write is taken at
//! once (a log line is never back-pressured).
//!
//! # Output
//! Output is split into lines and logged with the guest's name (stdout at
//! info, stderr at warn). Printing is logging: every line takes the same
//! budgets as the `log` import ([`LogBudget`]: the policy's message size,
//! bytes per call and bytes per second per guest), shared with the
//! call's `log` messages, and what is cut or dropped is counted as
//! `log`'s is. The tail of stderr is kept, past the budgets too, so a
//! panic's message, a Python traceback or a JavaScript exception can be
//! reported in the call's error (see `guest::exception`).

use std::sync::{Arc, Mutex};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::limits::{LogBudget, LogRates};
use crate::guest::policy::Limits;

/// How much of a call's stderr is kept (past the log budgets too) for
/// [`super::exception`].
const STDERR_TAIL: usize = 4 * 1024;

const STDOUT: u32 = 1;
const STDERR: u32 = 2;
/// What `check-write` grants: the most a guest may write at once. wasi-libc
/// and std split larger writes.
const WRITE_BUDGET: usize = 4096;

/// Buffered output of one call, and the call's log budget (shared with
/// the `log` import).
#[derive(Default)]
pub struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    stderr_tail: Vec<u8>,
    handles: u32,
    /// This call's share of the guest's log budgets.
    pub budget: LogBudget,
    limits: Limits,
    rates: Arc<LogRates>,
}

impl Output {
    /// Output under `limits`' log budgets, the per-second one shared by
    /// every call of the guest through `rates`.
    pub fn new(limits: Limits, rates: Arc<LogRates>) -> Self {
        Output {
            limits,
            rates,
            ..Self::default()
        }
    }

    /// `message` if the call's and the guest's log budgets admit it
    /// (truncated to the message cap), counted in [`Self::budget`] if not.
    pub fn admit(&mut self, guest: &str, message: String) -> Option<String> {
        self.budget.admit(guest, message, &self.limits, &self.rates)
    }

    fn write(&mut self, guest: &str, stream: u32, bytes: &[u8]) {
        if stream == STDERR {
            self.stderr_tail.extend_from_slice(bytes);
            let excess = self.stderr_tail.len().saturating_sub(STDERR_TAIL);
            self.stderr_tail.drain(..excess);
        }
        // A line is kept up to one byte past the message cap (enough for
        // the budget to see it is too long and cut it): a guest writing
        // without newlines holds no more than that.
        let keep = self.limits.max_log_message_bytes.saturating_add(1);
        let mut rest = bytes;
        loop {
            let nl = rest.iter().position(|&b| b == b'\n');
            let (part, after) = match nl {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            let buf = if stream == STDERR {
                &mut self.stderr
            } else {
                &mut self.stdout
            };
            let room = keep.saturating_sub(buf.len());
            buf.extend_from_slice(&part[..part.len().min(room)]);
            let Some(after) = after else { break };
            let line = std::mem::take(buf);
            self.log_line(guest, stream, &line);
            rest = after;
        }
    }

    fn log_line(&mut self, guest: &str, stream: u32, line: &[u8]) {
        let text = String::from_utf8_lossy(line).into_owned();
        if let Some(text) = self.admit(guest, text) {
            emit(guest, stream, &text);
        }
    }

    /// Logs what is left without a trailing newline.
    pub fn flush(&mut self, guest: &str) {
        for stream in [STDOUT, STDERR] {
            let buf = if stream == STDERR {
                &mut self.stderr
            } else {
                &mut self.stdout
            };
            if !buf.is_empty() {
                let line = std::mem::take(buf);
                self.log_line(guest, stream, &line);
            }
        }
    }

    /// Empties the buffers and the call's budget for the next call (after
    /// [`Self::flush`]: what was left is logged, not dropped).
    pub fn reset(&mut self) {
        let limits = std::mem::take(&mut self.limits);
        let rates = std::mem::take(&mut self.rates);
        *self = Self::new(limits, rates);
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

fn emit(guest: &str, stream: u32, text: &str) {
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
