//! The guest SDK's model of the key mappings (`wasmctrl_guest_sdk::testing`,
//! `World::wakes` and `World::objects_for`) against this module, on one
//! table of cases: the same manifest and objects go through both, and
//! every change's keys and every key's objects must agree, so a guest's
//! native relation tests cannot drift from what the host does.

#![allow(clippy::unwrap_used)]

use serde_json::{json, Map, Value};
use wasmctrl_guest_sdk as sdk;
use wasmctrl_guest_sdk::testing::{Obj, World as SdkWorld};

use super::{around_primary, keys_for, objects_for, snapshot_for, WatchCache};
use crate::guest::bindings::wasmctrl::controller::types as wit;
use crate::guest::manifest::{self, GuestManifest};
use crate::projection::{field_positions, Interner};
use crate::request::RequestKey;
use crate::store::Writer;
use wasmctrl_snapshot::{SnapshotData, SnapshotView};

/// One object of the table: watch, namespace, name, uid, simple dotted
/// fields, labels, and a controller owner (apiVersion, kind, name, uid).
struct Case {
    watch: &'static str,
    namespace: &'static str,
    name: &'static str,
    uid: &'static str,
    fields: &'static [(&'static str, &'static str)],
    labels: &'static [(&'static str, &'static str)],
    controller: Option<(&'static str, &'static str, &'static str, &'static str)>,
}

const fn obj(watch: &'static str, namespace: &'static str, name: &'static str) -> Case {
    Case {
        watch,
        namespace,
        name,
        uid: "",
        fields: &[],
        labels: &[],
        controller: None,
    }
}

impl Case {
    const fn uid(self, uid: &'static str) -> Self {
        Case { uid, ..self }
    }
    const fn fields(self, fields: &'static [(&'static str, &'static str)]) -> Self {
        Case { fields, ..self }
    }
    const fn labels(self, labels: &'static [(&'static str, &'static str)]) -> Self {
        Case { labels, ..self }
    }
    const fn controller(
        self,
        api: &'static str,
        kind: &'static str,
        n: &'static str,
        u: &'static str,
    ) -> Self {
        Case {
            controller: Some((api, kind, n, u)),
            ..self
        }
    }

    fn uid_or_default(&self) -> String {
        if self.uid.is_empty() {
            format!("uid-{}-{}-{}", self.watch, self.namespace, self.name)
        } else {
            self.uid.to_string()
        }
    }

    /// As the SDK's test object.
    fn sdk(&self) -> Obj {
        let mut o = Obj::new(self.watch, self.namespace, self.name).uid(&self.uid_or_default());
        for (path, value) in self.fields {
            o = o.set(path, *value);
        }
        for (k, v) in self.labels {
            o = o.label(k, v);
        }
        if let Some((api_version, kind, name, uid)) = self.controller {
            o = o.owner_reference(sdk::OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            });
        }
        o
    }

    /// As the API server would send it.
    fn json(&self) -> Value {
        let mut root = json!({"metadata": {"name": self.name, "uid": self.uid_or_default()}});
        if !self.namespace.is_empty() {
            root["metadata"]["namespace"] = json!(self.namespace);
        }
        for (path, value) in self.fields {
            let mut at = &mut root;
            let parts: Vec<&str> = path.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                if !at.get(*part).is_some_and(Value::is_object) {
                    at[*part] = Value::Object(Map::new());
                }
                at = &mut at[*part];
            }
            at[*parts.last().unwrap()] = json!(value);
        }
        if !self.labels.is_empty() {
            let labels: Map<String, Value> = self
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            root["metadata"]["labels"] = Value::Object(labels);
        }
        if let Some((api_version, kind, name, uid)) = self.controller {
            root["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version,
                "kind": kind, "name": name, "uid": uid, "controller": true}]);
        }
        root
    }
}

