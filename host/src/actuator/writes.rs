//! The object writes: server-side apply (create-or-update, update-only,
//! status subresource), or the merge patch standing in for it, and delete.
//! Owns the no-op tests ([`contains`], [`drops_owned_field`]), the echo
//! and write-war bookkeeping around each write, and [`gone`]. It never
//! creates through a pinned write and never retries in line.
//!
//! # Rules
//! - Each write is skipped when the cached live object already agrees
//!   (never while an echo of ours is due: the cache is then older than the
//!   object), and each pinned write is classified as done, skipped or
//!   dropped.
//! - [`gone`] says which API answers mean the object a pinned write aimed
//!   at no longer exists as the guest saw it (404, 409 uid mismatch or
//!   failed precondition, 422 on `metadata.uid`, any 422 to a finalizer
//!   patch).
//! - A pinned write never creates: the uid travels in the document (apply)
//!   or the preconditions (delete), and the API server refuses the rest.
//! - A write to an object in a write war is held back, not sent; a create
//!   whose controller owner is known to be gone is dropped.
//! - A document is compared with the live object as the server stores it
//!   ([`compare_form`]): in a built-in kind, a resource quantity in
//!   canonical form (`cpu: 1000m` is no difference from a live `cpu: "1"`)
//!   and a field Go leaves out at its zero value absent (`paused: false`
//!   agrees with a Deployment that has no `paused`). It is sent as the guest
//!   wrote it, but for a Secret's `stringData`, sent merged into `data`
//!   ([`sent_form`]), as the server stores it.

use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Map, Value as Json};

use super::contest::Verdict;
use super::entries::Decision;
use super::merge::merge_patch_for;
use super::{Actuator, ActuatorError, Step};
use crate::guest::{EntryWrite, ObjectKey};
use crate::metrics::WriteVerb;
use wasmctrl_kube_rules::builtin;
use wasmctrl_kube_rules::numbers::same_number;

/// How long a write waits for the echo of our previous write to an object
/// we merge-patched before going out as a full apply anyway.
const ECHO_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);
/// When such a waiting write is looked at again if no echo wakes it first.
const ECHO_RECHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether `live` already has every field of `desired` with the same value.
/// Scalars compare whole (numbers by value when either is a float, as the
/// server prints a whole float as an integer); a list holds a desired list of as many items,
/// item by item in order (so the fields the API server defaults inside
/// items — a container's `imagePullPolicy`, a port's `protocol` — are not a
/// difference; a list of another length is); an empty map or list in
/// `desired` matches an absent field (the API server omits empty maps).
/// A field this manager set before and `desired` now omits is
/// [`drops_owned_field`]'s to find.
pub fn contains(live: &Json, desired: &Json) -> bool {
    match (live, desired) {
        (Json::Object(l), Json::Object(d)) => d.iter().all(|(k, dv)| match l.get(k) {
            Some(lv) => contains(lv, dv),
            None => is_empty(dv),
        }),
        (Json::Array(l), Json::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(lv, dv)| contains(lv, dv))
        }
        // `2.0` is stored as `2` ([`same_number`]).
        (Json::Number(l), Json::Number(d)) => same_number(l, d),
        (l, d) => l == d || (is_empty(l) && is_empty(d)),
    }
}

/// `desired`, a document for `target`, as it is sent: a Secret's
/// `stringData` merged into its `data`, base64-encoded
/// ([`builtin::merge_string_data`]), as the server stores it anyway; the
/// apply then owns those `data` keys (the Kubernetes documentation warns
/// that `stringData` does not work well with server-side apply). None for
/// every other document.
pub(super) fn sent_form(target: &ObjectKey, desired: &Json) -> Option<Json> {
    let gvk = &target.gvk;
    desired.get("stringData")?;
    let mut doc = desired.clone();
    builtin::merge_string_data(&gvk.group, &gvk.version, &gvk.kind, &mut doc).then_some(doc)
}

