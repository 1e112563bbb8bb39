//! The object writes: server-side apply (create-or-update, update-only,
//! status subresource), or the merge patch standing in for it, and delete.
//! Owns the decision to skip a write (on [`crate::compare`]'s no-op tests),
//! telling the echo and write-war bookkeeping of each write, and [`gone`].
//! It never creates through a pinned write and never retries in line.
//!
//! # Rules
//! - Each write is skipped when the cached live object already agrees
//!   (never while an echo of ours is due: the cache is then older than the
//!   object; then only when our last write, answered, was an apply of the
//!   very same document), and each pinned write is classified as done,
//!   skipped or dropped. A delete of the object our last delete removed,
//!   still in a cache behind it, is skipped.
//! - [`gone`] says which API answers mean the object a pinned write aimed
//!   at no longer exists as the guest saw it (404, 409 uid mismatch or
//!   failed precondition, 422 on `metadata.uid`, any 422 to a finalizer
//!   patch).
//! - A pinned write never creates: the uid travels in the document (apply)
//!   or the preconditions (delete), and the API server refuses the rest.
//! - With [`Actuator::pin_versions`], an apply (or its merge patch) of an
//!   object read carries the resourceVersion it was decided on; the 409 a
//!   changed object answers ([`version_conflict`]) is an error (the key
//!   requeued, counted as `conflict`), never a dropped write.
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

use super::error::{path_segments, ActuatorError};
use super::execute::Actuator;
use super::step::{Contested, Part, Step};
use crate::compare::{
    compare_form, contains, controller_uid, drops_owned_field, merge_patch_for, resource_version,
    sent_form,
};
use crate::guard::{Permit, Verdict};
use crate::guest::{EntryWrite, ObjectKey};
use crate::metrics::WriteVerb;
use crate::outputs::Decision;

/// How long a write waits for the echo of our previous write to an object
/// we merge-patched before going out as a full apply anyway.
const ECHO_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);
/// When such a waiting write is looked at again if no echo wakes it first.
const ECHO_RECHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether an API error answering a write pinned to a uid means the object
/// is gone or was replaced: 404; 409 (uid mismatch on apply, failed uid
/// precondition on delete; a write that also carried a resourceVersion is
/// judged by `version_conflict` first); 422 naming `metadata.uid`
/// (immutable) or a failed JSON Patch `test` (finalizer patches only test,
/// so any 422 is one). Such a write is dropped, not an error.
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

/// The optimistic-lock message of a 409 (apimachinery's
/// `OptimisticLockErrorMsg`): the resourceVersion a write carried is no
/// longer the object's.
const OPTIMISTIC_LOCK: &str = "the object has been modified";

/// Whether `e` refused a write pinned to a resourceVersion because the
/// object changed since (not because it is gone or replaced): the write
/// was decided on a stale view and the key must be reconciled again.
pub fn version_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.message.contains(OPTIMISTIC_LOCK))
}