/// Quotas (primary; indexes on `spec.node`, the `team` label and
/// `spec.config`), pods of their namespace, ConfigMaps they control, nodes
/// and teams matched by index, settings ConfigMaps matched by index within
/// their namespace, secrets summed, events ignored; and tenants
/// (cluster-scoped primaries) controlling grants in namespaces; and
/// Namespaces as primaries, relating the service accounts in them and
/// every platform ConfigMap (a shared input).
fn sdk_manifest() -> sdk::Manifest {
    let quota = sdk::GroupVersionKind::new("example.com", "v1", "Quota");
    let core = sdk::GroupVersionKind::core;
    // Cluster-scoped, controlling ConfigMaps in namespaces.
    let tenant = sdk::GroupVersionKind::new("example.com", "v1", "Tenant");
    sdk::Manifest::new("agree")
        .watch(
            sdk::Watch::new("quotas", quota)
                .fields(["spec.limit"])
                .index("node", "spec.node")
                .index("team", "metadata.labels.team")
                .index("config", "spec.config")
                .per_object(),
        )
        .watch(sdk::Watch::new("pods", core("Pod")).same_namespace("quotas"))
        .watch(sdk::Watch::new("parts", core("ConfigMap")).owner("quotas"))
        .watch(
            sdk::Watch::new("nodes", core("Node"))
                .fields(["metadata.name"])
                .by_index("quotas", "node", "metadata.name"),
        )
        .watch(
            sdk::Watch::new("teams", core("Namespace"))
                .fields(["spec.team"])
                .by_index("quotas", "team", "spec.team"),
        )
        .watch(
            sdk::Watch::new("settings", core("ConfigMap"))
                .fields(["metadata.name"])
                .by_index_same_namespace("quotas", "config", "metadata.name"),
        )
        .watch(sdk::Watch::new("secrets", core("Secret")).aggregate("all"))
        .watch(sdk::Watch::new("tenants", tenant).per_object())
        .watch(sdk::Watch::new("grants", core("ConfigMap")).owner("tenants"))
        .watch(sdk::Watch::new("spaces", core("Namespace")).per_object())
        .watch(sdk::Watch::new("residents", core("ServiceAccount")).same_namespace("spaces"))
        .watch(sdk::Watch::new("platform", core("ConfigMap")).all("spaces"))
        .watch(sdk::Watch::new("events", core("Event")))
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

const QUOTA: &str = "example.com/v1";
const TENANT: &str = "example.com/v1";

/// The world every case starts from.
const WORLD: &[Case] = &[
    obj("quotas", "a", "qa")
        .uid("ua")
        .fields(&[("spec.node", "n1"), ("spec.config", "shared")])
        .labels(&[("team", "ml")]),
    obj("quotas", "a", "qa2")
        .uid("ua2")
        .fields(&[("spec.node", "n2")]),
    obj("quotas", "b", "qb")
        .uid("ub")
        .fields(&[("spec.node", "n1"), ("spec.config", "shared")])
        .labels(&[("team", "web")]),
    obj("pods", "a", "p1"),
    obj("pods", "b", "p2"),
    obj("parts", "a", "mine").controller(QUOTA, "Quota", "qa", "ua"),
    obj("parts", "a", "stale").controller(QUOTA, "Quota", "qa", "old-uid"),
    obj("parts", "b", "other-kind").controller("other.io/v1", "Quota", "qb", "ub"),
    obj("parts", "b", "core-kind").controller("v1", "Quota", "qb", "ub"),
    obj("nodes", "", "n1").fields(&[("metadata.name", "n1")]),
    obj("nodes", "", "n3").fields(&[("metadata.name", "n3")]),
    obj("teams", "", "t-ml").fields(&[("spec.team", "ml")]),
    obj("settings", "a", "shared").fields(&[("metadata.name", "shared")]),
    obj("settings", "a", "unused").fields(&[("metadata.name", "unused")]),
    obj("secrets", "a", "s"),
    obj("events", "a", "e"),
    obj("tenants", "", "t1").uid("ut1"),
    obj("grants", "a", "g1").controller(TENANT, "Tenant", "t1", "ut1"),
    obj("spaces", "", "a").uid("usa"),
    obj("residents", "a", "r1"),
    obj("residents", "b", "r2"),
    obj("platform", "platform", "defaults"),
];

/// Changes: each a new object added to [`WORLD`], or an edit of one of
/// its objects (same watch, namespace and name).
const CHANGES: &[Case] = &[
    obj("parts", "a", "mine").controller(QUOTA, "Quota", "qa2", "ua2"),
    obj("quotas", "a", "qa")
        .uid("ua")
        .fields(&[("spec.node", "n3")]),
    obj("quotas", "c", "new").fields(&[("spec.node", "n1")]),
    obj("pods", "a", "new"),
    obj("pods", "c", "new"),
    obj("parts", "a", "new").controller(QUOTA, "Quota", "qa2", "ua2"),
    obj("parts", "a", "gone-owner").controller(QUOTA, "Quota", "missing", "x"),
    obj("parts", "a", "other-group").controller("other.io/v1", "Quota", "qa", "ua"),
    obj("parts", "a", "no-owner"),
    obj("nodes", "", "n2").fields(&[("metadata.name", "n2")]),
    obj("nodes", "", "n9").fields(&[("metadata.name", "n9")]),
    obj("teams", "", "t-web").fields(&[("spec.team", "web")]),
    obj("settings", "b", "shared").fields(&[("metadata.name", "shared")]),
    obj("settings", "c", "shared").fields(&[("metadata.name", "shared")]),
    obj("secrets", "b", "new"),
    obj("events", "b", "new"),
    obj("grants", "b", "g2").controller(TENANT, "Tenant", "t1", "ut1"),
    obj("grants", "a", "g1").controller(TENANT, "Tenant", "t2", "ut2"),
    obj("residents", "a", "new"),
    obj("residents", "c", "new"),
    obj("spaces", "", "b"),
    obj("platform", "platform", "defaults").uid("recreated"),
    obj("platform", "elsewhere", "more"),
];

struct HostWorld {
    manifest: GuestManifest,
    writers: Vec<Writer>,
    caches: Vec<WatchCache>,
    interner: Interner,
}

impl HostWorld {
    fn new(manifest: GuestManifest) -> Self {
        let mut writers = Vec::new();
        let mut caches = Vec::new();
        for w in &manifest.watches {
            let writer =
                Writer::with_field_indexes(&field_positions(&w.projection, &w.indexed_paths()));
            caches.push(WatchCache {
                store: writer.store(),
                positions: (0..w.projection.paths().len()).collect(),
                // As discovery says of the table's kinds.
                namespaced: !matches!(w.gvk.kind.as_str(), "Node" | "Namespace" | "Tenant"),
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
        self.put_json(case.watch, &case.json())
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
}

fn sdk_world(m: &sdk::Manifest, extra: Option<&Case>) -> SdkWorld {
    SdkWorld::new(m).with_all(WORLD.iter().chain(extra).map(Case::sdk))
}

/// An SDK object as `watch:namespace/name`, as [`HostWorld::holds`] names
/// the host's.
fn sdk_object_name(o: &Obj) -> String {
    let key = o.key();
    let (ns, name) = key.split_once('/').unwrap_or(("", &key));
    format!("{}:{ns}/{name}", o.watch())
}

fn sdk_name(r: &sdk::Request) -> String {
    format!("{}:{}", r.watch.as_deref().unwrap_or("*"), r.key)
}

#[test]
fn every_change_wakes_the_same_keys_in_the_sdk_s_model_and_the_host() {
    let m = sdk_manifest();
    let mut woken = 0;
    for change in CHANGES {
        let mut host = HostWorld::new(host_manifest(&m));
        for case in WORLD {
            host.put(case);
        }
        let want = host.put(change);
        let old = WORLD.iter().find(|o| {
            (o.watch, o.namespace, o.name) == (change.watch, change.namespace, change.name)
        });
        let mut got: Vec<String> = sdk_world(&m, None)
            .wakes_edit(old.map(Case::sdk).as_ref(), &change.sdk())
            .unwrap()
            .iter()
            .map(sdk_name)
            .collect();
        got.sort();
        assert_eq!(
            got, want,
            "change {}:{}/{}",
            change.watch, change.namespace, change.name
        );
        woken += want.len();
    }
    assert_eq!(woken, 19, "the table wakes keys (it is not vacuous)");
}

#[test]
fn every_key_s_snapshot_holds_the_same_objects_in_the_sdk_s_model_and_the_host() {
    let m = sdk_manifest();
    let mut host = HostWorld::new(host_manifest(&m));
    for case in WORLD {
        host.put(case);
    }
    let sdk = sdk_world(&m, None);
    let quotas = host.watch("quotas");
    let mut keys: Vec<RequestKey> = ["a/qa", "a/qa2", "b/qb", "a/missing"]
        .into_iter()
        .map(|k| RequestKey::object(quotas, k))
        .collect();
    keys.push(RequestKey::object(host.watch("tenants"), "t1"));
    keys.push(RequestKey::object(host.watch("spaces"), "a"));
    keys.push(RequestKey::object(host.watch("spaces"), "b"));
    keys.push(RequestKey::aggregate("all"));
    let mut held = 0;
    for key in &keys {
        let want = host.holds(key);
        let request = match key.watch {
            Some(w) => sdk::Request::object(&host.manifest.watches[w].name, &key.key),
            None => sdk::Request::aggregate(&key.key),
        };
        let mut got: Vec<String> = sdk
            .objects_for(&request)
            .unwrap()
            .iter()
            .map(|o| sdk_object_name(o))
            .collect();
        got.sort();
        assert_eq!(got, want, "key {}", host.name(key));
        held += want.len();
    }
    assert_eq!(
        held, 39,
        "the snapshots hold objects (the table is not vacuous)"
    );
}

#[test]
fn a_departed_primary_s_snapshot_holds_the_same_related_objects_in_the_sdk_s_model_and_the_host() {
    let m = sdk_manifest();
    let mut held = 0;
    for (watch, key) in [("quotas", "a/qa"), ("tenants", "t1"), ("spaces", "a")] {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let is_it = |c: &&Case| (c.watch, c.namespace, c.name) == (watch, namespace, name);
        let departed = WORLD.iter().find(is_it).unwrap();
        let mut host = HostWorld::new(host_manifest(&m));
        for case in WORLD.iter().filter(|c| !is_it(c)) {
            host.put(case);
        }
        let p = host.watch(watch);
        let last = std::sync::Arc::new(
            host.manifest.watches[p]
                .projection
                .project(&departed.json(), &mut host.interner),
        );
        let want = host.named(&around_primary(
            &host.manifest,
            &host.caches,
            p,
            Some(&last),
            false,
        ));
        let sdk = SdkWorld::new(&m)
            .with_all(WORLD.iter().filter(|c| !is_it(c)).map(Case::sdk))
            .gone(departed.sdk());
        let request = sdk.request(watch, key).unwrap();
        assert_eq!(request.presence, Some(sdk::Presence::Gone));
        let mut got: Vec<String> = sdk
            .objects_for(&request)
            .unwrap()
            .iter()
            .map(|o| sdk_object_name(o))
            .collect();
        got.sort();
        assert_eq!(got, want, "departed {watch}:{key}");
        held += want.len();
    }
    assert!(held >= 6, "departed snapshots hold related objects: {held}");
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
    let mut host = HostWorld::new(host_manifest(&m));
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