/// `desired`, a document for `target`, to be compared with the live object
/// the server stores from it ([`builtin::compare_form`]: a built-in kind's
/// resource quantities in canonical form, `1000m` → `1`, and the fields Go
/// leaves out at their zero value as `null`, "absent or zero"); None when
/// that changes nothing (a ConfigMap, a custom resource: their one rewrite,
/// a whole float stored as an integer, is `contains`' to allow).
pub(super) fn compare_form(target: &ObjectKey, desired: &Json) -> Option<Json> {
    let gvk = &target.gvk;
    if !builtin::rewrites_kind(&gvk.group, &gvk.version, &gvk.kind) {
        return None;
    }
    let mut doc = desired.clone();
    builtin::compare_form(&gvk.group, &gvk.version, &gvk.kind, &mut doc).then_some(doc)
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Object(m) => m.values().all(is_empty),
        Json::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Whether `manager` owns (on the main resource when `subresource` is None,
/// else on that subresource) a field of `live` that `desired` no longer
/// sets — an apply is then needed to remove it. Fields owned through Apply
/// count, and fields outside `metadata` owned through Update (the entries
/// the merge patches wrote); our finalizer patches own `metadata` entries
/// the plan never sets.
pub fn drops_owned_field(
    live: &Json,
    desired: &Json,
    manager: &str,
    subresource: Option<&str>,
) -> bool {
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
    else {
        return false;
    };
    entries
        .iter()
        .filter(|e| {
            e.get("manager").and_then(Json::as_str) == Some(manager)
                && e.get("subresource").and_then(Json::as_str) == subresource
        })
        .any(|e| {
            let Some(fields) = e.get("fieldsV1").and_then(Json::as_object) else {
                return false;
            };
            match e.get("operation").and_then(Json::as_str) {
                Some("Apply") => owned_missing(fields, Some(desired)),
                Some("Update") => patched_missing(live, fields, desired, manager),
                _ => false,
            }
        })
}

/// Whether an Update entry of `manager` (what [`super::merge`] patched)
/// owns a map entry, outside `metadata`, that `desired` lacks and no other
/// manager owns, or a top-level field `desired` lacks.
fn patched_missing(
    live: &Json,
    fields: &serde_json::Map<String, Json>,
    desired: &Json,
    manager: &str,
) -> bool {
    fields.iter().any(|(k, child)| {
        let Some(name) = k.strip_prefix("f:").filter(|n| *n != "metadata") else {
            return false;
        };
        let Some(want) = desired.get(name) else {
            return true;
        };
        child.as_object().is_some_and(|c| {
            c.keys()
                .filter_map(|e| e.strip_prefix("f:"))
                .any(|e| want.get(e).is_none() && !super::merge::co_owned(live, manager, name, e))
        })
    })
}

/// Whether `map` (fieldsV1) names a field `desired` lacks, inside list
/// items too: a list-map item (`k:{KEY}`) is the desired item whose key
/// fields match (a key field the desired item leaves out, for the server
/// to default, matches any value), a set value (`v:VALUE`) must be in the
/// desired list, an item by position (`i:N`) must exist.
fn owned_missing(map: &serde_json::Map<String, Json>, desired: Option<&Json>) -> bool {
    map.iter().any(|(k, child)| {
        let target = if let Some(name) = k.strip_prefix("f:") {
            desired.and_then(|d| d.get(name))
        } else if let Some(key) = k.strip_prefix("k:") {
            let Ok(Json::Object(key)) = serde_json::from_str::<Json>(key) else {
                return false;
            };
            list_items(desired).find(|item| {
                key.iter().any(|(f, _)| item.get(f).is_some())
                    && key
                        .iter()
                        .all(|(f, v)| item.get(f).is_none_or(|have| have == v))
            })
        } else if let Some(value) = k.strip_prefix("v:") {
            let Ok(value) = serde_json::from_str::<Json>(value) else {
                return false;
            };
            list_items(desired).find(|item| **item == value)
        } else if let Some(at) = k.strip_prefix("i:") {
            let Ok(at) = at.parse::<usize>() else {
                return false;
            };
            list_items(desired).nth(at)
        } else {
            // ".": the item itself.
            return false;
        };
        match target {
            None => true,
            Some(d) => child
                .as_object()
                .is_some_and(|c| !c.is_empty() && owned_missing(c, Some(d))),
        }
    })
}

/// The items of `desired` when it is a list.
fn list_items(desired: Option<&Json>) -> impl Iterator<Item = &Json> {
    desired.and_then(Json::as_array).into_iter().flatten()
}

/// Whether an API error answering a write pinned to a uid means the object
/// is gone or was replaced: 404; 409 (uid mismatch on apply, failed uid
/// precondition on delete); 422 naming `metadata.uid` (immutable) or a
/// failed JSON Patch `test` (finalizer patches only test, so any 422 is
/// one). Such a write is dropped, not an error.
pub fn gone(e: &kube::Error, verb: WriteVerb) -> bool {
    let kube::Error::Api(s) = e else {
        return false;
    };
    match s.code {
        404 | 409 => true,
        422 => {
            matches!(verb, WriteVerb::AddFinalizer | WriteVerb::RemoveFinalizer)
                || s.message.contains("uid")
        }
        _ => false,
    }
}

/// What an apply writes to: the object, or its status subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Object,
    Status,
}

/// What [`Actuator::apply_doc`] decided on, for a caller that learns from
/// it (an entry-wise write's chain).
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The live object the decision was made on (None: none was current).
    pub live: Option<std::sync::Arc<Json>>,
    /// The merge patch sent instead of the apply, if one was.
    pub merge: Option<Json>,
    /// The resourceVersion the write returned.
    pub rv: Option<String>,
}

