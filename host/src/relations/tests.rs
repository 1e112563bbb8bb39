//! Key mappings and per-key snapshots over real stores (no cluster): which
//! keys a change wakes, and which objects a key's snapshot holds — the
//! related ones only, found through the indexes.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{json, Value};
use wasmctrl_snapshot::SnapshotView;

use super::{all_keys, keys_for, objects_for, WatchCache};
use crate::guest::bindings::wasmctrl::controller::types as wit;
use crate::guest::manifest::{self, GuestManifest};
use crate::guest::snapshot::{self, WatchView};
use crate::projection::field_positions;
use crate::projection::Interner;
use crate::request::RequestKey;
use crate::store::{Change, Writer};

/// The kinds of these tests that discovery would call cluster-scoped.
const CLUSTER_SCOPED: [&str; 3] = ["Node", "Namespace", "Tenant"];

fn gvk(group: &str, kind: &str) -> wit::GroupVersionKind {
    wit::GroupVersionKind {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
    }
}

fn watch(
    name: &str,
    g: wit::GroupVersionKind,
    fields: &[&str],
    keys: wit::KeyMapping,
) -> wit::Watch {
    wit::Watch {
        name: name.into(),
        gvk: g,
        plural: None,
        namespace: None,
        label_selector: None,
        field_selector: None,
        fields: fields.iter().map(|f| f.to_string()).collect(),
        indexes: vec![],
        keys,
        finalizer: None,
    }
}

/// Quotas (primary, per namespace, indexed by `spec.node`), pods in the
/// same namespace, replicas they own, and nodes matched by index.
fn manifest() -> GuestManifest {
    let mut quotas = watch(
        "quotas",
        gvk("example.com", "Quota"),
        &["spec.limit"],
        wit::KeyMapping::PerObject,
    );
    quotas.indexes = vec![wit::IndexSpec {
        name: "node".into(),
        field: "spec.node".into(),
    }];
    manifest::validate(&wit::Manifest {
        name: "quota".into(),
        watches: vec![
            quotas,
            watch(
                "pods",
                gvk("", "Pod"),
                &["spec.nodeName"],
                wit::KeyMapping::SameNamespace("quotas".into()),
            ),
            watch(
                "parts",
                gvk("", "ConfigMap"),
                &["data.x"],
                wit::KeyMapping::Owner("quotas".into()),
            ),
            watch(
                "nodes",
                gvk("", "Node"),
                &["metadata.name"],
                wit::KeyMapping::ByIndex(wit::IndexLink {
                    primary: "quotas".into(),
                    index: "node".into(),
                    field: "metadata.name".into(),
                }),
            ),
        ],
        writes: vec![],
        resync_seconds: None,
    })
    .unwrap()
}

struct World {
    manifest: GuestManifest,
    writers: Vec<Writer>,
    caches: Vec<WatchCache>,
    interner: Interner,
}

impl World {
    fn new() -> Self {
        Self::of(manifest())
    }

    fn of(manifest: GuestManifest) -> Self {
        let mut writers = Vec::new();
        let mut caches = Vec::new();
        for w in &manifest.watches {
            let indexed = field_positions(&w.projection, &w.indexed_paths());
            let writer = Writer::with_field_indexes(&indexed);
            caches.push(WatchCache {
                store: writer.store(),
                positions: (0..w.projection.paths().len()).collect(),
                namespaced: !CLUSTER_SCOPED.contains(&w.gvk.kind.as_str()),
            });
            writers.push(writer);
        }
        World {
            manifest,
            writers,
            caches,
            interner: Interner::default(),
        }
    }

    fn put(&mut self, w: usize, obj: Value) -> Change {
        let o = self.manifest.watches[w]
            .projection
            .project(&obj, &mut self.interner);
        self.writers[w].apply(o).unwrap()
    }

    fn keys(&self, w: usize, change: &Change) -> Vec<String> {
        keys_for(&self.manifest, &self.caches, w, change)
            .into_iter()
            .map(|k| {
                format!(
                    "{}:{}",
                    k.watch.map_or("-".into(), |w| w.to_string()),
                    k.key
                )
            })
            .collect()
    }