/// `doc` with `metadata.resourceVersion` set to `rv` (a copy).
fn pinned_to(doc: &Json, rv: &str) -> Json {
    let mut doc = doc.clone();
    if let Some(obj) = doc.as_object_mut() {
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Json::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Json::String(rv.to_string()));
        }
    }
    doc
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
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn apply_doc(
        &self,
        permit: &Permit<'_>,
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
        let gvk = &target.gvk;
        let sent = sent_form(&gvk.group, &gvk.version, &gvk.kind, desired);
        let desired = sent.as_ref().unwrap_or(desired);
        let as_stored = compare_form(&gvk.group, &gvk.version, &gvk.kind, desired);
        let compared = as_stored.as_ref().unwrap_or(desired);
        let echoes = self.outputs.echoes();
        // While our previous write's echo is on its way the cache is older
        // than the object: no skip decided on it, apply again (a no-op on
        // the server if nothing changed).
        let echo_due = echoes.awaiting(target);
        let now = tokio::time::Instant::now();
        let contests = permit.contests();
        if let Some(held) = self.held_back(permit, target, now) {
            return Ok(held);
        }
        // An object we merge-patched is written only against a current
        // cache: wait (briefly) for our previous write's echo.
        if part == Part::Object && echoes.wait_for_echo(target, ECHO_WAIT_MAX) {
            return Ok(Step::HeldBack(ECHO_RECHECK));
        }
        // Our own last apply of this very body is what is live: nothing to
        // write, and nothing to parse to tell (the echo's reconcile). While
        // its echo is on its way the cache is behind it (it may not even
        // hold the object we just created): the server's answer tells.
        if echo_due {
            if contests.answered(target, part == Part::Status, compared) {
                self.metrics.skipped_write();
                return Ok(Step::Skipped);
            }
        } else {
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
                let owner = controller_uid(desired);
                if let Some(held) = self.judge_removal(permit, target, owner, now).await {
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
                        self.declare_war(permit, target, &other, backoff, flips, Contested::Fields)
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
        // The version this write was decided on: the cache's, or, while
        // our last write's echo is due, what that write returned. (An
        // object not read yet has none: a create is not pinned.)
        let pin = if !self.pin_versions {
            None
        } else if echo_due {
            echoes.last_written(target)
        } else {
            current
                .as_deref()
                .and_then(resource_version)
                .map(str::to_string)
        };
        seen.merge = merge.clone();
        contests.sets(target, part == Part::Status, compared);
        let ar = self.discovery.resource(&target.gvk).await?;
        let segments = path_segments(target)?;
        let (result, changed_meanwhile) = match merge {
            Some(entries) => {
                tracing::debug!(target = %target, "writing only the changed entries (merge patch)");
                echoes.merged(target);
                let params = self.merge_params();
                let entries = match &pin {
                    Some(rv) => pinned_to(&entries, rv),
                    None => entries,
                };
                self.send(
                    permit,
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
                let pinned_doc = pin.as_deref().map(|rv| pinned_to(desired, rv));
                let sent = self
                    .send(
                        permit,
                        &ar,
                        target,
                        &segments,
                        &params,
                        &Patch::Apply(pinned_doc.as_ref().unwrap_or(desired)),
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
            // Refused on the version it carried (not on the uid): the
            // object changed since it was read, and is still there.
            Err(source) if pin.is_some() && version_conflict(&source) => {
                tracing::info!(target = %target, verb = ?verb, resource_version = ?pin,
                    "the object changed since this replica read it; write refused, key requeued");
                Err(ActuatorError::Api {
                    verb: verb_name(verb),
                    target: target.to_string(),
                    source,
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
    /// [`crate::outputs::Chains`]), else the whole document through
    /// [`Actuator::apply_doc`], from whose decision the chain restarts.
    pub(super) async fn apply_entries(
        &self,
        permit: &Permit<'_>,
        target: &ObjectKey,
        write: &EntryWrite,
    ) -> Result<Step, ActuatorError> {
        let chains = self.outputs.chains();
        chains.note(target, write);
        let echoes = self.outputs.echoes();
        if let Some(held) = self.held_back(permit, target, tokio::time::Instant::now()) {
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
                        permit,
                        target,
                        &write.doc(),
                        Part::Object,
                        WriteVerb::Apply,
                        false,
                        Some(&mut seen),
                    )
                    .await?;
                let known = match step {
                    Step::Skipped => seen
                        .live
                        .as_deref()
                        .and_then(|live| resource_version(live).map(|rv| (live, rv))),
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
        let segments = path_segments(target)?;
        echoes.merged(target);
        let params = self.merge_params();
        let patch = Patch::Merge(&body);
        let (result, changed_meanwhile) = self
            .send(
                permit,
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
        controller_uid(desired)
            .filter(|uid| self.known_gone(uid))
            .map(str::to_string)
    }

    /// Judges a deletion of `target` by someone else soon after our write
    /// ([`crate::guard::Contests::removed`]): logged, and when it makes a
    /// war, declared, and the step holding the write back.
    async fn judge_removal(
        &self,
        permit: &Permit<'_>,
        target: &ObjectKey,
        owner: Option<&str>,
        now: tokio::time::Instant,
    ) -> Option<Step> {
        let (verdict, other) = permit.contests().removed(target, owner, now)?;
        match verdict {
            Verdict::Drift => tracing::info!(target = %target,
                "someone deleted what we wrote; creating it again"),
            Verdict::Contested => tracing::info!(target = %target,
                "someone deleted what we wrote soon after our write; creating it again"),
            Verdict::War { backoff, flips } => {
                self.declare_war(permit, target, &other, backoff, flips, Contested::Removal)
                    .await;
                return Some(Step::HeldBack(backoff));
            }
        }
        None
    }

    /// A write war holds `target`'s writes back: the step that says for how
    /// long (logged and counted).
    fn held_back(
        &self,
        permit: &Permit<'_>,
        target: &ObjectKey,
        now: tokio::time::Instant,
    ) -> Option<Step> {
        let (left, other) = permit.contests().held_back(target, now)?;
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
    /// path built from `segments` ([`path_segments`]: a name can
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
        permit: &Permit<'_>,
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
            uid: Option<String>,
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
        let answer = self.client.request::<Written>(req).await;
        let now = tokio::time::Instant::now();
        let written = answer
            .as_ref()
            .ok()
            .and_then(|w| w.metadata.resource_version.as_deref());
        let cached_rv = self.outputs.live_version(target);
        let changed_meanwhile = echoes.applied(target, written, cached_rv.as_deref());
        if let Ok(w) = &answer {
            let (uid, rv) = (w.metadata.uid.as_deref(), written);
            permit.contests().wrote(target, uid, rv, now);
            self.metrics.wrote(verb);
        }
        let result = answer.map(|w| w.metadata.resource_version);
        (result, changed_meanwhile)
    }

    /// Deletes `target` (with a uid precondition when `uid` is given),
    /// unless it is already gone, going, or replaced.
    pub(super) async fn delete(
        &self,
        permit: &Permit<'_>,
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
        // The object our last delete removed: the cache is behind our
        // delete (its echo is on its way), nothing is left to delete.
        if permit.contests().ours_deleted(target, live_uid) {
            tracing::debug!(target = %target, "the cache still holds what we deleted; nothing to delete");
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
        if let Some(held) = self.held_back(permit, target, now) {
            return Ok(held);
        }
        let contests = permit.contests();
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
                    self.declare_war(permit, target, &other, backoff, flips, Contested::Existence)
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
        let mut deleted_uid = None;
        let result = api.delete(&name, &params).await.map(|answer| {
            // The uid the server deleted: the object's, or the status
            // details' (a Status answers an object deleted at once).
            let (object, status) = (answer.as_ref().left(), answer.as_ref().right());
            deleted_uid = object
                .and_then(|o| o.metadata.uid.clone())
                .or_else(|| {
                    status
                        .and_then(|s| s.details.as_ref())
                        .map(|d| d.uid.clone())
                })
                .filter(|uid| !uid.is_empty());
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
                // The server named none: the one the precondition pinned,
                // else the one the delete was decided on (and its version).
                let uid = deleted_uid.as_deref().or(uid).or(live_uid);
                let version = Some(rv.as_str())
                    .filter(|rv| !rv.is_empty())
                    .or_else(|| resource_version(&live));
                contests.deleted(target, uid, version, tokio::time::Instant::now());
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
        WriteVerb::Label => "label",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_version_conflict_is_told_apart_from_a_uid_mismatch() {
        let api = |code: u16, message: &str| {
            kube::Error::Api(
                kube::core::Status::failure(message, "Conflict")
                    .with_code(code)
                    .boxed(),
            )
        };
        let stale = api(
            409,
            "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again",
        );
        assert!(version_conflict(&stale));
        assert!(!version_conflict(&api(409, "uid mismatch")));
        assert!(!version_conflict(&api(500, "the object has been modified")));
    }

    #[test]
    fn a_pinned_document_carries_the_version_and_keeps_the_rest() {
        let doc = serde_json::json!({"metadata": {"name": "c", "uid": "u"}, "data": {"k": "v"}});
        let pinned = pinned_to(&doc, "42");
        assert_eq!(
            pinned,
            serde_json::json!({"metadata": {"name": "c", "uid": "u", "resourceVersion": "42"}, "data": {"k": "v"}})
        );
        assert_eq!(
            pinned_to(&serde_json::json!({"data": {}}), "7"),
            serde_json::json!({"metadata": {"resourceVersion": "7"}, "data": {}})
        );
    }
}
