//! Tracing spans of concurrent reconciles: each log line inside a
//! reconcile carries exactly its own key's span — never a span of another
//! key or guest that the same worker thread polled meanwhile.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::supervisor::SupervisorConfig;

use crate::support::wat::{configmap_doc, guest, Behaviour, WatKeys, WatManifest};
use crate::support::*;

/// The key of a `reconcile` span, kept in its extensions.
struct Key(String);

struct KeyVisitor(Option<String>);

impl Visit for KeyVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "key" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// For every event inside at least one `reconcile` span: the keys of all
/// the `reconcile` spans it sits in, innermost first.
#[derive(Clone, Default)]
struct Scopes(Arc<Mutex<Vec<Vec<String>>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Scopes {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "reconcile" {
            return;
        }
        let mut v = KeyVisitor(None);
        attrs.record(&mut v);
        if let (Some(span), Some(key)) = (ctx.span(id), v.0) {
            span.extensions_mut().insert(Key(key));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let keys: Vec<String> = scope
            .filter_map(|s| s.extensions().get::<Key>().map(|k| k.0.clone()))
            .collect();
        if !keys.is_empty() {
            self.0.lock().unwrap().push(keys);
        }
    }
}

#[tokio::test]
async fn log_lines_of_concurrent_reconciles_carry_only_their_own_key() {
    let scopes = Scopes::default();
    let subscriber = tracing_subscriber::registry().with(
        scopes
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
    );
    // The test runtime is single-threaded: every worker task is polled on
    // this thread, where the subscriber is the default.
    let _default = tracing::subscriber::set_default(subscriber);

    let (_server, client) = server().await;
    for i in 0..6 {
        pod(&format!("p{i}")).on("n1").create(&client).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.wasm");
    let mut manifest = WatManifest::writing_its_own_configmap("spans", HOST_NS);
    manifest.watches[0].keys = WatKeys::PerObject;
    let doc = configmap_doc(HOST_NS, "spans", &[("k", "v")]);
    std::fs::write(&path, guest(&manifest, Behaviour::Apply(vec![doc]))).unwrap();
    let config = SupervisorConfig {
        guests: vec![path],
        ..host_config(ControllerConfig::default().workers(3))
    };
    let host = run_host(&client, config, None).await;
    let keys_seen = || {
        let seen = scopes.0.lock().unwrap();
        seen.iter()
            .map(|k| k[0].clone())
            .collect::<BTreeSet<String>>()
            .len()
    };
    eventually("log lines from every pod's reconcile", || async {
        keys_seen() >= 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(host);
    let seen = scopes.0.lock().unwrap().clone();
    let nested: Vec<&Vec<String>> = seen.iter().filter(|keys| keys.len() > 1).collect();
    assert!(
        nested.is_empty(),
        "log lines inside several reconcile spans: {nested:?}"
    );
    let keys: BTreeSet<&String> = seen.iter().map(|k| &k[0]).collect();
    assert!(
        keys.len() >= 2,
        "log lines from the reconciles of every key, each in its own span: {keys:?}"
    );
}
