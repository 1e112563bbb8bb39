//! Authentication (bearer tokens) and authorization (a per-user table of
//! RBAC-like rules). This module answers "who is this" and "may they"; it
//! never touches objects.
//!
//! Authorization follows `plugin/pkg/auth/authorizer/rbac`: a request is
//! allowed when any rule matches its verb, API group, resource (with
//! subresource), namespace and name. A [`Rule`] is either cluster-wide (what
//! a ClusterRoleBinding grants) or limited to namespaces (what RoleBindings
//! grant), and may list `resourceNames`.

use std::collections::HashMap;

/// Where a [`Rule`] applies: what kind of binding granted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace, all-namespaces requests and cluster-scoped
    /// resources, as a ClusterRoleBinding grants a (Cluster)Role's rules.
    Cluster,
    /// Only requests whose namespace is one of these, as a RoleBinding in
    /// each grants a Role's or ClusterRole's rules. Never cluster-scoped
    /// resources nor list/watch across all namespaces.
    Namespaces(Vec<String>),
}

/// One authorization rule: `verbs` on `resources` in `groups`; `*` is a
/// wildcard. [`Rule::new`] and [`Rule::all`] are cluster-wide and apply to
/// any object name; [`Rule::in_namespace`] and [`Rule::named`] narrow them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`) or `*`.
    pub verbs: Vec<String>,
    /// API groups ("" for core) or `*`.
    pub groups: Vec<String>,
    /// Resources, optionally with subresource (`pods/status`), `*/status`
    /// (that subresource of any resource) or `*`.
    pub resources: Vec<String>,
    /// Where the rule applies.
    pub scope: Scope,
    /// RBAC `resourceNames`: when not empty, the rule only allows requests
    /// naming one of these objects (get, update, patch, delete, and
    /// list/watch with a `metadata.name=` field selector), never `create`,
    /// `deletecollection` or an unnamed list/watch.
    pub resource_names: Vec<String>,
}

