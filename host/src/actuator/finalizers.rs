//! Finalizer writes: adding and removing one entry of `metadata.finalizers`
//! with a JSON Patch that can neither create the object nor touch anyone
//! else's entry. Owns the patches ([`add_patch`], [`remove_patch`]) and
//! reading the current list from the caches, and asking the server where
//! an object that left its watch stands ([`Actuator::on_server`]). It never
//! decides *when* a finalizer is added or removed (the controller adds a
//! watch's declared finalizer; a plan removes it, and the controller
//! releases it from an object that left the watch's selectors).
//!
//! # The patches
//! As in kube-runtime's `finalizer.rs`, every one first `test`s
//! `metadata.uid` (the object as the guest saw it), then the list as the
//! cache saw it (an add) or the exact entry at its index (a remove), so a
//! concurrent change fails the patch (422) instead of being overwritten,
//! and a patch of a missing object is a 404. Both end as a dropped write
//! and a re-reconcile; so does a write to an object no cache holds with
//! that uid, or an add to an object already being deleted (the API server
//! forbids new finalizers there).

use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{json, Value as Json};

use super::error::ActuatorError;
use super::execute::Actuator;
use super::step::Step;
use super::writes::{gone, verb_name};
use crate::guest::ObjectKey;
use crate::metrics::WriteVerb;

/// An object's identity and finalizers, as a cache holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// metadata.uid.
    pub uid: String,
    /// metadata.finalizers, in order.
    pub finalizers: Vec<String>,
    /// Whether metadata.deletionTimestamp is set.
    pub deleting: bool,
}

/// The JSON Patch adding `finalizer` to an object with uid `uid` whose list
/// is `current`: None when it is already there.
pub fn add_patch(uid: &str, current: &[String], finalizer: &str) -> Option<Json> {
    if current.iter().any(|f| f == finalizer) {
        return None;
    }
    let uid_test = json!({"op": "test", "path": "/metadata/uid", "value": uid});
    Some(if current.is_empty() {
        json!([
            uid_test,
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ])
    } else {
        // The API server does not deduplicate finalizers: pin the whole
        // list, so a concurrent add fails rather than doubling an entry.
        json!([
            uid_test,
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ])
    })
}

