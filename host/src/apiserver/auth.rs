//! Authentication (bearer tokens) and authorization (a per-user table of
//! allowed verbs per resource). This module answers "who is this" and "may
//! they"; it never touches objects.

use std::collections::HashMap;

/// One authorization rule: `verbs` on `resources` in `groups`; `*` is a wildcard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`) or `*`.
    pub verbs: Vec<String>,
    /// API groups ("" for core) or `*`.
    pub groups: Vec<String>,
    /// Resources, optionally with subresource (`pods/status`), or `*`.
    pub resources: Vec<String>,
}

impl Rule {
    /// A rule allowing `verbs` on `resources` of any group.
    pub fn new(verbs: &[&str], resources: &[&str]) -> Self {
        Rule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            groups: vec!["*".into()],
            resources: resources.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A rule allowing everything.
    pub fn all() -> Self {
        Self::new(&["*"], &["*"])
    }

    fn allows(&self, verb: &str, group: &str, resource: &str) -> bool {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        any(&self.verbs, verb) && any(&self.groups, group) && any(&self.resources, resource)
    }
}

/// An authenticated user and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name reported in Forbidden messages.
    pub name: String,
    /// Allowed actions.
    pub rules: Vec<Rule>,
    /// May use the fault-injection endpoint.
    pub admin: bool,
}

impl User {
    /// A user allowed everything, including fault injection.
    pub fn admin(name: &str) -> Self {
        User {
            name: name.into(),
            rules: vec![Rule::all()],
            admin: true,
        }
    }

    /// A user with the given rules and no fault-injection access.
    pub fn with_rules(name: &str, rules: Vec<Rule>) -> Self {
        User {
            name: name.into(),
            rules,
            admin: false,
        }
    }

    /// True if the user may perform `verb` on `group`/`resource` (`resource` may be `pods/status`).
    pub fn allows(&self, verb: &str, group: &str, resource: &str) -> bool {
        self.rules.iter().any(|r| r.allows(verb, group, resource))
    }
}

/// Token → user table.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    users: HashMap<String, User>,
}

impl Tokens {
    /// Adds or replaces a token.
    pub fn insert(&mut self, token: impl Into<String>, user: User) {
        self.users.insert(token.into(), user);
    }

    /// The user a bearer token belongs to.
    pub fn authenticate(&self, token: &str) -> Option<&User> {
        self.users.get(token)
    }
}

/// Extracts the bearer token from an `Authorization` header value.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let h = header?.trim();
    let (scheme, token) = h.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
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
    let qualified = super::status::qualified(group, resource);
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn list_allowed_watch_forbidden_table() {
        let u = User::with_rules("lister", vec![Rule::new(&["get", "list"], &["pods"])]);
        assert!(u.allows("list", "", "pods"));
        assert!(!u.allows("watch", "", "pods"));
        assert!(!u.allows("list", "", "configmaps"));
        assert!(User::admin("a").allows("watch", "x", "y/status"));
    }

    #[test]
    fn forbidden_message_matches_real_server() {
        assert_eq!(
            forbidden_message("x", "watch", "", "pods", None, None, None),
            "pods is forbidden: User \"x\" cannot watch resource \"pods\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            forbidden_message("x", "get", "", "pods", None, Some("p"), Some("d")),
            "pods \"p\" is forbidden: User \"x\" cannot get resource \"pods\" in API group \"\" in the namespace \"d\""
        );
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(None), None);
    }
}