impl Actuator {
    /// Server-side applies `desired` to `target` (its status when `part` is
    /// Status), unless the live object already agrees. A `pinned` write's
    /// document carries the uid the snapshot saw: an answer meaning the
    /// object is gone drops it. What it decided on goes to `seen`.
    pub(super) async fn apply_doc(
        &self,
        target: &ObjectKey,
        desired: &Json,
        part: Part,
        verb: WriteVerb,
        pinned: bool,
        seen: Option<&mut Seen>,
    ) -> Result<Step, ActuatorError> {
        let mut scratch = Seen::default();
        let seen = seen.unwrap_or(&mut scratch);
        // What is sent, then what the live object is compared with:
        // `desired` as the server stores it.
        let sent = sent_form(target, desired);
        let desired = sent.as_ref().unwrap_or(desired);
        let as_stored = compare_form(target, desired);
        let compared = as_stored.as_ref().unwrap_or(desired);
        let echoes = self.outputs.echoes();
        // While our previous write's echo is on its way the cache is older
        // than the object: no skip decided on it, apply again (a no-op on
        // the server if nothing changed).
        let echo_due = echoes.awaiting(target);
        let now = tokio::time::Instant::now();
        let contests = self.outputs.contests();
        if let Some(held) = self.held_back(target, now) {
            return Ok(held);
        }
        // An object we merge-patched is written only against a current
        // cache: wait (briefly) for our previous write's echo.
        if part == Part::Object && echoes.wait_for_echo(target, ECHO_WAIT_MAX) {
            return Ok(Step::HeldBack(ECHO_RECHECK));
        }
        // Our own last apply of this very body is what is live: nothing to
        // write, and nothing to parse to tell (the echo's reconcile).
        if !echo_due {
            let live_rv = self.outputs.live_version(target);
            if live_rv
                .is_some_and(|rv| contests.unchanged(target, part == Part::Status, &rv, compared))
            {
                self.metrics.skipped_write();
                return Ok(Step::Skipped);
            }
        }
        let live = self.outputs.live(target);
        if part == Part::Object && live.is_none() {
            if let Some(owner) = self.gone_controller(desired) {
                tracing::info!(target = %target, owner_uid = %owner, verb = ?verb,
                    "not creating an object whose controller owner is gone; write dropped");
                self.metrics.dropped_write(verb);
                return Ok(Step::Dropped);
            }
            // Someone deleted what we wrote, soon after our write: a
            // take-back, as a re-creation is for a delete. (A pinned write
            // never creates: nothing to fight over.)
            if !pinned {
                let owner = super::contest::controller_uid(desired);
                if let Some(held) = self.judge_removal(target, owner, now).await {
                    return Ok(held);
                }
            }
        }
        let current = live.filter(|_| !echo_due);
        seen.live = current.clone();
        if let Some(current) = &current {
            let noop = match part {
                Part::Object => {
                    contains(current, compared)
                        && !drops_owned_field(current, desired, &self.field_manager, None)
                }
                // Status applies compare against the live object's status.
                Part::Status => {
                    let null = Json::Null;
                    contains(
                        current.get("status").unwrap_or(&null),
                        compared.get("status").unwrap_or(&null),
                    ) && !drops_owned_field(current, desired, &self.field_manager, Some("status"))
                }
            };
            if noop {
                self.metrics.skipped_write();
                return Ok(Step::Skipped);
            }
            if let Some((verdict, other)) = contests.retaken(
                target,
                current,
                &self.field_manager,
                part == Part::Status,
                now,
            ) {
                match verdict {
                    Verdict::Drift => tracing::info!(
                        target = %target,
                        manager = %other,
                        "field manager {other:?} changed fields we set; repairing the drift"
                    ),
                    Verdict::Contested => tracing::info!(
                        target = %target,
                        manager = %other,
                        "field manager {other:?} changed fields we own; taking them back"
                    ),
                    Verdict::War { backoff, flips } => {
                        self.declare_war(target, &other, backoff, flips, super::Contested::Fields)
                            .await;
                        return Ok(Step::HeldBack(backoff));
                    }
                }
            }
        }
        // Only some entries of a string map differ: send just those.
        let merge = match (part, &current) {
            (Part::Object, Some(live)) => merge_patch_for(live, desired, &self.field_manager),
            _ => None,
        };
        seen.merge = merge.clone();
        contests.sets(target, part == Part::Status, compared);
        let ar = self.discovery.resource(&target.gvk).await?;
        let segments = super::path_segments(target)?;
        let (result, changed_meanwhile) = match merge {
            Some(entries) => {
                tracing::debug!(target = %target, "writing only the changed entries (merge patch)");
                echoes.merged(target);
                let params = self.merge_params();
                self.send(
                    &ar,
                    target,
                    &segments,
                    &params,
                    &Patch::Merge(&entries),
                    part,
                    verb,
                )
                .await
            }
            None => {
                echoes.wake_on_echo(target);
                let params = PatchParams::apply(&self.field_manager).force();
                let sent = self
                    .send(
                        &ar,
                        target,
                        &segments,
                        &params,
                        &Patch::Apply(desired),
                        part,
                        verb,
                    )
                    .await;
                if let (Ok(Some(rv)), _) = &sent {
                    contests.applied(target, part == Part::Status, rv);
                }
                sent
            }
        };
        match result {
            Ok(rv) => {
                seen.rv = rv.clone();
                Ok(Step::Done {
                    changed_meanwhile,
                    rv: rv.map(Into::into),
                })
            }
            Err(e) if pinned && gone(&e, verb) => {
                tracing::info!(target = %target, verb = ?verb, "object gone or replaced; write dropped: {e}");
                self.metrics.dropped_write(verb);
                Ok(Step::Dropped)
            }
            Err(source) => Err(ActuatorError::Api {
                verb: verb_name(verb),
                target: target.to_string(),
                source,
            }),
        }
    }

