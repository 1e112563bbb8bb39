//! The wording of a Forbidden (403) answer, as the real API server's RBAC
//! authorizer writes it: the host predicts it in its permission preflight,
//! the embedded server answers with it.

/// `resource.group`, or `resource` for the core group.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// The real server's Forbidden message.
pub fn forbidden_message(
    user: &str,
    verb: &str,
    group: &str,
    resource: &str,
    subresource: Option<&str>,
    name: Option<&str>,
    namespace: Option<&str>,
) -> String {
    let qualified = qualified(group, resource);
    let subject = match name {
        Some(n) => format!("{qualified} \"{n}\""),
        None => qualified,
    };
    let res = match subresource {
        Some(s) => format!("{resource}/{s}"),
        None => resource.to_string(),
    };
    let scope = match namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    format!("{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{res}\" in API group \"{group}\" {scope}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_user_verb_resource_group_and_scope() {
        assert_eq!(
            forbidden_message("u", "watch", "", "pods", None, None, None),
            "pods is forbidden: User \"u\" cannot watch resource \"pods\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            forbidden_message("u", "patch", "apps", "deployments", Some("scale"), Some("d"), Some("ns")),
            "deployments.apps \"d\" is forbidden: User \"u\" cannot patch resource \"deployments/scale\" in API group \"apps\" in the namespace \"ns\""
        );
    }
}
