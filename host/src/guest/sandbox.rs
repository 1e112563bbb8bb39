//! One call's sandbox: the store's state (the guest's name, the memory
//! cap, captured stdout/stderr, the governed WASI context) and the host
//! functions a guest may import (logging, rate-limited). It never grants
//! anything else.

use super::*;

/// Per-call state inside a store.
pub struct CallState {
    pub(super) guest: Arc<str>,
    pub(super) limiter: Limiter,
    pub(super) output: stdio::SharedOutput,
    pub(super) wasi: wasi::Wasi,
    pub(super) limits: crate::guest::policy::Limits,
}

impl Drop for CallState {
    fn drop(&mut self) {
        let guest = self.guest.clone();
        self.output().flush(&guest);
    }
}

impl CallState {
    /// This call's buffered stdout and stderr, and its log budget.
    pub(super) fn output(&self) -> std::sync::MutexGuard<'_, stdio::Output> {
        crate::sync::lock(&self.output)
    }
}

/// A memory limiter that remembers whether the cap was hit, so the trap can
/// be reported as what it is rather than as the guest allocator's panic.
pub(super) struct Limiter {
    pub(super) max_memory: usize,
    pub(super) hit: bool,
    /// Bytes of linear memory the instance holds (every memory, as created
    /// and grown).
    pub(super) size: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory limit of {} bytes reached (wanted {desired})",
                self.max_memory
            )));
        }
        self.size = self.size.saturating_add(desired.saturating_sub(current));
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

impl bindings::wasmctrl::controller::types::Host for CallState {}

impl bindings::wasmctrl::controller::log::Host for CallState {
    fn log(&mut self, level: bindings::wasmctrl::controller::log::Level, message: String) {
        use bindings::wasmctrl::controller::log::Level;
        let guest = &*self.guest;
        let Some(message) = self.output().admit(guest, message) else {
            return;
        };
        match level {
            Level::Trace => tracing::trace!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Debug => tracing::debug!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Info => tracing::info!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Warn => tracing::warn!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Error => tracing::error!(target: "wasmctrl::guest", guest, "{message}"),
        }
    }
}