    /// The names the guest's snapshot for `key` holds, per watch.
    fn seen(&self, key: &RequestKey) -> Vec<(u32, String)> {
        let objects = objects_for(&self.manifest, &self.caches, key);
        let views: Vec<WatchView<'_>> = objects
            .iter()
            .zip(&self.caches)
            .map(|(o, c)| WatchView {
                objects: o.iter().map(Arc::as_ref).collect(),
                positions: c.positions.clone(),
            })
            .collect();
        let data = snapshot::build(&self.manifest, &views);
        let view = SnapshotView::new(&data).unwrap();
        (0..view.len())
            .map(|o| {
                (
                    view.watch(o),
                    format!("{}/{}", view.namespace(o), view.name(o)),
                )
            })
            .collect()
    }
}

fn quota(ns: &str, name: &str, uid: &str, node: &str) -> Value {
    json!({"metadata": {"namespace": ns, "name": name, "uid": uid}, "spec": {"node": node}})
}

fn pod(ns: &str, name: &str) -> Value {
    json!({"metadata": {"namespace": ns, "name": name, "uid": format!("p-{name}")}})
}

fn part(ns: &str, name: &str, owner: &str, owner_uid: &str) -> Value {
    json!({"metadata": {"namespace": ns, "name": name, "uid": format!("c-{name}"),
        "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Quota", "name": owner,
                             "uid": owner_uid, "controller": true}]}})
}

fn node(name: &str) -> Value {
    json!({"metadata": {"name": name, "uid": format!("n-{name}")}})
}

fn populated() -> World {
    let mut w = World::new();
    w.put(0, quota("a", "qa", "ua", "n1"));
    w.put(0, quota("b", "qb", "ub", "n2"));
    for i in 0..20 {
        w.put(
            1,
            pod(if i % 2 == 0 { "a" } else { "b" }, &format!("p{i:02}")),
        );
    }
    w.put(2, part("a", "owned-by-qa", "qa", "ua"));
    w.put(2, part("b", "owned-by-qb", "qb", "ub"));
    w.put(3, node("n1"));
    w.put(3, node("n2"));
    w.put(3, node("n3"));
    w
}

#[test]
fn same_namespace_owner_and_by_index_changes_wake_exactly_the_related_primaries() {
    let mut w = populated();
    let c = w.put(1, pod("a", "new"));
    assert_eq!(
        w.keys(1, &c),
        ["0:a/qa"],
        "a pod wakes the quotas of its namespace"
    );
    let c = w.put(2, part("b", "another", "qb", "ub"));
    assert_eq!(
        w.keys(2, &c),
        ["0:b/qb"],
        "an owned object wakes its controller owner"
    );
    let c = w.put(0, quota("a", "qa", "ua", "n3"));
    assert_eq!(w.keys(0, &c), ["0:a/qa"], "a primary is its own key");
    let c = w.put(3, node("n3-x"));
    assert!(w.keys(3, &c).is_empty(), "no quota indexes n3-x");
    let gone = w.writers[3].delete("", "n3").unwrap();
    assert_eq!(
        w.keys(3, &gone),
        ["0:a/qa"],
        "the node a quota indexes wakes it"
    );
    let mut keys = all_keys(&w.manifest, &w.caches);
    keys.sort();
    assert_eq!(
        keys,
        [RequestKey::object(0, "a/qa"), RequestKey::object(0, "b/qb")]
    );
}

#[test]
fn a_per_object_snapshot_holds_its_primary_and_only_related_objects() {
    let w = populated();
    let seen = w.seen(&RequestKey::object(0, "a/qa"));
    let pods: Vec<&str> = seen
        .iter()
        .filter(|(w, _)| *w == 1)
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(seen[0], (0, "a/qa".to_string()), "the primary comes first");
    assert_eq!(
        seen.iter().filter(|(w, _)| *w == 0).count(),
        1,
        "no other quota"
    );
    assert_eq!(pods.len(), 10);
    assert!(pods.iter().all(|p| p.starts_with("a/")), "{pods:?}");
    assert!(seen.contains(&(2, "a/owned-by-qa".into())));
    assert!(!seen.contains(&(2, "b/owned-by-qb".into())));
    assert!(seen.contains(&(3, "/n1".into())));
    assert!(!seen.iter().any(|(w, n)| *w == 3 && n != "/n1"), "{seen:?}");
    // A gone primary: an empty snapshot.
    assert!(w.seen(&RequestKey::object(0, "a/missing")).is_empty());
    // An aggregate key sees the world.
    assert_eq!(w.seen(&RequestKey::aggregate("all")).len(), 2 + 20 + 2 + 3);
}

