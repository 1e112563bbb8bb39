//! The host's key mappings against the relation agreement table
//! (`wit/agreement/relations.json`, read through the guest SDK's
//! `testing::agreement`): every change must wake the keys the table says
//! and every key's snapshot must hold the objects it says. The Rust SDK's
//! `World` (its `tests/agreement.rs`), the Python SDK's and the TypeScript
//! SDK's run the same table, so a guest's native relation tests cannot
//! drift from what the host does. The owner-reference test at the end
//! compares snapshot contents, which only the Rust SDK lays out itself.

#![allow(clippy::unwrap_used)]

use serde_json::{json, Value};
use wasmctrl_guest_sdk as sdk;
use wasmctrl_guest_sdk::testing::agreement::{Case, Holds, Table};
use wasmctrl_guest_sdk::testing::{Obj, World as SdkWorld};

use super::{around_primary, keys_for, objects_for, snapshot_for, WatchCache};
use crate::guest::bindings::wasmctrl::controller::types as wit;
use crate::guest::manifest::{self, GuestManifest};
use crate::projection::{field_positions, Interner};
use crate::request::RequestKey;
use crate::store::Writer;
use wasmctrl_snapshot::{SnapshotData, SnapshotView};

fn table() -> Table {
    Table::parse(include_str!("../../../wit/agreement/relations.json")).unwrap()
}

/// The same manifest as the host's bindings carry it.
fn host_manifest(m: &sdk::Manifest) -> GuestManifest {
    let gvk = |g: &sdk::GroupVersionKind| wit::GroupVersionKind {
        group: g.group.clone(),
        version: g.version.clone(),
        kind: g.kind.clone(),
    };
    let keys = |k: &sdk::KeyMapping| match k {
        sdk::KeyMapping::PerObject => wit::KeyMapping::PerObject,
        sdk::KeyMapping::Aggregate(key) => wit::KeyMapping::Aggregate(key.clone()),
        sdk::KeyMapping::None => wit::KeyMapping::None,
        sdk::KeyMapping::Owner(p) => wit::KeyMapping::Owner(p.clone()),
        sdk::KeyMapping::SameNamespace(p) => wit::KeyMapping::SameNamespace(p.clone()),
        sdk::KeyMapping::All(p) => wit::KeyMapping::All(p.clone()),
        sdk::KeyMapping::ByIndex(l) => wit::KeyMapping::ByIndex(wit::IndexLink {
            primary: l.primary.clone(),
            index: l.index.clone(),
            field: l.field.clone(),
        }),
    };
    let watches = m
        .watches
        .iter()
        .map(|w| wit::Watch {
            name: w.name.clone(),
            gvk: gvk(&w.gvk),
            plural: w.plural.clone(),
            namespace: w.namespace.clone(),
            label_selector: w.label_selector.clone(),
            field_selector: w.field_selector.clone(),
            fields: w.fields.clone(),
            indexes: w
                .indexes
                .iter()
                .map(|i| wit::IndexSpec {
                    name: i.name.clone(),
                    field: i.field.clone(),
                })
                .collect(),
            keys: keys(&w.keys),
            finalizer: w.finalizer.clone(),
        })
        .collect();
    manifest::validate(&wit::Manifest {
        name: m.name.clone(),
        watches,
        writes: vec![],
        resync_seconds: None,
    })
    .unwrap()
}

struct HostWorld {
    manifest: GuestManifest,
    writers: Vec<Writer>,
    caches: Vec<WatchCache>,
    interner: Interner,
}

impl HostWorld {
    /// An empty world over `manifest`, in which the kinds
    /// `cluster_scoped` are cluster-scoped (as discovery would say).
    fn new(manifest: GuestManifest, cluster_scoped: &[String]) -> Self {
        let mut writers = Vec::new();
        let mut caches = Vec::new();
        for w in &manifest.watches {
            let writer =
                Writer::with_field_indexes(&field_positions(&w.projection, &w.indexed_paths()));
            caches.push(WatchCache {
                store: writer.store(),
                positions: (0..w.projection.paths().len()).collect(),
                namespaced: !cluster_scoped.contains(&w.gvk.kind),
            });
            writers.push(writer);
        }
        HostWorld {
            manifest,
            writers,
            caches,
            interner: Interner::default(),
        }
    }

