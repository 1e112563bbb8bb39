//! "What may I do, and who am I": `SelfSubjectAccessReview`
//! (`authorization.k8s.io/v1`, what `kubectl auth can-i` posts) and
//! `SelfSubjectReview` (`authentication.k8s.io/v1`, `kubectl auth whoami`),
//! answered from the caller's own token and rules; the other reviews
//! (`TokenReview`, `SubjectAccessReview`, …) get a minimal honest answer.
//!
//! Owns decoding the review, asking [`User::allows`] (and the fault
//! injector's denied verbs) and shaping the answer like the real server:
//! `201 Created` with the spec echoed and a `status`. Any authenticated
//! user may ask about themselves (the real `system:basic-user` role). It
//! never stores a review and never answers for another user.

use serde_json::{json, Value};

use super::faults::Faults;
use crate::auth::{Tokens, User};
use crate::status::{ApiError, Result};

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

/// Answers a create of another review kind the real server serves
/// (`TokenReview`, `SubjectAccessReview`, `LocalSubjectAccessReview`,
/// `SelfSubjectRulesReview`), shaped like its answer: the body echoed with
/// a `status`. A token review looks the token up; an access review is
/// evaluated only when it asks about the caller (nothing here knows other
/// users' rules, so it says so in `evaluationError`); a rules review lists
/// no rules and is `incomplete`.
pub(crate) fn other_review(
    kind: &str,
    user: &User,
    faults: &Faults,
    tokens: &Tokens,
    body: &Value,
) -> Result<Value> {
    let mut out = body.clone();
    if !out.is_object() {
        out = json!({});
    }
    let spec = out.get("spec").cloned().unwrap_or(Value::Null);
    let status = match kind {
        "TokenReview" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            match tokens.authenticate(token) {
                Some(u) => json!({"authenticated": true,
                    "user": {"username": u.name, "groups": ["system:authenticated"]}}),
                None => json!({"user": {}, "error": "invalid bearer token"}),
            }
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let about = spec.get("user").and_then(Value::as_str).unwrap_or("");
            if about == user.name {
                access_review(user, faults, &out)?["status"].clone()
            } else {
                json!({"allowed": false, "evaluationError":
                    "the embedded API server evaluates access reviews only for the requesting user"})
            }
        }
        _ => json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true,
            "evaluationError": "the embedded API server does not list rules"}),
    };
    out["status"] = status;
    if !out.get("metadata").is_some_and(Value::is_object) {
        out["metadata"] = json!({});
    }
    out["metadata"]["creationTimestamp"] = Value::Null;
    Ok(out)
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
    use crate::auth::Rule;
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
    fn token_and_subject_reviews_answer_what_the_server_knows() {
        let faults = Faults::new(Arc::new(Store::new(10)));
        let mut tokens = Tokens::default();
        tokens.insert("t", User::admin("admin"));
        let user = User::admin("admin");
        let body = json!({"spec": {"token": "t"}});
        let r = other_review("TokenReview", &user, &faults, &tokens, &body).unwrap();
        assert_eq!(r["status"]["user"]["username"], "admin");
        let body = json!({"spec": {"token": "nope"}});
        let r = other_review("TokenReview", &user, &faults, &tokens, &body).unwrap();
        assert_eq!(r["status"].get("authenticated"), None);
        let body = json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods"}}});
        let r = other_review("SubjectAccessReview", &user, &faults, &tokens, &body).unwrap();
        assert_eq!(r["status"]["allowed"], false);
        let body = json!({"spec": {"user": "admin", "resourceAttributes": {"verb": "get", "resource": "pods"}}});
        let r = other_review("SubjectAccessReview", &user, &faults, &tokens, &body).unwrap();
        assert_eq!(r["status"]["allowed"], true);
    }

    #[test]
    fn self_review_names_the_user() {
        let v = self_review(&User::with_rules("sa", vec![]));
        assert_eq!(v["status"]["userInfo"]["username"], "sa");
    }
}