/// Apps (primary, indexed by the ConfigMap they name) and ConfigMaps
/// linked to them by name, across namespaces or (`same-namespace:apps`)
/// only within their own.
fn apps_and_configmaps(primary: &str) -> GuestManifest {
    let mut apps = watch(
        "apps",
        gvk("example.com", "App"),
        &[],
        wit::KeyMapping::PerObject,
    );
    apps.indexes = vec![wit::IndexSpec {
        name: "config".into(),
        field: "spec.configMap".into(),
    }];
    let configs = watch(
        "configs",
        gvk("", "ConfigMap"),
        &["metadata.name"],
        wit::KeyMapping::ByIndex(wit::IndexLink {
            primary: primary.into(),
            index: "config".into(),
            field: "metadata.name".into(),
        }),
    );
    manifest::validate(&wit::Manifest {
        name: "apps".into(),
        watches: vec![apps, configs],
        writes: vec![],
        resync_seconds: None,
    })
    .unwrap()
}

fn app(ns: &str, name: &str, config: &str) -> Value {
    json!({"metadata": {"namespace": ns, "name": name, "uid": format!("u-{ns}-{name}")},
           "spec": {"configMap": config}})
}

fn configmap(ns: &str, name: &str) -> Value {
    json!({"metadata": {"namespace": ns, "name": name, "uid": format!("c-{ns}-{name}")}})
}

/// Three apps naming `shared` (two in `a`, one in `b`), one naming
/// `other`, and a `shared` ConfigMap in `b`.
fn apps_world(primary: &str) -> World {
    let mut w = World::of(apps_and_configmaps(primary));
    w.put(0, app("a", "one", "shared"));
    w.put(0, app("a", "two", "shared"));
    w.put(0, app("a", "four", "other"));
    w.put(0, app("b", "three", "shared"));
    w.put(1, configmap("b", "shared"));
    w
}

#[test]
fn a_same_namespace_by_index_link_wakes_only_the_primaries_of_the_object_s_namespace() {
    let mut w = apps_world("same-namespace:apps");
    let c = w.put(1, configmap("a", "shared"));
    assert_eq!(w.keys(1, &c), ["0:a/one", "0:a/two"]);
    let gone = w.writers[1].delete("b", "shared").unwrap();
    assert_eq!(w.keys(1, &gone), ["0:b/three"]);
    // Across namespaces (the plain link), the same ConfigMap wakes all three.
    let mut w = apps_world("apps");
    let c = w.put(1, configmap("a", "shared"));
    assert_eq!(w.keys(1, &c), ["0:a/one", "0:a/two", "0:b/three"]);
}

#[test]
fn a_same_namespace_by_index_snapshot_holds_only_the_matches_of_the_primary_s_namespace() {
    let mut w = apps_world("same-namespace:apps");
    w.put(1, configmap("a", "shared"));
    w.put(1, configmap("a", "other"));
    assert_eq!(
        w.seen(&RequestKey::object(0, "a/one")),
        [(0, "a/one".to_string()), (1, "a/shared".to_string())]
    );
    assert_eq!(
        w.seen(&RequestKey::object(0, "b/three")),
        [(0, "b/three".to_string()), (1, "b/shared".to_string())]
    );
    let mut w = apps_world("apps");
    w.put(1, configmap("a", "shared"));
    assert_eq!(
        w.seen(&RequestKey::object(0, "a/one")),
        [
            (0, "a/one".to_string()),
            (1, "a/shared".to_string()),
            (1, "b/shared".to_string())
        ]
    );
}