    fn watch(&self, name: &str) -> usize {
        self.manifest
            .watches
            .iter()
            .position(|w| w.name == name)
            .unwrap()
    }

    /// Puts `case`; the keys its change wakes, as `watch:key`.
    fn put(&mut self, case: &Case) -> Vec<String> {
        self.put_json(&case.watch, &case.json())
    }

    /// Puts `object` (as the API server sends it) into `watch`; the keys
    /// its change wakes, as `watch:key`.
    fn put_json(&mut self, watch: &str, object: &Value) -> Vec<String> {
        let w = self.watch(watch);
        let o = self.manifest.watches[w]
            .projection
            .project(object, &mut self.interner);
        let change = self.writers[w].apply(o).unwrap();
        let mut keys: Vec<String> = keys_for(&self.manifest, &self.caches, w, &change)
            .into_iter()
            .map(|k| self.name(&k))
            .collect();
        keys.sort();
        keys
    }

    fn name(&self, k: &RequestKey) -> String {
        let watch = k
            .watch
            .map_or("*", |w| self.manifest.watches[w].name.as_str());
        format!("{watch}:{}", k.key)
    }

    /// The objects `key`'s snapshot holds, as `watch:namespace/name`.
    fn holds(&self, key: &RequestKey) -> Vec<String> {
        self.named(&objects_for(&self.manifest, &self.caches, key))
    }

    /// Each watch's `objects` as `watch:namespace/name`, sorted.
    fn named(
        &self,
        objects: &[Vec<std::sync::Arc<crate::projection::ProjectedObject>>],
    ) -> Vec<String> {
        let mut out: Vec<String> = objects
            .iter()
            .enumerate()
            .flat_map(|(w, objects)| {
                let watch = &self.manifest.watches[w].name;
                objects
                    .iter()
                    .map(move |o| format!("{watch}:{}/{}", o.namespace, o.name))
            })
            .collect();
        out.sort();
        out
    }

    /// The key `entry` names.
    fn key(&self, entry: &Holds) -> RequestKey {
        match entry.watch_and_key() {
            (Some(watch), key) => RequestKey::object(self.watch(watch), key),
            (None, key) => RequestKey::aggregate(key),
        }
    }
}

/// The host's world over the table's manifest, holding the table's world
/// but for `except`.
fn host_world(table: &Table, except: Option<&Case>) -> HostWorld {
    let mut host = HostWorld::new(
        host_manifest(&table.manifest()),
        &table.cluster_scoped_kinds,
    );
    for case in table
        .world
        .iter()
        .filter(|c| except.is_none_or(|e| !e.same(c)))
    {
        host.put(case);
    }
    host
}

#[test]
fn every_change_wakes_the_keys_the_agreement_table_says_in_the_host() {
    let table = table();
    let mut woken = 0;
    for change in &table.changes {
        let o = &change.object;
        let got = host_world(&table, None).put(o);
        assert_eq!(
            got, change.wakes,
            "change {}:{}/{}",
            o.watch, o.namespace, o.name
        );
        woken += got.len();
    }
    assert!(woken > 0, "the table wakes keys (it is not vacuous)");
}

#[test]
fn every_key_s_snapshot_holds_the_objects_the_agreement_table_says_in_the_host() {
    let table = table();
    let host = host_world(&table, None);
    let mut held = 0;
    for entry in &table.snapshots {
        let got = host.holds(&host.key(entry));
        assert_eq!(got, entry.holds, "key {}", entry.key);
        held += got.len();
    }
    assert!(
        held > 0,
        "the snapshots hold objects (the table is not vacuous)"
    );
}

#[test]
fn a_departed_primary_s_snapshot_holds_what_the_agreement_table_says_in_the_host() {
    let table = table();
    let mut held = 0;
    for entry in &table.departed {
        let departed = table.departing(entry).unwrap();
        let mut host = host_world(&table, Some(departed));
        let p = host.watch(&departed.watch);
        let last = std::sync::Arc::new(
            host.manifest.watches[p]
                .projection
                .project(&departed.json(), &mut host.interner),
        );
        let got = host.named(&around_primary(
            &host.manifest,
            &host.caches,
            p,
            Some(&last),
            false,
        ));
        assert_eq!(got, entry.holds, "departed {}", entry.key);
        held += got.len();
    }
    assert!(held > 0, "departed snapshots hold related objects");
}

