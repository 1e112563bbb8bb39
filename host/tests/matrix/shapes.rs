//! The guest shapes of the matrix: each one's `.wat` guests, what converged
//! means for it, how a person edits what it writes, and its table of steps.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use super::{create_widget, delete_if_there, Lab, Step, World, Writes};
use crate::support::wat::{
    guest, Behaviour, WatKeys, WatManifest, WatRef, WatRule, WatWatch, WatWrite,
};
use crate::support::widget::widget_api;
use crate::support::{HOST_NS, PODS_NS};

/// The finalizer the host keeps for the child and status shapes.
const FINALIZER: &str = "example.com/cleanup";
/// The aggregate shape's one output, in [`HOST_NS`].
const SUMMARY: &str = "summary";

/// A guest shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Every Widget under one key; writes one ConfigMap.
    Aggregate,
    /// Per Widget (finalizer): a child ConfigMap `<name>-child` it
    /// controls, watched back by owner; on deletion the child is deleted
    /// explicitly (no garbage collector) before the finalizer is released.
    Child,
    /// Per Widget (finalizer): its own `status.phase`; on deletion
    /// "Cleaning", then the finalizer released.
    Status,
    /// Per ConfigMap: updates `data.seen` of the very ConfigMap it watches,
    /// in one namespace or cluster-wide.
    OwnKind { namespaced: bool },
    /// Two guests on one informer of Widgets: one applies a child
    /// `<name>-copy` (garbage collector on, no finalizer), the other the
    /// Widget's status.
    Shared,
}

fn configmaps(client: &Client, namespace: &str) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), namespace)
}

fn rule(group: &str, kind: &str, namespace: Option<&str>, status: bool) -> WatRule {
    WatRule {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_string),
        names: Vec::new(),
        status,
    }
}

fn widget_ref() -> WatRef {
    WatRef {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        namespace: Some(PODS_NS.into()),
        name: "{name}".into(),
    }
}

/// A ConfigMap `<name><suffix>` controlled by the reconciled Widget.
fn child_doc(suffix: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{{name}}{suffix}"), "namespace": PODS_NS,
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
                "name": "{name}", "uid": "{uid}", "controller": true, "blockOwnerDeletion": true}]},
        "data": {"of": "{name}"}})
    .to_string()
}

fn status_doc(phase: &str) -> String {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "{name}", "namespace": PODS_NS}, "status": {"phase": phase}})
    .to_string()
}

/// A distinct value for each edit.
fn next_edit() -> u32 {
    static EDITS: AtomicU32 = AtomicU32::new(1);
    EDITS.fetch_add(1, Ordering::Relaxed)
}

/// A patch's answer: fine, or 404 (a random schedule edits what the
/// guest may not have written yet).
fn unless_gone<T>(r: Result<T, kube::Error>) {
    match r {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("patch: {e}"),
    }
}

/// A person's merge patch, as `kubectl patch --type merge` sends it.
fn by_hand() -> PatchParams {
    PatchParams {
        field_manager: Some("kubectl-patch".into()),
        ..PatchParams::default()
    }
}

fn owned_by(map: &ConfigMap, owner: &Value) -> bool {
    let uid = owner["metadata"]["uid"].as_str();
    match map.metadata.owner_references.as_deref().unwrap_or_default() {
        [r] => r.kind == "Widget" && r.controller == Some(true) && Some(&*r.uid) == uid,
        _ => false,
    }
}

fn has_child(world: &World, name: &str, suffix: &str) -> Result<(), String> {
    let w = serde_json::to_value(world.widget(name).ok_or("no widget")?).unwrap();
    let child = world
        .map(PODS_NS, &format!("{name}{suffix}"))
        .ok_or_else(|| format!("no child {name}{suffix}"))?;
    let of = child.data.as_ref().and_then(|d| d.get("of"));
    if of.map(String::as_str) != Some(name) {
        return Err(format!("child data.of is {of:?}"));
    }
    if !owned_by(child, &w) {
        return Err(format!(
            "child not controlled by the widget: {:?}",
            child.metadata.owner_references
        ));
    }
    Ok(())
}

fn has_status(world: &World, name: &str, phase: &str) -> Result<(), String> {
    let w = world.widget(name).ok_or("no widget")?;
    let seen = &w.data["status"]["phase"];
    if seen != phase {
        return Err(format!("status.phase is {seen}"));
    }
    Ok(())
}