/// The JSON Patch removing `finalizer` from an object with uid `uid` whose
/// list is `current`: None when it is not there.
pub fn remove_patch(uid: &str, current: &[String], finalizer: &str) -> Option<Json> {
    let at = current.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{at}");
    Some(json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
}

impl Actuator {
    /// The object's uid and finalizers: from a watched cache of its kind,
    /// else from the outputs cache.
    pub(super) fn current(&self, target: &ObjectKey) -> Option<Current> {
        let ns = target.namespace.as_deref().unwrap_or("");
        let watched = self
            .watched
            .iter()
            .filter(|w| w.gvk.group == target.gvk.group && w.gvk.kind == target.gvk.kind)
            .find_map(|w| w.store.get(ns, &target.name));
        if let Some(o) = watched {
            return Some(Current {
                uid: o.uid.to_string(),
                finalizers: o.finalizers.iter().map(|f| f.to_string()).collect(),
                deleting: o.deletion_timestamp.is_some(),
            });
        }
        let live = self.outputs.live(target)?;
        Some(Current {
            uid: live.pointer("/metadata/uid")?.as_str()?.to_string(),
            finalizers: live
                .pointer("/metadata/finalizers")
                .and_then(Json::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(Json::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            deleting: live.pointer("/metadata/deletionTimestamp").is_some(),
        })
    }

    /// Adds (`add`) or removes `finalizer` on `target`, pinned to `uid`.
    pub(super) async fn finalizer(
        &self,
        target: &ObjectKey,
        uid: &str,
        finalizer: &str,
        add: bool,
    ) -> Result<Step, ActuatorError> {
        let verb = if add {
            WriteVerb::AddFinalizer
        } else {
            WriteVerb::RemoveFinalizer
        };
        let dropped = || {
            self.metrics.dropped_write(verb);
            Ok(Step::Dropped)
        };
        // Not cached, or cached as a namesake: the object the guest saw is
        // gone (or the cache is behind, and its event will re-enqueue).
        let Some(current) = self.current(target).filter(|c| c.uid == uid) else {
            return dropped();
        };
        let patch = if add {
            if current.deleting && !current.finalizers.iter().any(|f| f == finalizer) {
                // The API server forbids new finalizers on a deleting object.
                return dropped();
            }
            add_patch(uid, &current.finalizers, finalizer)
        } else {
            remove_patch(uid, &current.finalizers, finalizer)
        };
        let Some(patch) = patch else {
            self.metrics.skipped_write();
            return Ok(Step::Skipped);
        };
        self.send_finalizer_patch(target, uid, finalizer, verb, patch)
            .await
    }

    /// Sends a finalizer `patch` (pinned to `uid`) as `verb`: counted when
    /// written, dropped (and counted) when the object is gone, replaced or
    /// changed meanwhile.
    async fn send_finalizer_patch(
        &self,
        target: &ObjectKey,
        uid: &str,
        finalizer: &str,
        verb: WriteVerb,
        patch: Json,
    ) -> Result<Step, ActuatorError> {
        let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| {
            ActuatorError::Internal(format!("finalizer patch does not serialize: {e}"))
        })?;
        let ar = self.discovery.resource(&target.gvk).await?;
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let (api, name) = self.api(&ar, target)?;
        let result = api.patch(&name, &params, &Patch::<()>::Json(patch)).await;
        match result {
            Ok(written) => {
                self.metrics.wrote(verb);
                Ok(Step::Done {
                    changed_meanwhile: false,
                    rv: written.metadata.resource_version.map(Into::into),
                })
            }
            Err(e) if gone(&e, verb) => {
                if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                    self.bury(uid);
                }
                tracing::info!(target = %target, finalizer, "finalizer patch refused (object gone, replaced or changed meanwhile); dropped: {e}");
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

    /// Sets `label` to `value` on `target` (a merge patch of that one
    /// label, unpinned: the value is a function of the object's key, so a
    /// namesake gets the very label it needs too). A missing object is a
    /// dropped write (counted), not an error.
    pub(crate) async fn label(
        &self,
        target: &ObjectKey,
        label: &str,
        value: &str,
    ) -> Result<Step, ActuatorError> {
        let verb = WriteVerb::Label;
        let ar = self.discovery.resource(&target.gvk).await?;
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        let (api, name) = self.api(&ar, target)?;
        let patch = serde_json::json!({"metadata": {"labels": {label: value}}});
        match api.patch(&name, &params, &Patch::Merge(&patch)).await {
            Ok(written) => {
                self.metrics.wrote(verb);
                Ok(Step::Done {
                    changed_meanwhile: false,
                    rv: written.metadata.resource_version.map(Into::into),
                })
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tracing::debug!(target = %target, "not labelled: the object is gone");
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

    /// Where `target`, an object of a watch with selectors
    /// (`label_selector`, `field_selector`) that its cache no longer holds,
    /// stands on the server: missing, still selected (the cache is behind:
    /// its event comes), or there but out of the selectors. The API server
    /// decides all three (two lists by name: the object, then the object
    /// under the selectors), so only `list` is needed — the verb the watch
    /// already has — and a cache behind the server never makes a selected
    /// object look unselected.
    pub async fn on_server(
        &self,
        target: &ObjectKey,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<OnServer, ActuatorError> {
        let ar = self.discovery.resource(&target.gvk).await?;
        let (api, name) = self.api(&ar, target)?;
        let list_failed = |source| ActuatorError::Api {
            verb: "list",
            target: target.to_string(),
            source,
        };
        let by_name = format!("metadata.name={name}");
        let found = api
            .list(&ListParams::default().fields(&by_name))
            .await
            .map_err(list_failed)?;
        let Some(live) = found.items.into_iter().next() else {
            return Ok(OnServer::Missing);
        };
        let fields = match field_selector {
            Some(f) => format!("{by_name},{f}"),
            None => by_name,
        };
        let mut selected = ListParams::default().fields(&fields);
        if let Some(labels) = label_selector {
            selected = selected.labels(labels);
        }
        if !api
            .list(&selected)
            .await
            .map_err(list_failed)?
            .items
            .is_empty()
        {
            return Ok(OnServer::Selected);
        }
        let current = Current {
            uid: live.metadata.uid.clone().unwrap_or_default(),
            finalizers: live.metadata.finalizers.clone().unwrap_or_default(),
            deleting: live.metadata.deletion_timestamp.is_some(),
        };
        // A DynamicObject always serializes (a map of JSON values).
        let object = serde_json::to_value(&live).unwrap_or_default();
        Ok(OnServer::Unselected { current, object })
    }

    /// Removes `finalizer` from `target`, an object that left its watch's
    /// selectors and stands on the server as `live` says: pinned to its uid
    /// and to the exact entry, so a concurrent change drops the write
    /// (counted) instead of touching anyone else's entry. Returns whether
    /// it was removed; false, writing nothing, when `live` lacks it.
    pub async fn release_unselected(
        &self,
        target: &ObjectKey,
        live: &Current,
        finalizer: &str,
    ) -> Result<bool, ActuatorError> {
        let Some(patch) = remove_patch(&live.uid, &live.finalizers, finalizer) else {
            return Ok(false);
        };
        let step = self
            .send_finalizer_patch(
                target,
                &live.uid,
                finalizer,
                WriteVerb::RemoveFinalizer,
                patch,
            )
            .await?;
        Ok(matches!(step, Step::Done { .. }))
    }
}

/// Where an object its watch's cache no longer holds stands on the server
/// (see [`Actuator::on_server`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnServer {
    /// The server has no object of that name.
    Missing,
    /// It matches the watch's selectors: the cache is behind.
    Selected,
    /// It exists but matches the watch's selectors no more.
    Unselected {
        /// Its identity and finalizers.
        current: Current,
        /// The object itself, as the list by name served it.
        object: Json,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_add_pins_the_uid_and_the_list_it_extends() {
        let p = add_patch("u1", &[], "example.com/x").unwrap();
        assert_eq!(
            p[0],
            json!({"op": "test", "path": "/metadata/uid", "value": "u1"})
        );
        assert_eq!(p[1]["value"], Json::Null);
        assert_eq!(p[2]["value"], json!(["example.com/x"]));
        let p = add_patch("u1", &list(&["other/a"]), "example.com/x").unwrap();
        assert_eq!(p[1]["value"], json!(["other/a"]));
        assert_eq!(p[2]["path"], "/metadata/finalizers/-");
        assert!(add_patch("u1", &list(&["example.com/x"]), "example.com/x").is_none());
    }

    #[test]
    fn a_remove_pins_the_exact_entry_and_never_touches_another() {
        let p = remove_patch("u1", &list(&["other/a", "example.com/x"]), "example.com/x").unwrap();
        assert_eq!(
            p,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/finalizers/1", "value": "example.com/x"},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ])
        );
        assert!(remove_patch("u1", &list(&["other/a"]), "example.com/x").is_none());
    }
}