#[test]
fn key_mappings_naming_unknown_watches_or_indexes_are_refused_naming_the_field() {
    let base = || {
        let mut m = wit::Manifest {
            name: "g".into(),
            watches: vec![
                watch(
                    "quotas",
                    gvk("example.com", "Quota"),
                    &["spec.limit"],
                    wit::KeyMapping::PerObject,
                ),
                watch(
                    "pods",
                    gvk("", "Pod"),
                    &["spec.nodeName"],
                    wit::KeyMapping::None,
                ),
            ],
            writes: vec![],
            resync_seconds: None,
        };
        m.watches[0].indexes = vec![wit::IndexSpec {
            name: "node".into(),
            field: "spec.node".into(),
        }];
        m
    };
    type Edit = Box<dyn Fn(&mut wit::Manifest)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|m| m.watches[1].keys = wit::KeyMapping::Owner("nope".into())),
            "watches[1] (pods).keys.owner: names watch \"nope\", which the manifest does not declare",
        ),
        (
            Box::new(|m| m.watches[1].keys = wit::KeyMapping::SameNamespace("pods".into())),
            "watches[1] (pods).keys.same-namespace: names watch \"pods\", which is not a primary",
        ),
        (
            Box::new(|m| m.watches[1].keys = wit::KeyMapping::All("nope".into())),
            "watches[1] (pods).keys.all: names watch \"nope\", which the manifest does not declare",
        ),
        (
            Box::new(|m| m.watches[1].keys = wit::KeyMapping::All("pods".into())),
            "watches[1] (pods).keys.all: names watch \"pods\", which is not a primary",
        ),
        (
            Box::new(|m| {
                m.watches[1].keys = wit::KeyMapping::ByIndex(wit::IndexLink {
                    primary: "quotas".into(),
                    index: "zone".into(),
                    field: "spec.nodeName".into(),
                })
            }),
            "watches[1] (pods).keys.by-index.index: names index \"zone\"",
        ),
        (
            Box::new(|m| {
                m.watches[1].keys = wit::KeyMapping::ByIndex(wit::IndexLink {
                    primary: "quotas".into(),
                    index: "node".into(),
                    field: "spec.other".into(),
                })
            }),
            "watches[1] (pods).keys.by-index.field: names field \"spec.other\"",
        ),
        (
            Box::new(|m| {
                m.watches[1].keys = wit::KeyMapping::ByIndex(wit::IndexLink {
                    primary: "same-namespace:nope".into(),
                    index: "node".into(),
                    field: "spec.nodeName".into(),
                })
            }),
            "watches[1] (pods).keys.by-index.primary: names watch \"nope\", which the manifest does not declare",
        ),
        (
            Box::new(|m| {
                m.watches[1].keys = wit::KeyMapping::ByIndex(wit::IndexLink {
                    primary: "same-zone:quotas".into(),
                    index: "node".into(),
                    field: "spec.nodeName".into(),
                })
            }),
            "watches[1] (pods).keys.by-index.primary: names watch \"same-zone:quotas\", which the manifest does not declare",
        ),
        (
            Box::new(|m| m.watches[0].finalizer = Some("cleanup".into())),
            "watches[0] (quotas).finalizer: \"cleanup\" is not a qualified name",
        ),
        (
            Box::new(|m| m.watches[1].finalizer = Some("example.com/x".into())),
            "watches[1] (pods).finalizer: finalizer \"example.com/x\" needs per-object keys",
        ),
        (
            Box::new(|m| m.watches[1].name = "quotas".into()),
            "watches[1].name: watch name \"quotas\" is declared twice",
        ),
        (
            Box::new(|m| m.watches[1].name = "Pods".into()),
            "watches[1].name: \"Pods\" is not a lowercase DNS label",
        ),
    ];
    for (change, want) in cases {
        let mut m = base();
        change(&mut m);
        let e = manifest::validate(&m).expect_err(want).to_string();
        assert!(e.starts_with(want), "{e}\n  wanted: {want}");
    }
    let mut ok = base();
    ok.watches[0].finalizer = Some("example.com/cleanup".into());
    assert!(manifest::validate(&ok).is_ok());
}

#[test]
fn a_namespaced_child_wakes_its_cluster_scoped_owner_by_its_name_alone() {
    let m = manifest::validate(&wit::Manifest {
        name: "tenants".into(),
        watches: vec![
            watch(
                "tenants",
                gvk("example.com", "Tenant"),
                &[],
                wit::KeyMapping::PerObject,
            ),
            watch(
                "grants",
                gvk("", "ConfigMap"),
                &[],
                wit::KeyMapping::Owner("tenants".into()),
            ),
        ],
        writes: vec![],
        resync_seconds: None,
    })
    .unwrap();
    let mut w = World::of(m);
    w.put(0, json!({"metadata": {"name": "t1", "uid": "ut1"}}));
    let grant = |ns: &str, name: &str| {
        json!({"metadata": {"namespace": ns, "name": name, "uid": format!("g-{ns}-{name}"),
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Tenant",
                                 "name": "t1", "uid": "ut1", "controller": true}]}})
    };
    let a = w.put(1, grant("team-a", "g"));
    assert_eq!(w.keys(1, &a), ["0:t1"], "not team-a/t1, which nobody has");
    let b = w.put(1, grant("team-b", "g"));
    assert_eq!(w.keys(1, &b), ["0:t1"]);
    // The tenant's snapshot holds its grants of every namespace.
    assert_eq!(
        w.seen(&RequestKey::object(0, "t1")),
        [
            (0, "/t1".to_string()),
            (1, "team-a/g".to_string()),
            (1, "team-b/g".to_string())
        ]
    );
}

