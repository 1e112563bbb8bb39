//! The worked examples of the book's page "Choosing key mappings"
//! (`docs/src/guest/key-mappings.md`), one test per shape: a manifest, a
//! world of objects, the keys a change wakes and what each key's snapshot
//! holds — live, gone and unselected — as the guest SDK's `World` computes
//! them with the host's mappings (a host test keeps the two equal). The
//! page includes these tests, so every example on it runs with
//! `cargo test -p wasmctrl-docs`.

#![allow(missing_docs)]

use wasmctrl_guest_sdk::testing::{Obj, World};
use wasmctrl_guest_sdk::{GroupVersionKind, Manifest, Presence, Request, Watch};

fn configmap() -> GroupVersionKind {
    GroupVersionKind::core("ConfigMap")
}

/// `watch:key` of each request a change to `object` wakes (`*:key` for an
/// aggregate key).
fn wakes(world: &World, object: &Obj) -> Vec<String> {
    let requests = world.wakes(object).expect("a declared watch");
    requests
        .into_iter()
        .map(|r| format!("{}:{}", r.watch.as_deref().unwrap_or("*"), r.key))
        .collect()
}

/// The presence of the key `key` of the primary watch `watch` in `world`,
/// and `watch:key` of each object its snapshot holds.
fn holds(world: &World, watch: &str, key: &str) -> (Presence, Vec<String>) {
    let request = world.request(watch, key).expect("a declared watch");
    let presence = request.presence.expect("a primary's key has one");
    (presence, held(world, &request))
}

fn held(world: &World, request: &Request) -> Vec<String> {
    let objects = world.objects_for(request).expect("declared watches");
    objects
        .iter()
        .map(|o| format!("{}:{}", o.watch(), o.key()))
        .collect()
}

#[test]
fn per_object() {
    // ANCHOR: per-object
    let manifest = Manifest::new("painter").watch(
        Watch::new("maps", configmap())
            .fields(["data.color"])
            .per_object(),
    );
    let world = World::new(&manifest)
        .with(Obj::new("maps", "ops", "a"))
        .with(Obj::new("maps", "ops", "b"));
    // A change wakes the object's own key; its snapshot holds it alone.
    assert_eq!(wakes(&world, &Obj::new("maps", "ops", "a")), ["maps:ops/a"]);
    assert_eq!(
        holds(&world, "maps", "ops/a"),
        (Presence::Present, vec!["maps:ops/a".into()])
    );
    // Deleted: the key reconciles gone, over a snapshot without it (no
    // other watch relates anything to it).
    let world = world.gone(Obj::new("maps", "ops", "c"));
    assert_eq!(holds(&world, "maps", "ops/c"), (Presence::Gone, vec![]));
    // ANCHOR_END: per-object
}

#[test]
fn owner() {
    // ANCHOR: owner
    let app = GroupVersionKind::new("apps.example.com", "v1", "App");
    let manifest = Manifest::new("app")
        .watch(Watch::new("apps", app.clone()).per_object())
        .watch(Watch::new("children", configmap()).owner("apps"));
    let web = Obj::new("apps", "team-a", "web");
    let child = Obj::new("children", "team-a", "web").controlled_by(&app, &web);
    let loose = Obj::new("children", "team-a", "loose");
    let world = World::new(&manifest)
        .with(web.clone())
        .with(child.clone())
        .with(loose.clone());
    // A change to a child wakes its controller owner; one nobody controls
    // wakes nothing.
    assert_eq!(wakes(&world, &child), ["apps:team-a/web"]);
    assert!(wakes(&world, &loose).is_empty());
    // The owner's snapshot holds it and the children it controls (by uid).
    assert_eq!(
        holds(&world, "apps", "team-a/web"),
        (
            Presence::Present,
            vec!["apps:team-a/web".into(), "children:team-a/web".into()]
        )
    );
    // Deleted with no finalizer to hold it: gone, and the snapshot still
    // holds the child its last uid controls, for the guest to delete.
    let world = World::new(&manifest).with(child).with(loose).gone(web);
    assert_eq!(
        holds(&world, "apps", "team-a/web"),
        (Presence::Gone, vec!["children:team-a/web".into()])
    );
    // ANCHOR_END: owner
}

