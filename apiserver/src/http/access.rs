//! "What may I do, and who am I": `SelfSubjectAccessReview`
//! (`authorization.k8s.io/v1`, what `kubectl auth can-i` posts) and
//! `SelfSubjectReview` (`authentication.k8s.io/v1`, `kubectl auth whoami`),
//! answered from the caller's own token and rules.
//!
//! Owns decoding the review, asking [`User::allows`] (and the fault
//! injector's denied verbs) and shaping the answer like the real server:
//! `201 Created` with the spec echoed and a `status`. Any authenticated
//! user may ask about themselves (the real `system:basic-user` role). It
//! never stores a review and never answers for another user.

use serde_json::{json, Value};

use super::auth::User;
use super::faults::Faults;
use super::status::{ApiError, Result};

/// Answers a `SelfSubjectAccessReview` body for `user`.
pub(crate) fn access_review(user: &User, faults: &Faults, review: &Value) -> Result<Value> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (allowed, reason) = if let Some(attrs) = spec.get("resourceAttributes") {
        let verb = text(attrs, "verb");
        let group = text(attrs, "group");
        let resource = text(attrs, "resource");
        let sub = text(attrs, "subresource");
        let namespace = text(attrs, "namespace");
        let name = text(attrs, "name");
        if verb.is_empty() || resource.is_empty() {
            return Err(invalid(
                "spec.resourceAttributes",
                "verb and resource are required",
            ));
        }
        let full = if sub.is_empty() {
            resource.clone()
        } else {
            format!("{resource}/{sub}")
        };
        let allowed = !faults.is_denied(&verb)
            && user.allows(
                &verb,
                &group,
                &full,
                Some(namespace.as_str()).filter(|n| !n.is_empty()),
                Some(name.as_str()).filter(|n| !n.is_empty()),
            );
        let reason = if allowed {
            format!(
                "RBAC: allowed by the embedded API server's rules for User \"{}\"",
                user.name
            )
        } else {
            String::new()
        };
        (allowed, reason)
    } else if let Some(attrs) = spec.get("nonResourceAttributes") {
        // Discovery, version and health endpoints are open to every
        // authenticated user, for reading (system:discovery).
        let allowed = text(attrs, "verb") == "get" || user.admin;
        (allowed, String::new())
    } else {
        return Err(invalid(
            "spec",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    Ok(json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    }))
}

/// Answers a `SelfSubjectReview` for `user`.
pub(crate) fn self_review(user: &User) -> Value {
    let mut groups = vec!["system:authenticated"];
    if user.admin {
        groups.insert(0, "system:masters");
    }
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": {"username": user.name, "groups": groups}},
    })
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Unprocessable(format!(
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: {field}: Invalid value: {message}"
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::http::auth::Rule;
    use crate::storage::store::Store;
    use std::sync::Arc;

    fn ask(user: &User, faults: &Faults, attrs: Value) -> bool {
        let body = json!({"spec": {"resourceAttributes": attrs}});
        access_review(user, faults, &body).unwrap()["status"]["allowed"]
            .as_bool()
            .unwrap()
    }

    #[test]
    fn reviews_answer_from_the_callers_rules_and_scope() {
        let faults = Faults::new(Arc::new(Store::new(10)));
        let user = User::with_rules(
            "sa",
            vec![
                Rule::new(&["list", "watch"], &["pods"]),
                Rule::new(&["patch"], &["configmaps"])
                    .in_namespace("host")
                    .named(&["gpu-summary"]),
            ],
        );
        assert!(ask(
            &user,
            &faults,
            json!({"verb": "watch", "resource": "pods"})
        ));
        assert!(!ask(
            &user,
            &faults,
            json!({"verb": "delete", "resource": "pods", "namespace": "a"})
        ));
        assert!(ask(
            &user,
            &faults,
            json!({"verb": "patch", "resource": "configmaps", "namespace": "host", "name": "gpu-summary"})
        ));
        assert!(!ask(
            &user,
            &faults,
            json!({"verb": "patch", "resource": "configmaps", "namespace": "other", "name": "gpu-summary"})
        ));
        // A verb the fault injector denies is denied here too.
        faults.deny_verb("watch");
        assert!(!ask(
            &user,
            &faults,
            json!({"verb": "watch", "resource": "pods"})
        ));
    }

    #[test]
    fn malformed_reviews_are_rejected_with_the_field() {
        let faults = Faults::new(Arc::new(Store::new(10)));
        let user = User::admin("admin");
        let err = access_review(&user, &faults, &json!({"spec": {}})).unwrap_err();
        assert!(err.to_string().contains("spec"), "{err}");
        let err = access_review(
            &user,
            &faults,
            &json!({"spec": {"resourceAttributes": {"verb": "get"}}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("resource"), "{err}");
    }

    #[test]
    fn self_review_names_the_user() {
        let v = self_review(&User::with_rules("sa", vec![]));
        assert_eq!(v["status"]["userInfo"]["username"], "sa");
    }
}