#[test]
fn a_kind_is_cluster_scoped_offline_when_its_objects_have_no_namespace() {
    use super::namespaced_by_objects;
    assert!(namespaced_by_objects(["a", "b"].into_iter()));
    assert!(namespaced_by_objects(["", "b"].into_iter()));
    assert!(!namespaced_by_objects(["", ""].into_iter()));
    assert!(
        namespaced_by_objects(std::iter::empty()),
        "unknown: namespaced"
    );
}

#[test]
fn a_namespace_primary_relates_the_objects_in_the_namespace_it_is() {
    let m = manifest::validate(&wit::Manifest {
        name: "spaces".into(),
        watches: vec![
            watch(
                "spaces",
                gvk("", "Namespace"),
                &[],
                wit::KeyMapping::PerObject,
            ),
            watch(
                "pods",
                gvk("", "Pod"),
                &[],
                wit::KeyMapping::SameNamespace("spaces".into()),
            ),
        ],
        writes: vec![],
        resync_seconds: None,
    })
    .unwrap();
    let mut w = World::of(m);
    w.put(0, json!({"metadata": {"name": "team-a", "uid": "ns-a"}}));
    let a = w.put(1, pod("team-a", "p1"));
    assert_eq!(w.keys(1, &a), ["0:team-a"], "a pod wakes its Namespace");
    let b = w.put(1, pod("team-b", "p2"));
    assert!(w.keys(1, &b).is_empty(), "no Namespace team-b cached");
    assert_eq!(
        w.seen(&RequestKey::object(0, "team-a")),
        [(0, "/team-a".to_string()), (1, "team-a/p1".to_string())]
    );
}

#[test]
fn a_change_only_a_wider_shared_projection_holds_leaves_the_watch_unchanged() {
    use crate::projection::{FieldPath, Projection};
    // The informer keeps the watch's `spec.limit` and, after it, the whole
    // object for the outputs cache of the same kind.
    let projection = Projection::new(
        vec![FieldPath::parse("spec.limit").unwrap(), FieldPath::whole()],
        vec![],
    );
    let mut interner = Interner::default();
    let mut writer = Writer::default();
    let cache = WatchCache {
        store: writer.store(),
        positions: vec![0],
        namespaced: true,
    };
    let mut put = |obj: &Value| {
        writer
            .apply(projection.project(obj, &mut interner))
            .unwrap()
    };
    let mut obj = json!({
        "metadata": {"namespace": "ns", "name": "q", "uid": "u1", "resourceVersion": "1"},
        "spec": {"limit": 1},
        "data": {"a": "1"}
    });
    assert!(!cache.unchanged(&put(&obj)), "an addition is a change");
    let mut step = |obj: &mut Value, rv: &str, edit: &dyn Fn(&mut Value)| {
        edit(obj);
        obj["metadata"]["resourceVersion"] = json!(rv);
        cache.unchanged(&put(obj))
    };
    assert!(
        step(&mut obj, "2", &|o| o["data"]["a"] = json!("2")),
        "a field the watch neither shows nor indexes"
    );
    assert!(!step(&mut obj, "3", &|o| o["spec"]["limit"] = json!(2)));
    assert!(!step(&mut obj, "4", &|o| o["metadata"]["finalizers"] =
        json!(["a/b"])));
    assert!(!step(&mut obj, "5", &|o| o["metadata"]["generation"] = json!(2)));
    assert!(!step(&mut obj, "6", &|o| {
        o["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "App", "name": "a", "uid": "o1", "controller": true}])
    }));
    assert!(!step(&mut obj, "7", &|o| {
        o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z")
    }));
    let gone = writer.delete("ns", "q").unwrap();
    assert!(!cache.unchanged(&gone), "a deletion is a change");
}