/// Each object of `data` as one line: identity, then every value of each
/// of its watch's `fields` (the string table's layout aside, what a guest
/// can read).
fn rows(data: &SnapshotData, m: &sdk::Manifest) -> Vec<String> {
    let view = SnapshotView::new(data).unwrap();
    (0..view.len())
        .map(|o| {
            let w = view.watch(o);
            let values: Vec<Vec<String>> = (0..m.watches[w as usize].fields.len())
                .map(|f| {
                    (0..view.field_len(o, f))
                        .map(|i| format!("{:?}", view.value(o, f, i)))
                        .collect()
                })
                .collect();
            format!(
                "{w} {}/{} uid={} gen={} deleting={:?} {values:?}",
                view.namespace(o),
                view.name(o),
                view.uid(o),
                view.generation(o),
                view.deletion_timestamp(o),
            )
        })
        .collect()
}

#[test]
fn owner_references_labels_and_identity_read_the_same_natively_and_from_the_host() {
    let app = sdk::GroupVersionKind::new("example.com", "v1", "App");
    let m = sdk::Manifest::new("owners")
        .watch(
            sdk::Watch::new("apps", app.clone())
                .fields(["metadata.labels", "metadata.name", "metadata.uid"])
                .per_object(),
        )
        .watch(
            sdk::Watch::new("parts", sdk::GroupVersionKind::core("ConfigMap"))
                .fields([
                    sdk::OWNER_REFERENCES,
                    "metadata.ownerReferences[*].uid",
                    "metadata.ownerReferences[*].controller",
                    "metadata.labels['a.b/c']",
                    "metadata.labels.team",
                    "metadata.namespace",
                    "metadata.generation",
                ])
                .owner("apps"),
        );
    let owner = Obj::new("apps", "a", "web")
        .uid("u-web")
        .label("team", "ml")
        .label("a.b/c", "x");
    let node = sdk::OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: "n1".into(),
        uid: "u-n1".into(),
        controller: None,
        block_owner_deletion: None,
    };
    // A ConfigMap has no generation.
    let mine = Obj::new("parts", "a", "mine")
        .uid("u-mine")
        .generation(0)
        .label("team", "ml")
        .owner_reference(node)
        .controlled_by(&app, &owner);
    let key = sdk::Request::object("apps", "a/web");
    let native = SdkWorld::new(&m)
        .with_all([owner, mine])
        .snapshot_for(&key)
        .unwrap();

    // The same objects as the API server sends them (Go's field order).
    let mut host = HostWorld::new(host_manifest(&m), &[]);
    host.put_json(
        "apps",
        &json!({"apiVersion": "example.com/v1", "kind": "App", "metadata": {
            "name": "web", "namespace": "a", "uid": "u-web", "generation": 1,
            "labels": {"a.b/c": "x", "team": "ml"}}}),
    );
    host.put_json(
        "parts",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "mine", "namespace": "a", "uid": "u-mine",
            "labels": {"team": "ml"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-n1"},
                {"apiVersion": "example.com/v1", "kind": "App", "name": "web",
                 "uid": "u-web", "controller": true, "blockOwnerDeletion": true}]},
            "data": {"k": "v"}}),
    );
    let from_host = snapshot_for(
        &host.manifest,
        &host.caches,
        &RequestKey::object(host.watch("apps"), "a/web"),
    );
    let (native, from_host) = (rows(&native, &m), rows(&from_host, &m));
    assert_eq!(native, from_host);
    assert_eq!(native.len(), 2, "{native:#?}");
    for (row, projected) in [
        (0, r#"Str(\"web\")"#),
        (0, "a.b/c"),
        (1, r#"Str(\"u-n1\")", "Str(\"u-web\")"#),
        (1, "blockOwnerDeletion"),
        (1, r#"["Absent", "Bool(true)"]"#),
    ] {
        assert!(
            native[row].contains(projected),
            "{projected}: {}",
            native[row]
        );
    }
}
