//! The host's warnings and errors, as the tests read them: a process-wide
//! tracing subscriber (installed by the first [`capture`]) that keeps every
//! WARN and ERROR line — its message, its fields and the fields of the
//! spans it sits in (`guest=…`, `key=…`) — so a test can assert that a
//! refusal was logged naming what it refused. Lines of every test in the
//! binary land here: filter by a name only your test uses. A test on a
//! current-thread runtime can instead keep the lines of its own thread
//! only, down to INFO ([`on_this_thread`]), to count them exactly.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Lines kept at most (the oldest are dropped beyond it).
const KEEP: usize = 50_000;

#[derive(Clone)]
struct Lines {
    lines: Arc<Mutex<Vec<String>>>,
    /// The least severe level kept.
    least: Level,
}

impl Lines {
    fn new(least: Level) -> Self {
        Lines {
            lines: Arc::default(),
            least,
        }
    }

    fn containing(&self, parts: &[&str]) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .cloned()
            .collect()
    }
}

/// A span's fields, formatted once when it opens.
struct Fields(String);

struct Format<'a>(&'a mut String);

impl Visit for Format<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value}");
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Lines {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut text = String::new();
        attrs.record(&mut Format(&mut text));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Fields(text));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > self.least {
            return;
        }
        let mut line = format!("{} {}:", meta.level(), meta.target());
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<Fields>() {
                    let _ = write!(line, " {}{{{}}}", span.name(), f.0.trim());
                }
            }
        }
        event.record(&mut Format(&mut line));
        let mut lines = self.lines.lock().unwrap();
        if lines.len() >= KEEP {
            lines.drain(..KEEP / 2);
        }
        lines.push(line);
    }
}

fn lines() -> &'static Lines {
    static LINES: OnceLock<Lines> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Lines::new(Level::WARN);
        let subscriber = tracing_subscriber::registry().with(lines.clone());
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global tracing subscriber in the integration tests");
        lines
    })
}

/// Starts keeping WARN and ERROR lines (once per process; later calls do
/// nothing). Call before starting the host whose lines you want.
pub fn capture() {
    lines();
}

/// Every kept line that contains all of `parts`.
pub fn containing(parts: &[&str]) -> Vec<String> {
    lines().containing(parts)
}

/// The lines logged on one thread, kept by [`on_this_thread`].
pub struct ThreadLines {
    lines: Lines,
    _default: tracing::subscriber::DefaultGuard,
}

impl ThreadLines {
    /// Every kept line that contains all of `parts`; each starts with its
    /// level and target (`INFO wasmctrl::informer::run: …`).
    pub fn containing(&self, parts: &[&str]) -> Vec<String> {
        self.lines.containing(parts)
    }
}

/// Keeps every line at `least` or more severe logged on this thread until
/// the result is dropped. On a current-thread test runtime that is every
/// line of the test's tasks (the host's and the embedded server's), and no
/// other test's.
pub fn on_this_thread(least: Level) -> ThreadLines {
    let lines = Lines::new(least);
    let subscriber = tracing_subscriber::registry().with(lines.clone());
    ThreadLines {
        lines,
        _default: tracing::subscriber::set_default(subscriber),
    }
}
