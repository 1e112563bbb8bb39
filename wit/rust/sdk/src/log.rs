//! Logging for guests: the [`log!`](crate::log!) family of macros and the
//! panic hook.
//!
//! In a component the line goes through the contract's `log` import, which
//! the host routes to its structured logs with the guest name and request
//! key attached. Natively (unit tests) it goes to stderr, so the same code
//! runs in both. Nothing here touches WASI: `println!` and the standard
//! panic hook do (stdout streams, `RUST_BACKTRACE` from the environment) and
//! a guest has neither.

use std::sync::Once;

pub use crate::bindings::wasmctrl::controller::log::Level;

/// Writes one log line at `level`.
pub fn write(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::wasmctrl::controller::log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{}] {message}", level_name(level));
}

/// The level's lowercase name (`info`, `warn`, ...).
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    }
}

/// Logs a formatted line at a [`Level`]:
/// `log!(Level::Warn, "pod {name} skipped")`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        $crate::log::write($level, &::std::format!($($arg)+))
    };
}

/// Logs at [`Level::Debug`].
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Debug, $($arg)+) };
}

/// Logs at [`Level::Info`].
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Info, $($arg)+) };
}

/// Logs at [`Level::Warn`].
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Warn, $($arg)+) };
}

/// Logs at [`Level::Error`].
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Error, $($arg)+) };
}

/// The line the panic hook logs, on one line:
/// `guest panicked at FILE:LINE:COL: MESSAGE`.
pub fn panic_line(info: &std::panic::PanicHookInfo<'_>) -> String {
    let message = info.payload_as_str().unwrap_or("(a non-string payload)");
    match info.location() {
        Some(at) => format!("guest panicked at {at}: {message}"),
        None => format!("guest panicked: {message}"),
    }
}

/// Replaces the standard panic hook (which reads `RUST_BACKTRACE` through
/// WASI and so traps in a guest before printing anything) with one that logs
/// the message at [`Level::Error`]. The guest still aborts; the host then
/// reports the trap, and the log line says why. Idempotent; the export glue
/// calls it before every `describe` and `reconcile`. Natively (tests) it
/// does nothing: the standard hook works there.
pub fn install_panic_hook() {
    if cfg!(not(target_arch = "wasm32")) {
        return;
    }
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| write(Level::Error, &panic_line(info))));
    });
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn panic_line_carries_the_message_and_location() {
        let seen = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&seen);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Ok(mut s) = sink.lock() {
                *s = panic_line(info);
            }
        }));
        let result = std::panic::catch_unwind(|| panic!("quota {} is broken", 7));
        std::panic::set_hook(previous);
        assert!(result.is_err());
        let line = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert!(line.starts_with("guest panicked at "), "{line}");
        assert!(line.contains("log.rs:"), "{line}");
        assert!(line.ends_with(": quota 7 is broken"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn macros_format_natively() {
        crate::info!("reconciled {} objects", 3);
        crate::log!(Level::Trace, "plain");
        assert_eq!(level_name(Level::Warn), "warn");
    }
}