fn holds_finalizer(world: &World, name: &str) -> Result<(), String> {
    let w = world.widget(name).ok_or("no widget")?;
    if w.metadata.deletion_timestamp.is_some() {
        return Err("being deleted".into());
    }
    let f = w.metadata.finalizers.clone().unwrap_or_default();
    if f != [FINALIZER] {
        return Err(format!("finalizers {f:?}"));
    }
    Ok(())
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Aggregate => "aggregate",
            Shape::Child => "child",
            Shape::Status => "status",
            Shape::OwnKind { namespaced: false } => "own-kind cluster-wide",
            Shape::OwnKind { namespaced: true } => "own-kind namespaced",
            Shape::Shared => "shared informer",
        }
    }

    /// Whether the API server runs its garbage collector (off where the
    /// host's explicit deletes are what is tested).
    pub fn gc(self) -> bool {
        self == Shape::Shared
    }

    /// Each guest's file name and component bytes.
    pub fn guests(self) -> Vec<(String, Vec<u8>)> {
        let widgets = |keys, finalizer| WatWatch::widgets("widgets", keys, finalizer);
        match self {
            Shape::Aggregate => {
                let m = WatManifest {
                    name: "summary".into(),
                    watches: vec![widgets(WatKeys::Aggregate("all".into()), None)],
                    writes: vec![WatRule {
                        names: vec![SUMMARY.into()],
                        ..rule("", "ConfigMap", Some(HOST_NS), false)
                    }],
                };
                let doc = crate::support::wat::configmap_doc(HOST_NS, SUMMARY, &[("of", "all")]);
                vec![("summary".into(), guest(&m, Behaviour::Apply(vec![doc])))]
            }
            Shape::Child => {
                let children = WatWatch {
                    name: "children".into(),
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                    plural: None,
                    namespace: Some(PODS_NS.into()),
                    fields: vec!["data.of".into()],
                    indexes: Vec::new(),
                    keys: WatKeys::Owner("widgets".into()),
                    finalizer: None,
                    label_selector: None,
                };
                let m = WatManifest {
                    name: "children".into(),
                    watches: vec![widgets(WatKeys::PerObject, Some(FINALIZER)), children],
                    writes: vec![rule("", "ConfigMap", Some(PODS_NS), false)],
                };
                let child = WatRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: Some(PODS_NS.into()),
                    name: "{name}-child".into(),
                };
                let b = Behaviour::ByLifecycle {
                    live: vec![WatWrite::Apply(child_doc("-child"))],
                    deleting: vec![
                        WatWrite::Delete(child),
                        WatWrite::RemoveFinalizer(widget_ref(), FINALIZER.into()),
                    ],
                };
                vec![("children".into(), guest(&m, b))]
            }
            Shape::Status => {
                let m = WatManifest {
                    name: "status".into(),
                    watches: vec![widgets(WatKeys::PerObject, Some(FINALIZER))],
                    writes: vec![rule("example.com", "Widget", Some(PODS_NS), true)],
                };
                let b = Behaviour::ByLifecycle {
                    live: vec![WatWrite::ApplyStatus(status_doc("Seen"))],
                    deleting: vec![
                        WatWrite::ApplyStatus(status_doc("Cleaning")),
                        WatWrite::RemoveFinalizer(widget_ref(), FINALIZER.into()),
                    ],
                };
                vec![("status".into(), guest(&m, b))]
            }
            Shape::OwnKind { namespaced } => {
                let scope = namespaced.then_some(PODS_NS);
                let m = WatManifest {
                    name: "stamp".into(),
                    watches: vec![WatWatch {
                        name: "maps".into(),
                        group: String::new(),
                        version: "v1".into(),
                        kind: "ConfigMap".into(),
                        plural: None,
                        namespace: scope.map(str::to_string),
                        fields: vec!["data.seen".into()],
                        indexes: Vec::new(),
                        keys: WatKeys::PerObject,
                        finalizer: None,
                        label_selector: None,
                    }],
                    writes: vec![rule("", "ConfigMap", scope, false)],
                };
                let doc = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "{name}", "namespace": "{namespace}"},
                    "data": {"seen": "yes"}})
                .to_string();
                let b = Behaviour::ByLifecycle {
                    live: vec![WatWrite::Update(doc)],
                    deleting: Vec::new(),
                };
                vec![("stamp".into(), guest(&m, b))]
            }
            Shape::Shared => {
                let copies = WatManifest {
                    name: "copies".into(),
                    watches: vec![widgets(WatKeys::PerObject, None)],
                    writes: vec![rule("", "ConfigMap", Some(PODS_NS), false)],
                };
                let stamps = WatManifest {
                    name: "stamps".into(),
                    watches: vec![widgets(WatKeys::PerObject, None)],
                    writes: vec![rule("example.com", "Widget", Some(PODS_NS), true)],
                };
                let copy = Behaviour::ByLifecycle {
                    live: vec![WatWrite::Apply(child_doc("-copy"))],
                    deleting: Vec::new(),
                };
                let stamp = Behaviour::ByLifecycle {
                    live: vec![WatWrite::ApplyStatus(status_doc("Seen"))],
                    deleting: Vec::new(),
                };
                vec![
                    ("copies".into(), guest(&copies, copy)),
                    ("stamps".into(), guest(&stamps, stamp)),
                ]
            }
        }
    }

    fn primary_is_configmap(self) -> bool {
        matches!(self, Shape::OwnKind { .. })
    }

    pub async fn create(self, client: &Client, name: &str) {
        if self.primary_is_configmap() {
            let cm = json!({"metadata": {"name": name, "namespace": PODS_NS}, "data": {"k": "0"}});
            configmaps(client, PODS_NS)
                .create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
                .await
                .unwrap();
        } else {
            create_widget(client, name).await;
        }
    }

    pub async fn delete(self, client: &Client, name: &str) {
        if self.primary_is_configmap() {
            delete_if_there(&configmaps(client, PODS_NS), name).await;
        } else {
            delete_if_there(&widget_api(client, PODS_NS), name).await;
        }
    }

    async fn patch_primary(self, client: &Client, name: &str, patch: Value) {
        if self.primary_is_configmap() {
            configmaps(client, PODS_NS)
                .patch(name, &by_hand(), &Patch::Merge(patch))
                .await
                .unwrap();
        } else {
            widget_api(client, PODS_NS)
                .patch(name, &by_hand(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    }

    pub async fn edit_spec(self, client: &Client, name: &str) {
        let n = next_edit();
        let patch = if self.primary_is_configmap() {
            json!({"data": {"k": n.to_string()}})
        } else {
            json!({"spec": {"cycle": n}})
        };
        self.patch_primary(client, name, patch).await;
    }

    pub async fn edit_labels(self, client: &Client, name: &str) {
        let patch = json!({"metadata": {"labels": {"touched": next_edit().to_string()}}});
        self.patch_primary(client, name, patch).await;
    }

    /// A person changes what the guest wrote for `name`.
    pub async fn edit_output(self, client: &Client, name: &str) {
        let edit = PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..PatchParams::default()
        };
        let by_hand = json!({"data": {"of": "hand"}});
        match self {
            Shape::Aggregate => {
                unless_gone(
                    configmaps(client, HOST_NS)
                        .patch(SUMMARY, &edit, &Patch::Merge(by_hand))
                        .await,
                );
            }
            Shape::Child | Shape::Shared => {
                let suffix = if self == Shape::Child {
                    "-child"
                } else {
                    "-copy"
                };
                unless_gone(
                    configmaps(client, PODS_NS)
                        .patch(&format!("{name}{suffix}"), &edit, &Patch::Merge(by_hand))
                        .await,
                );
            }
            Shape::Status => {
                unless_gone(
                    widget_api(client, PODS_NS)
                        .patch_status(
                            name,
                            &edit,
                            &Patch::Merge(json!({"status": {"phase": "Hand"}})),
                        )
                        .await,
                );
            }
            Shape::OwnKind { .. } => {
                unless_gone(
                    configmaps(client, PODS_NS)
                        .patch(name, &edit, &Patch::Merge(json!({"data": {"seen": "no"}})))
                        .await,
                );
            }
        }
    }

    /// A person deletes what the guest wrote for `name`.
    pub async fn delete_output(self, client: &Client, name: &str) {
        let (namespace, output) = match self {
            Shape::Aggregate => (HOST_NS, SUMMARY.to_string()),
            Shape::Child => (PODS_NS, format!("{name}-child")),
            Shape::Shared => (PODS_NS, format!("{name}-copy")),
            other => panic!("{other:?} writes nothing a person can delete apart"),
        };
        delete_if_there(&configmaps(client, namespace), &output).await;
    }

    pub fn primary_exists(self, world: &World, name: &str) -> bool {
        if self.primary_is_configmap() {
            world.map(PODS_NS, name).is_some()
        } else {
            world.widget(name).is_some()
        }
    }

    /// Whether `name`'s outputs are as its guests write them.
    pub fn has_outputs(self, world: &World, name: &str) -> Result<(), String> {
        match self {
            Shape::Aggregate => Ok(()),
            Shape::Child => {
                holds_finalizer(world, name)?;
                has_child(world, name, "-child")
            }
            Shape::Status => {
                holds_finalizer(world, name)?;
                has_status(world, name, "Seen")
            }
            Shape::OwnKind { .. } => {
                let m = world.map(PODS_NS, name).ok_or("no ConfigMap")?;
                let seen = m.data.as_ref().and_then(|d| d.get("seen"));
                match seen.map(String::as_str) {
                    Some("yes") => Ok(()),
                    other => Err(format!("data.seen is {other:?}")),
                }
            }
            Shape::Shared => {
                has_status(world, name, "Seen")?;
                has_child(world, name, "-copy")
            }
        }
    }

    /// What is left of gone `name`'s outputs, if anything.
    pub fn outputs_left(self, world: &World, name: &str) -> Option<String> {
        let child = match self {
            Shape::Child => format!("{name}-child"),
            Shape::Shared => format!("{name}-copy"),
            _ => return None,
        };
        world.map(PODS_NS, &child).map(|_| child)
    }

    /// Outputs that do not belong to one primary (the aggregate's).
    pub fn has_shared_outputs(self, world: &World) -> Result<(), String> {
        if self != Shape::Aggregate {
            return Ok(());
        }
        let m = world.map(HOST_NS, SUMMARY).ok_or("no summary")?;
        match m
            .data
            .as_ref()
            .and_then(|d| d.get("of"))
            .map(String::as_str)
        {
            Some("all") => Ok(()),
            other => Err(format!("summary data.of is {other:?}")),
        }
    }

    /// What `step` may cost in writes once converged: these guests'
    /// documents never depend on spec, labels or others' status, so only
    /// a primary's arrival and departure and a person's change of an
    /// output need one.
    pub fn writes_for(self, step: Step) -> Writes {
        match step {
            Step::Create(_) if self == Shape::Aggregate => Writes::None,
            Step::Create(_) | Step::EditOutput(_) | Step::DeleteOutput(_) => Writes::Some,
            Step::Delete(_) if matches!(self, Shape::Child | Shape::Status) => Writes::Some,
            Step::Delete(_)
            | Step::EditSpec(_)
            | Step::EditLabels(_)
            | Step::ForeignStatus(_)
            | Step::Restart
            | Step::Resync => Writes::None,
            Step::DeleteBeforeFinalizer(_) | Step::RestartMidDeletion(_) => Writes::Any,
        }
    }

    /// Explicit DELETEs and finalizer releases one primary's deletion sends.
    pub fn deletes_on_delete(self) -> (u64, u64) {
        match self {
            Shape::Child => (1, 1),
            Shape::Status => (0, 1),
            _ => (0, 0),
        }
    }

    /// Every event this shape meets, in order.
    pub fn steps(self) -> Vec<Step> {
        use Step::*;
        let mut steps = vec![Create("z"), EditSpec("z"), EditLabels("z")];
        if !self.primary_is_configmap() {
            steps.push(ForeignStatus("z"));
        }
        steps.push(EditOutput("z"));
        if matches!(self, Shape::Aggregate | Shape::Child | Shape::Shared) {
            steps.push(DeleteOutput("z"));
        }
        steps.extend([Restart, Resync, Delete("z")]);
        if matches!(self, Shape::Child | Shape::Status) {
            steps.push(DeleteBeforeFinalizer("y"));
        }
        steps.extend([Create("x"), RestartMidDeletion("x")]);
        steps
    }
}

async fn cells(shape: Shape) {
    Lab::new(shape).await.run(&shape.steps()).await;
}

pub async fn aggregate_cells() {
    cells(Shape::Aggregate).await;
}

pub async fn child_cells() {
    cells(Shape::Child).await;
}

pub async fn status_cells() {
    cells(Shape::Status).await;
}

pub async fn own_kind_cells(namespaced: bool) {
    cells(Shape::OwnKind { namespaced }).await;
}

pub async fn shared_cells() {
    cells(Shape::Shared).await;
}