impl Rule {
    /// A cluster-wide rule allowing `verbs` on `resources` of any group.
    pub fn new(verbs: &[&str], resources: &[&str]) -> Self {
        Rule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            groups: vec!["*".into()],
            resources: resources.iter().map(|s| s.to_string()).collect(),
            scope: Scope::Cluster,
            resource_names: Vec::new(),
        }
    }

    /// A rule allowing everything.
    pub fn all() -> Self {
        Self::new(&["*"], &["*"])
    }

    /// Limits the rule to requests in `namespace`, as a RoleBinding there
    /// grants it. Called again, it adds another namespace (one RoleBinding
    /// per namespace); a cluster-wide rule becomes one namespace only.
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        match &mut self.scope {
            Scope::Cluster => self.scope = Scope::Namespaces(vec![namespace.to_string()]),
            Scope::Namespaces(list) => {
                if !list.iter().any(|n| n == namespace) {
                    list.push(namespace.to_string());
                }
            }
        }
        self
    }

    /// Limits the rule to objects with these names (RBAC `resourceNames`).
    pub fn named(mut self, names: &[&str]) -> Self {
        self.resource_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// RBAC's `RuleAllows` for a resource request, plus the binding's
    /// namespace check. `namespace` and `name` are None (or "") when the
    /// request has none.
    fn allows(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> bool {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        let subresource = resource.split_once('/').map(|(_, sub)| sub);
        let resource_matches = self.resources.iter().any(|x| {
            x == "*"
                || x == resource
                || x.strip_prefix("*/")
                    .is_some_and(|sub| Some(sub) == subresource)
        });
        let in_scope = match &self.scope {
            Scope::Cluster => true,
            Scope::Namespaces(list) => namespace
                .filter(|ns| !ns.is_empty())
                .is_some_and(|ns| list.iter().any(|n| n == ns)),
        };
        let name_matches = self.resource_names.is_empty()
            || name
                .filter(|n| !n.is_empty())
                .is_some_and(|n| self.resource_names.iter().any(|x| x == n));
        any(&self.verbs, verb)
            && any(&self.groups, group)
            && resource_matches
            && in_scope
            && name_matches
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

    /// True if the user may perform `verb` on `group`/`resource` (`resource`
    /// may be `pods/status`). `namespace` is the request's namespace (None
    /// for cluster-scoped resources and all-namespaces list/watch); `name`
    /// is the object the request names, if any.
    pub fn allows(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> bool {
        self.rules
            .iter()
            .any(|r| r.allows(verb, group, resource, namespace, name))
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

/// The object a list or watch names through its field selector: the value
/// of an exact `metadata.name=` (or `==`) requirement, as the real server's
/// RequestInfo takes it for authorization. None if there is none or it is
/// not a valid path segment name.
pub fn field_selector_name(selector: &str) -> Option<&str> {
    selector
        .split(',')
        .find_map(|term| {
            let term = term.trim();
            if term.contains("!=") {
                return None;
            }
            let (key, value) = term.split_once("==").or_else(|| term.split_once('='))?;
            (key.trim() == "metadata.name").then_some(value.trim())
        })
        .filter(|name| {
            !name.is_empty() && *name != "." && *name != ".." && !name.contains(['/', '%', '\\'])
        })
}

pub use wasmctrl_kube_rules::forbidden::forbidden_message;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn list_allowed_watch_forbidden_table() {
        let u = User::with_rules("lister", vec![Rule::new(&["get", "list"], &["pods"])]);
        assert!(u.allows("list", "", "pods", None, None));
        assert!(!u.allows("watch", "", "pods", None, None));
        assert!(!u.allows("list", "", "configmaps", None, None));
        assert!(User::admin("a").allows("watch", "x", "y/status", Some("d"), Some("n")));
    }

    #[test]
    fn cluster_wide_rule_allows_every_namespace_and_cluster_scoped_kinds() {
        let u = User::with_rules("c", vec![Rule::new(&["get", "list"], &["*"])]);
        assert!(u.allows("list", "", "pods", None, None));
        assert!(u.allows("list", "", "pods", Some("a"), None));
        assert!(u.allows("get", "", "pods", Some("b"), Some("p")));
        assert!(u.allows("get", "", "nodes", None, Some("n1")));
    }

    #[test]
    fn namespaced_rule_allows_only_requests_in_its_namespaces() {
        let u = User::with_rules(
            "ns",
            vec![Rule::new(&["get", "list", "watch"], &["pods", "nodes"]).in_namespace("a")],
        );
        // in its namespace: collection and named object
        assert!(u.allows("list", "", "pods", Some("a"), None));
        assert!(u.allows("watch", "", "pods", Some("a"), None));
        assert!(u.allows("get", "", "pods", Some("a"), Some("p")));
        // another namespace
        assert!(!u.allows("list", "", "pods", Some("b"), None));
        assert!(!u.allows("get", "", "pods", Some("b"), Some("p")));
        // all namespaces (`/api/v1/pods`) is a cluster-scope request
        assert!(!u.allows("list", "", "pods", None, None));
        assert!(!u.allows("watch", "", "pods", None, None));
        assert!(!u.allows("list", "", "pods", Some(""), None));
        // cluster-scoped kinds, even if the rule names them
        assert!(!u.allows("list", "", "nodes", None, None));
        assert!(!u.allows("get", "", "nodes", None, Some("n1")));
        // verbs and resources still apply inside the namespace
        assert!(!u.allows("create", "", "pods", Some("a"), None));
        assert!(!u.allows("list", "", "configmaps", Some("a"), None));
    }

    #[test]
    fn namespaced_rule_can_hold_several_namespaces() {
        let rule = Rule::new(&["list"], &["pods"])
            .in_namespace("a")
            .in_namespace("b")
            .in_namespace("a");
        assert_eq!(rule.scope, Scope::Namespaces(vec!["a".into(), "b".into()]));
        let u = User::with_rules("ns", vec![rule]);
        assert!(u.allows("list", "", "pods", Some("a"), None));
        assert!(u.allows("list", "", "pods", Some("b"), None));
        assert!(!u.allows("list", "", "pods", Some("c"), None));
        assert!(!u.allows("list", "", "pods", None, None));
    }

    #[test]
    fn namespaced_and_cluster_rules_add_up() {
        let u = User::with_rules(
            "mixed",
            vec![
                Rule::new(&["list"], &["pods"]),
                Rule::new(&["create"], &["configmaps"]).in_namespace("own"),
            ],
        );
        assert!(u.allows("list", "", "pods", None, None));
        assert!(u.allows("create", "", "configmaps", Some("own"), None));
        assert!(!u.allows("create", "", "configmaps", Some("other"), None));
    }

    #[test]
    fn resource_names_allow_only_requests_naming_the_object() {
        let u = User::with_rules(
            "named",
            vec![Rule::new(&["*"], &["configmaps"]).named(&["summary", "other"])],
        );
        for verb in ["get", "update", "patch", "delete"] {
            assert!(
                u.allows(verb, "", "configmaps", Some("a"), Some("summary")),
                "{verb}"
            );
            assert!(
                !u.allows(verb, "", "configmaps", Some("a"), Some("x")),
                "{verb}"
            );
        }
        // a create names no object in its URL; nor do unnamed list/watch
        assert!(!u.allows("create", "", "configmaps", Some("a"), None));
        assert!(!u.allows("list", "", "configmaps", Some("a"), None));
        assert!(!u.allows("watch", "", "configmaps", None, None));
        assert!(!u.allows("deletecollection", "", "configmaps", Some("a"), None));
        assert!(!u.allows("get", "", "configmaps", Some("a"), Some("")));
        // list/watch with `metadata.name=summary` name it
        assert!(u.allows("list", "", "configmaps", Some("a"), Some("summary")));
        assert!(u.allows("watch", "", "configmaps", None, Some("summary")));
    }

    #[test]
    fn resource_names_and_namespace_combine() {
        let u = User::with_rules(
            "both",
            vec![Rule::new(&["get"], &["leases"])
                .in_namespace("a")
                .named(&["lock"])],
        );
        assert!(u.allows("get", "", "leases", Some("a"), Some("lock")));
        assert!(!u.allows("get", "", "leases", Some("b"), Some("lock")));
        assert!(!u.allows("get", "", "leases", Some("a"), Some("other")));
        assert!(!u.allows("get", "", "leases", None, Some("lock")));
    }

    #[test]
    fn subresources_match_exactly_or_by_star_slash() {
        let exact = User::with_rules("e", vec![Rule::new(&["update"], &["pods/status"])]);
        assert!(exact.allows("update", "", "pods/status", Some("a"), Some("p")));
        assert!(!exact.allows("update", "", "pods", Some("a"), Some("p")));
        let any = User::with_rules("s", vec![Rule::new(&["update"], &["*/status"])]);
        assert!(any.allows("update", "", "pods/status", Some("a"), Some("p")));
        assert!(any.allows("update", "x", "widgets/status", None, Some("w")));
        assert!(!any.allows("update", "", "pods", Some("a"), Some("p")));
        assert!(!any.allows("update", "", "pods/scale", Some("a"), Some("p")));
    }

    #[test]
    fn field_selector_names_an_object_only_by_exact_metadata_name() {
        assert_eq!(field_selector_name("metadata.name=a"), Some("a"));
        assert_eq!(field_selector_name("metadata.name==a"), Some("a"));
        assert_eq!(
            field_selector_name("status.phase=Running, metadata.name = a"),
            Some("a")
        );
        assert_eq!(field_selector_name("metadata.name!=a"), None);
        assert_eq!(field_selector_name("metadata.namespace=a"), None);
        assert_eq!(field_selector_name("metadata.name="), None);
        assert_eq!(field_selector_name("metadata.name=a/b"), None);
        assert_eq!(field_selector_name("metadata.name=.."), None);
        assert_eq!(
            field_selector_name("metadata.name=a/b,metadata.name=c"),
            None
        );
        assert_eq!(field_selector_name(""), None);
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