    /// Writes an entry-wise aggregate's document to `target`: a merge patch
    /// of the changed entries when its chain allows (see
    /// [`super::entries`]), else the whole document through
    /// [`Actuator::apply_doc`], from whose decision the chain restarts.
    pub(super) async fn apply_entries(
        &self,
        target: &ObjectKey,
        write: &EntryWrite,
    ) -> Result<Step, ActuatorError> {
        let chains = self.outputs.chains();
        chains.note(target, write);
        let echoes = self.outputs.echoes();
        if let Some(held) = self.held_back(target, tokio::time::Instant::now()) {
            return Ok(held);
        }
        let cached_rv = self.outputs.live_version(target);
        let decision = chains.decide(target, write, cached_rv.as_deref(), echoes.awaiting(target));
        let (rv, entries) = match decision {
            Decision::Noop => {
                chains.settled(target);
                self.metrics.skipped_write();
                return Ok(Step::Skipped);
            }
            Decision::Whole => {
                let mut seen = Seen::default();
                let step = self
                    .apply_doc(
                        target,
                        &write.doc(),
                        Part::Object,
                        WriteVerb::Apply,
                        false,
                        Some(&mut seen),
                    )
                    .await?;
                let known = match step {
                    Step::Skipped => seen.live.as_deref().and_then(|live| {
                        crate::actuator::outputs::resource_version(live).map(|rv| (live, rv))
                    }),
                    Step::Done {
                        changed_meanwhile: false,
                        ..
                    } if seen.merge.is_some() => seen.live.as_deref().zip(seen.rv.as_deref()),
                    Step::HeldBack(_) => return Ok(step),
                    _ => None,
                };
                chains.restart(
                    target,
                    write,
                    &self.field_manager,
                    known,
                    seen.merge.as_ref(),
                );
                return Ok(step);
            }
            Decision::Patch { rv, entries } => (rv, entries),
        };
        tracing::debug!(target = %target, entries = entries.len(), "writing only the changed entries (merge patch at resourceVersion {rv})");
        let mut body = Map::new();
        body.insert(
            "metadata".into(),
            serde_json::json!({"resourceVersion": rv}),
        );
        body.insert(write.field.clone(), Json::Object(entries.clone()));
        let body = Json::Object(body);
        let ar = self.discovery.resource(&target.gvk).await?;
        let segments = super::path_segments(target)?;
        echoes.merged(target);
        let params = self.merge_params();
        let patch = Patch::Merge(&body);
        let (result, changed_meanwhile) = self
            .send(
                &ar,
                target,
                &segments,
                &params,
                &patch,
                Part::Object,
                WriteVerb::Apply,
            )
            .await;
        match result {
            Ok(rv) => {
                match &rv {
                    Some(rv) if !changed_meanwhile => chains.patched(target, rv, &entries),
                    _ => {
                        chains.settled(target);
                        chains.forget(target);
                    }
                }
                Ok(Step::Done {
                    changed_meanwhile,
                    rv: rv.map(Into::into),
                })
            }
            Err(source) => {
                // A conflict (someone wrote since the chain's version) or
                // any other failure: the next attempt decides on the live
                // object. The changes stay noted.
                chains.forget(target);
                Err(ActuatorError::Api {
                    verb: "apply",
                    target: target.to_string(),
                    source,
                })
            }
        }
    }