#[test]
fn same_namespace() {
    // ANCHOR: same-namespace
    let quota = GroupVersionKind::new("example.com", "v1", "GpuQuota");
    let manifest = Manifest::new("gpu-quota")
        .watch(Watch::new("quotas", quota).per_object())
        .watch(Watch::new("pods", GroupVersionKind::core("Pod")).same_namespace("quotas"));
    let world = World::new(&manifest)
        .with(Obj::new("quotas", "team-a", "gpus"))
        .with(Obj::new("quotas", "team-a", "cpus"))
        .with(Obj::new("quotas", "team-b", "gpus"))
        .with(Obj::new("pods", "team-a", "p1"))
        .with(Obj::new("pods", "team-b", "p2"));
    // A pod wakes every quota of its namespace; a quota's snapshot holds
    // every pod of its namespace.
    assert_eq!(
        wakes(&world, &Obj::new("pods", "team-a", "p9")),
        ["quotas:team-a/cpus", "quotas:team-a/gpus"]
    );
    assert_eq!(
        holds(&world, "quotas", "team-b/gpus"),
        (
            Presence::Present,
            vec!["quotas:team-b/gpus".into(), "pods:team-b/p2".into()]
        )
    );
    // Deleted: its snapshot still holds the pods of the namespace it was in.
    let world = world.gone(Obj::new("quotas", "team-b", "cpus"));
    assert_eq!(
        holds(&world, "quotas", "team-b/cpus"),
        (Presence::Gone, vec!["pods:team-b/p2".into()])
    );
    // ANCHOR_END: same-namespace
}

#[test]
fn by_index() {
    // ANCHOR: by-index
    let app = GroupVersionKind::new("apps.example.com", "v1", "App");
    let manifest = Manifest::new("app")
        .watch(
            Watch::new("apps", app)
                .fields(["spec.configMap"])
                .index("config", "spec.configMap")
                .per_object(),
        )
        .watch(
            Watch::new("configs", configmap())
                .fields(["metadata.name"])
                .by_index_same_namespace("apps", "config", "metadata.name"),
        );
    let app = |ns: &str, name: &str, config: &str| {
        Obj::new("apps", ns, name).set("spec.configMap", config)
    };
    let config = |ns: &str, name: &str| Obj::new("configs", ns, name).set("metadata.name", name);
    let world = World::new(&manifest)
        .with(app("team-a", "web", "shared"))
        .with(app("team-a", "api", "own"))
        .with(app("team-b", "web", "shared"))
        .with(config("team-a", "shared"))
        .with(config("team-a", "own"))
        .with(config("team-b", "shared"));
    // A ConfigMap wakes the Apps of its namespace that name it; an App's
    // snapshot holds the ConfigMap it names, in its namespace.
    assert_eq!(
        wakes(&world, &config("team-a", "shared")),
        ["apps:team-a/web"]
    );
    assert_eq!(
        holds(&world, "apps", "team-a/api"),
        (
            Presence::Present,
            vec!["apps:team-a/api".into(), "configs:team-a/own".into()]
        )
    );
    // Deleted: its last index values still find what it named.
    let world = world
        .gone(app("team-c", "old", "legacy"))
        .with(config("team-c", "legacy"));
    assert_eq!(
        holds(&world, "apps", "team-c/old"),
        (Presence::Gone, vec!["configs:team-c/legacy".into()])
    );
    // ANCHOR_END: by-index
}

#[test]
fn aggregate() {
    // ANCHOR: aggregate
    let manifest = Manifest::new("gpu-summary")
        .watch(Watch::new("pods", GroupVersionKind::core("Pod")).aggregate("summary"));
    let world = World::new(&manifest)
        .with(Obj::new("pods", "team-a", "p1"))
        .with(Obj::new("pods", "team-b", "p2"));
    // Every change wakes the one key; its snapshot holds every pod, and
    // its request has no presence (it is no object's key).
    assert_eq!(
        wakes(&world, &Obj::new("pods", "team-c", "p3")),
        ["*:summary"]
    );
    let request = Request::aggregate("summary");
    assert_eq!(request.presence, None);
    assert_eq!(held(&world, &request), ["pods:team-a/p1", "pods:team-b/p2"]);
    // ANCHOR_END: aggregate
}
