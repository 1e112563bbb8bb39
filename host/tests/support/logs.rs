//! The host's warnings and errors, as the tests read them: a process-wide
//! tracing subscriber (installed by the first [`capture`]) that keeps every
//! WARN and ERROR line — its message, its fields and the fields of the
//! spans it sits in (`guest=…`, `key=…`) — so a test can assert that a
//! refusal was logged naming what it refused. Lines of every test in the
//! binary land here: filter by a name only your test uses.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Lines kept at most (the oldest are dropped beyond it).
const KEEP: usize = 50_000;

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

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
        if *meta.level() > Level::WARN {
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
        let mut lines = self.0.lock().unwrap();
        if lines.len() >= KEEP {
            lines.drain(..KEEP / 2);
        }
        lines.push(line);
    }
}

fn lines() -> &'static Lines {
    static LINES: OnceLock<Lines> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Lines::default();
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
    lines()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .cloned()
        .collect()
}