    /// The uid of `desired`'s controller owner reference when that owner is
    /// known to be gone: creating the object would leave a child nothing
    /// ever cleans up (a cluster without a garbage collector keeps it
    /// forever; one with it deletes it again).
    fn gone_controller(&self, desired: &Json) -> Option<String> {
        super::contest::controller_uid(desired)
            .filter(|uid| self.known_gone(uid))
            .map(str::to_string)
    }

    /// Judges a deletion of `target` by someone else soon after our write
    /// ([`super::contest::Contests::removed`]): logged, and when it makes a
    /// war, declared, and the step holding the write back.
    async fn judge_removal(
        &self,
        target: &ObjectKey,
        owner: Option<&str>,
        now: tokio::time::Instant,
    ) -> Option<Step> {
        let (verdict, other) = self.outputs.contests().removed(target, owner, now)?;
        match verdict {
            Verdict::Drift => tracing::info!(target = %target,
                "someone deleted what we wrote; creating it again"),
            Verdict::Contested => tracing::info!(target = %target,
                "someone deleted what we wrote soon after our write; creating it again"),
            Verdict::War { backoff, flips } => {
                self.declare_war(target, &other, backoff, flips, super::Contested::Removal)
                    .await;
                return Some(Step::HeldBack(backoff));
            }
        }
        None
    }

