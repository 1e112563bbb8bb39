//! A guest runtime's report of what made it trap, read from what it wrote
//! to stderr just before: a Python traceback (CPython prints it, then
//! componentize-py's runtime traps), a JavaScript exception (QuickJS
//! prints its message and stack), a Rust panic (`std` prints `thread '…'
//! panicked at FILE:LINE:COL:` and the message). It never guesses: output
//! that matches none of these leaves the trap as it is.

/// What a guest's runtime reported before it trapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The exception's type and message (`ValueError: told to fail`), or
    /// the panic's message and location.
    pub message: String,
    /// The stack as the runtime printed it (empty when it printed none).
    pub stack: String,
    /// A Rust panic (else a Python or JavaScript exception).
    pub panic: bool,
}

/// The last report in `stderr`: a Python traceback or a JavaScript
/// exception, whichever was printed last, else a Rust panic (a language
/// runtime written in Rust panics after it printed the exception).
pub fn last_report(stderr: &str) -> Option<Report> {
    [python(stderr), javascript(stderr)]
        .into_iter()
        .flatten()
        .max_by_key(|(at, _)| *at)
        .or_else(|| rust_panic(stderr))
        .map(|(_, report)| report)
}

/// The last `Traceback (most recent call last):` block: its indented
/// frames are the stack, the first line after them the message (with the
/// lines that continue it, up to a blank line or a Rust panic report).
fn python(stderr: &str) -> Option<(usize, Report)> {
    const HEAD: &str = "Traceback (most recent call last):\n";
    let at = stderr.rfind(HEAD)?;
    let mut stack = Vec::new();
    let mut message: Vec<&str> = Vec::new();
    for line in stderr[at + HEAD.len()..].lines() {
        if message.is_empty() && line.starts_with(' ') {
            stack.push(line);
        } else if line.is_empty() || line.starts_with("thread '") {
            break;
        } else {
            message.push(line);
        }
    }
    (!message.is_empty()).then(|| {
        (
            at,
            Report {
                message: message.join("\n"),
                stack: stack.join("\n"),
                panic: false,
            },
        )
    })
}

/// The last JavaScript exception: QuickJS under componentize-qjs panics
/// with `Exception { message: Some("…"), stack: Some("…") }` (Rust's debug
/// form); other engines print an error line (`Error: …`, `TypeError: …`,
/// `Uncaught …`) followed by `    at …` frames.
fn javascript(stderr: &str) -> Option<(usize, Report)> {
    quickjs(stderr).or_else(|| error_line(stderr))
}

fn quickjs(stderr: &str) -> Option<(usize, Report)> {
    const HEAD: &str = "Exception { message: Some(\"";
    let at = stderr.rfind(HEAD)?;
    let rest = &stderr[at + HEAD.len()..];
    let (message, rest) = rest.split_once("\"), stack: ")?;
    let stack = rest
        .strip_prefix("Some(\"")
        .and_then(|s| s.split_once("\") })"))
        .map_or("", |(stack, _)| stack);
    let unescape = |s: &str| {
        s.replace("\\n", "\n")
            .replace("\\\"", "\"")
            .replace("\\\\", "\\")
    };
    Some((
        at,
        Report {
            message: format!("exception: {}", unescape(message)),
            stack: unescape(stack).trim_end().to_string(),
            panic: false,
        },
    ))
}

fn error_line(stderr: &str) -> Option<(usize, Report)> {
    let lines: Vec<(usize, &str)> = stderr
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .collect();
    let frame = |l: &str| l.trim_start().starts_with("at ") && l.starts_with(' ');
    (0..lines.len()).rev().find_map(|i| {
        let (at, line) = lines[i];
        let line = line.strip_prefix("Uncaught ").unwrap_or(line);
        let is_error = line
            .split_once(": ")
            .is_some_and(|(class, _)| class.ends_with("Error") && !class.contains(' '));
        let frames: Vec<&str> = lines[i + 1..]
            .iter()
            .map(|(_, l)| *l)
            .take_while(|l| frame(l))
            .collect();
        (is_error && !frames.is_empty()).then(|| {
            (
                at,
                Report {
                    message: line.to_string(),
                    stack: frames.join("\n"),
                    panic: false,
                },
            )
        })
    })
}

/// The last Rust panic report: its message and location.
fn rust_panic(stderr: &str) -> Option<(usize, Report)> {
    let start = stderr.rfind("panicked at ")?;
    let report = &stderr[start + "panicked at ".len()..];
    let (location, rest) = report.split_once(":\n")?;
    let message = rest
        .split("\nnote: run with `RUST_BACKTRACE")
        .next()
        .unwrap_or(rest)
        .trim_end();
    Some((
        start,
        Report {
            message: format!("{message} (at {location})"),
            stack: String::new(),
            panic: true,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_panic_report_yields_message_and_location() {
        let stderr = "reconcile k: to stderr\n\nthread '<unnamed>' panicked at src/lib.rs:120:13:\ntold to panic\nin two lines\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            last_report(stderr).map(|r| r.message).as_deref(),
            Some("told to panic\nin two lines (at src/lib.rs:120:13)")
        );
        assert_eq!(last_report("no panic here\n"), None);
    }

    #[test]
    fn a_python_traceback_yields_the_exception_line_and_its_frames() {
        let stderr = "reconcile probe: to stderr\nTraceback (most recent call last):\n  File \"/0/app.py\", line 80, in reconcile\n    raise ValueError(f\"told\")\nValueError: told to fail in reconcile of probe\n\nthread '<unnamed>' panicked at src/lib.rs:1:1:\nPython exception\n";
        let report = last_report(stderr).unwrap();
        assert_eq!(
            report.message,
            "ValueError: told to fail in reconcile of probe"
        );
        assert_eq!(
            report.stack,
            "  File \"/0/app.py\", line 80, in reconcile\n    raise ValueError(f\"told\")"
        );
    }

    #[test]
    fn a_javascript_exception_yields_its_message_and_stack() {
        let stderr = "reconcile probe: to stderr\nError: told to fail in reconcile of probe\n    at failIn (probe.js:26:9)\n    at reconcile (probe.js:64:7)\n";
        let report = last_report(stderr).unwrap();
        assert_eq!(report.message, "Error: told to fail in reconcile of probe");
        assert_eq!(
            report.stack,
            "    at failIn (probe.js:26:9)\n    at reconcile (probe.js:64:7)"
        );
        assert_eq!(last_report("Error: no stack after it\n"), None);
    }

    #[test]
    fn a_quickjs_exception_yields_its_message_and_stack() {
        let stderr = "\nthread '<unnamed>' panicked at crates/runtime/src/interpreter.rs:51:31:\nFailed to call 'reconcile': Value(Exception(\nException { message: Some(\"told \\\"x\\\"\"), stack: Some(\"    at failIn (/probe.js:29:19)\\n    at reconcile (/probe.js:67:46)\\n\") })\n)\n";
        let report = last_report(stderr).unwrap();
        assert_eq!(report.message, "exception: told \"x\"");
        assert_eq!(
            report.stack,
            "    at failIn (/probe.js:29:19)\n    at reconcile (/probe.js:67:46)"
        );
        assert!(!report.panic);
    }
}
