//! What a DELETE's propagation policy does to the object it deletes: the
//! `orphan` and `foregroundDeletion` finalizers, chosen as the generic
//! registry's `deletionFinalizersForGarbageCollection`
//! (k8s.io/apiserver/pkg/registry/generic/registry/store.go) does. It
//! decides and edits one object's finalizers; it never writes to the store
//! and never looks at dependents (that is the collector's work, see `gc`).

use serde_json::{json, Value};

use crate::status::{ApiError, Result};

/// The finalizer that makes the collector orphan the dependents
/// (`metav1.FinalizerOrphanDependents`).
pub(crate) const ORPHAN: &str = "orphan";
/// The finalizer that holds an owner until its blocking dependents are
/// gone (`metav1.FinalizerDeleteDependents`).
pub(crate) const FOREGROUND: &str = "foregroundDeletion";

/// `metav1.DeletionPropagation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Dependents lose their ownerReference to the owner, then it goes.
    Orphan,
    /// The owner goes at once; the collector deletes dependents afterwards.
    Background,
    /// The owner stays until its blocking dependents are gone.
    Foreground,
}

/// The policy DeleteOptions ask for (`propagationPolicy` in the body or the
/// query, or the deprecated `orphanDependents`); None when unspecified.
///
/// # Errors
///
/// The 422s of `ValidateDeleteOptions`: an unknown policy, or both fields set.
pub(crate) fn requested(opts: &Value, query: Option<&str>) -> Result<Option<Propagation>> {
    let policy = opts
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or(query);
    let orphan = opts.get("orphanDependents").and_then(Value::as_bool);
    let parsed = match policy {
        None => None,
        Some("Orphan") => Some(Propagation::Orphan),
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some(p) => {
            return Err(ApiError::Unprocessable(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )))
        }
    };
    match (orphan, parsed, policy) {
        // errors.NewInvalid names the kind as GroupKind.String() does
        (Some(_), Some(_), Some(p)) => Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions.meta.k8s.io",
            "",
            vec![(
                "propagationPolicy".into(),
                format!(
                    "Invalid value: {}: orphanDependents and deletionPropagation cannot be both set",
                    json!(p)
                ),
            )],
        )),
        (Some(true), _, _) => Ok(Some(Propagation::Orphan)),
        (Some(false), _, _) => Ok(Some(Propagation::Background)),
        (None, p, _) => Ok(p),
    }
}

/// Sets `obj`'s finalizers for deleting it with `requested`: an explicit
/// policy replaces any `orphan`/`foregroundDeletion` finalizer; without one,
/// a finalizer already there decides, else the default (Background for
/// every kind served here). Other finalizers keep their order. True if the
/// finalizers changed.
pub(crate) fn apply(obj: &mut Value, requested: Option<Propagation>) -> bool {
    let old: Vec<String> = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let has = |f: &str| old.iter().any(|x| x == f);
    let policy = requested.unwrap_or(if has(ORPHAN) {
        Propagation::Orphan
    } else if has(FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    });
    let mut new: Vec<String> = old
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    match policy {
        Propagation::Orphan => new.push(ORPHAN.into()),
        Propagation::Foreground => new.push(FOREGROUND.into()),
        Propagation::Background => {}
    }
    let same_set = {
        let (mut a, mut b) = (old.clone(), new.clone());
        a.sort();
        a.dedup();
        b.sort();
        b.dedup();
        a == b
    };
    if same_set {
        return false;
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if new.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(new));
        }
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn obj(finalizers: Value) -> Value {
        json!({"metadata": {"name": "o", "finalizers": finalizers}})
    }

    #[test]
    fn explicit_policy_replaces_the_gc_finalizers_and_keeps_others() {
        let mut o = obj(json!(["example.com/x", "orphan"]));
        assert!(apply(&mut o, Some(Propagation::Foreground)));
        assert_eq!(
            o["metadata"]["finalizers"],
            json!(["example.com/x", "foregroundDeletion"])
        );
        assert!(apply(&mut o, Some(Propagation::Background)));
        assert_eq!(o["metadata"]["finalizers"], json!(["example.com/x"]));
    }

    #[test]
    fn without_a_policy_an_existing_finalizer_decides() {
        let mut o = obj(json!(["orphan"]));
        assert!(!apply(&mut o, None));
        let mut o = obj(json!([]));
        assert!(!apply(&mut o, None));
        assert!(apply(&mut o, Some(Propagation::Orphan)));
        assert_eq!(o["metadata"]["finalizers"], json!(["orphan"]));
    }

    #[test]
    fn delete_options_are_validated_like_the_real_server() {
        let q = requested(&json!({"orphanDependents": true}), None).unwrap();
        assert_eq!(q, Some(Propagation::Orphan));
        let both = json!({"orphanDependents": false, "propagationPolicy": "Foreground"});
        let e = requested(&both, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set"
        );
        assert!(requested(&json!({}), Some("Sideways")).is_err());
        assert_eq!(requested(&json!({}), None).unwrap(), None);
    }
}