    /// A write war holds `target`'s writes back: the step that says for how
    /// long (logged and counted).
    fn held_back(&self, target: &ObjectKey, now: tokio::time::Instant) -> Option<Step> {
        let (left, other) = self.outputs.contests().held_back(target, now)?;
        tracing::debug!(target = %target, manager = %other, "write war: write held back for {left:?}");
        self.metrics.held_back_write();
        Some(Step::HeldBack(left))
    }

    /// A merge patch's parameters: this manager's, as an update.
    fn merge_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        }
    }

    /// Sends one patch of `target` (its status when `part` is Status), its
    /// path built from `segments` ([`super::path_segments`]: a name can
    /// never reach another object or a subresource),
    /// inside the echo bookkeeping, and returns the resourceVersion written
    /// and whether someone else changed the object while it was in flight.
    /// Only the version is decoded from the answer: the object itself is
    /// skipped unparsed (a large summary is hundreds of KB, and the watch
    /// echo brings it to the cache anyway). An accepted write is counted as
    /// `verb` and told to the write-war bookkeeping.
    #[allow(clippy::too_many_arguments)]
    async fn send<P: serde::Serialize + std::fmt::Debug>(
        &self,
        ar: &kube::api::ApiResource,
        target: &ObjectKey,
        segments: &(Option<String>, String),
        params: &PatchParams,
        patch: &Patch<P>,
        part: Part,
        verb: WriteVerb,
    ) -> (Result<Option<String>, kube::Error>, bool) {
        #[derive(serde::Deserialize)]
        struct Written {
            metadata: WrittenMeta,
        }
        #[derive(serde::Deserialize)]
        struct WrittenMeta {
            #[serde(rename = "resourceVersion")]
            resource_version: Option<String>,
        }
        use kube::Resource;
        let (namespace, name) = segments;
        let url = kube::api::DynamicObject::url_path(ar, namespace.as_deref());
        let request = kube::core::Request::new(url);
        let req = match part {
            Part::Object => request.patch(name, params, patch),
            Part::Status => request.patch_subresource("status", name, params, patch),
        };
        let mut req = match req {
            Ok(req) => req,
            Err(e) => return (Err(kube::Error::BuildRequest(e)), false),
        };
        req.extensions_mut().insert(match part {
            Part::Object => "patch",
            Part::Status => "patch_status",
        });
        let echoes = self.outputs.echoes();
        echoes.begin(target);
        let result = self
            .client
            .request::<Written>(req)
            .await
            .map(|w| w.metadata.resource_version);
        let written = result.as_ref().ok().and_then(|rv| rv.as_deref());
        let cached_rv = self.outputs.live_version(target);
        let changed_meanwhile = echoes.applied(target, written, cached_rv.as_deref());
        if let Ok(rv) = &result {
            self.outputs.contests().wrote(target, rv.as_deref());
            self.metrics.wrote(verb);
        }
        (result, changed_meanwhile)
    }

    /// Deletes `target` (with a uid precondition when `uid` is given),
    /// unless it is already gone, going, or replaced.
    pub(super) async fn delete(
        &self,
        target: &ObjectKey,
        uid: Option<&str>,
    ) -> Result<Step, ActuatorError> {
        let Some(live) = self.outputs.live(target) else {
            return Ok(Step::Skipped);
        };
        let live_uid = live.pointer("/metadata/uid").and_then(Json::as_str);
        if uid.is_some() && live_uid.is_some() && uid != live_uid {
            self.metrics.dropped_write(WriteVerb::Delete);
            return Ok(Step::Dropped);
        }
        if live.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(Step::Skipped);
        }
        let ar = self.discovery.resource(&target.gvk).await?;
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        // Someone re-created what we deleted: a take-back, as for an apply.
        let now = tokio::time::Instant::now();
        if let Some(held) = self.held_back(target, now) {
            return Ok(held);
        }
        let contests = self.outputs.contests();
        if let Some((verdict, other)) = contests.recreated(target, &live, &self.field_manager, now)
        {
            match verdict {
                Verdict::Drift => tracing::info!(
                    target = %target,
                    manager = %other,
                    "field manager {other:?} re-created what we deleted; deleting it again"
                ),
                Verdict::Contested => tracing::info!(
                    target = %target,
                    manager = %other,
                    "field manager {other:?} re-created what we deleted soon after; deleting it again"
                ),
                Verdict::War { backoff, flips } => {
                    self.declare_war(target, &other, backoff, flips, super::Contested::Existence)
                        .await;
                    return Ok(Step::HeldBack(backoff));
                }
            }
        }
        let (api, name) = self.api(&ar, target)?;
        // Our delete's watch event is its echo, as for an apply: it may
        // beat the response, and it is never someone else's deletion.
        let echoes = self.outputs.echoes();
        echoes.begin(target);
        let result = api.delete(&name, &params).await.map(|answer| {
            // Gone at once (its watch reports the deletion with no
            // version, held as ""), or still there, being deleted, at a
            // new one.
            answer
                .left()
                .and_then(|obj| obj.metadata.resource_version)
                .unwrap_or_default()
        });
        let cached_rv = self.outputs.live_version(target);
        let written = result.as_ref().ok().map(String::as_str);
        let changed_meanwhile = echoes.applied(target, written, cached_rv.as_deref());
        match result {
            Ok(rv) => {
                self.metrics.wrote(WriteVerb::Delete);
                contests.deleted(target);
                Ok(Step::Done {
                    changed_meanwhile,
                    rv: Some(rv.into()),
                })
            }
            // Already gone: what the guest wanted.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Step::Skipped),
            Err(e) if uid.is_some() && gone(&e, WriteVerb::Delete) => {
                self.metrics.dropped_write(WriteVerb::Delete);
                Ok(Step::Dropped)
            }
            Err(source) => Err(ActuatorError::Api {
                verb: "delete",
                target: target.to_string(),
                source,
            }),
        }
    }
}

/// The contract's name for a write verb, for error messages.
pub(super) fn verb_name(verb: WriteVerb) -> &'static str {
    match verb {
        WriteVerb::Apply => "apply",
        WriteVerb::Update => "update",
        WriteVerb::ApplyStatus => "apply-status",
        WriteVerb::Delete => "delete",
        WriteVerb::AddFinalizer => "add-finalizer",
        WriteVerb::RemoveFinalizer => "remove-finalizer",
        WriteVerb::Event => "event",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_object_with_extra_fields_contains_the_desired_ones() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "uid": "u", "resourceVersion": "9"},
            "data": {"n1": "2", "other": "x"}});
        let cases = [
            (
                json!({"metadata": {"name": "s", "namespace": "ops"}, "data": {"n1": "2"}}),
                true,
            ),
            (
                json!({"metadata": {"name": "s"}, "data": {"n1": "3"}}),
                false,
            ),
            (json!({"data": {"n2": "1"}}), false),
            (json!({"data": {}}), true),
            (json!({"binaryData": {}}), true),
            (json!({"spec": {"list": []}}), true),
            (json!({"spec": {"list": [1]}}), false),
            // An update pinned to another uid is never a no-op.
            (json!({"metadata": {"uid": "other"}}), false),
        ];
        for (desired, want) in cases {
            assert_eq!(contains(&live, &desired), want, "{desired}");
        }
    }

    #[test]
    fn fields_the_server_defaults_inside_list_items_are_no_difference() {
        let live = json!({"spec": {
            "containers": [{"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "args": ["a", "b"]}});
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}]}], "ports": [{"port": 80}]}}),
                true,
            ),
            // Another value inside an item, another length, another order.
            (
                json!({"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}),
                false,
            ),
            (
                json!({"spec": {"ports": [{"port": 80}, {"port": 443}]}}),
                false,
            ),
            (json!({"spec": {"args": ["b", "a"]}}), false),
            (json!({"spec": {"args": ["a"]}}), false),
            (json!({"spec": {"args": ["a", "b"]}}), true),
        ];
        for (desired, want) in cases {
            assert_eq!(contains(&live, &desired), want, "{desired}");
        }
    }

    #[test]
    fn a_field_this_manager_set_inside_a_list_item_and_omits_now_needs_an_apply() {
        let m = "wasmctrl/g";
        let live = json!({"metadata": {"managedFields": [
            {"manager": m, "operation": "Apply", "fieldsV1": {"f:spec": {
                "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:name": {}, "f:image": {},
                    "f:imagePullPolicy": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}},
                "f:finalizers": {"v:\"a\"": {}}}}}
        ]}, "spec": {
            "containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "finalizers": ["a"]}});
        let whole = json!({"spec": {
            "containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80}]}],
            "finalizers": ["a"]}});
        // Everything it set is still set (the port's protocol left to the
        // server's default matches the item's key).
        assert!(!drops_owned_field(&live, &whole, m, None));
        // A field inside a container it no longer sets.
        let mut without_policy = whole.clone();
        without_policy["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("imagePullPolicy");
        assert!(contains(&live, &without_policy));
        assert!(drops_owned_field(&live, &without_policy, m, None));
        // An item it set, gone: a container, a port, a set value.
        let mut renamed = whole.clone();
        renamed["spec"]["containers"][0]["name"] = json!("api");
        assert!(drops_owned_field(&live, &renamed, m, None));
        let mut no_port = whole.clone();
        no_port["spec"]["containers"][0]["ports"] = json!([]);
        assert!(drops_owned_field(&live, &no_port, m, None));
        let mut no_finalizer = whole;
        no_finalizer["spec"]["finalizers"] = json!(["b"]);
        assert!(drops_owned_field(&live, &no_finalizer, m, None));
    }

    #[test]
    fn a_key_this_manager_applied_before_and_omits_now_needs_an_apply() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "wasmctrl/g", "operation": "Apply", "fieldsV1": {"f:data": {"f:n1": {}, "f:n2": {}}}},
            {"manager": "wasmctrl/g", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {"f:used": {}}}},
            {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:data": {"f:x": {}}}}
        ]}, "data": {"n1": "1", "n2": "1", "x": "y"}, "status": {"used": 1}});
        let m = "wasmctrl/g";
        assert!(!drops_owned_field(
            &live,
            &json!({"data": {"n1": "1", "n2": "1"}}),
            m,
            None
        ));
        assert!(drops_owned_field(
            &live,
            &json!({"data": {"n1": "1"}}),
            m,
            None
        ));
        assert!(drops_owned_field(&live, &json!({}), m, None));
        // A manager's Update entry (our merge patches) counts too, outside
        // metadata and for entries no other manager owns.
        assert!(drops_owned_field(
            &live,
            &json!({"data": {"n1": "1", "n2": "1"}}),
            "kubectl",
            None
        ));
        assert!(!drops_owned_field(
            &live,
            &json!({"data": {"x": "y"}}),
            "kubectl",
            None
        ));
        // Status entries count only for status applies.
        assert!(!drops_owned_field(
            &live,
            &json!({"status": {"used": 2}}),
            m,
            Some("status")
        ));
        assert!(drops_owned_field(
            &live,
            &json!({"status": {}}),
            m,
            Some("status")
        ));
    }

    #[test]
    fn only_answers_about_the_object_itself_mean_it_is_gone() {
        let api = |code: u16, message: &str| {
            kube::Error::Api(
                kube::core::Status::failure(message, "")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert!(gone(&api(404, "not found"), WriteVerb::ApplyStatus));
        assert!(gone(&api(409, "uid mismatch"), WriteVerb::Update));
        assert!(gone(
            &api(422, "metadata.uid: field is immutable"),
            WriteVerb::Update
        ));
        assert!(gone(&api(422, "test failed"), WriteVerb::RemoveFinalizer));
        assert!(!gone(
            &api(422, "spec.replicas: Invalid value"),
            WriteVerb::Update
        ));
        assert!(!gone(&api(500, "boom"), WriteVerb::Update));
        assert!(!gone(&api(403, "forbidden"), WriteVerb::Delete));
    }
}
