//! Builders for the manifest a guest returns from `describe`: constructors
//! and `#[must_use]` setters on the contract's own records
//! ([`Manifest`], [`Watch`], [`WriteRule`], [`GroupVersionKind`],
//! [`ObjectRef`]), so a manifest reads like a sentence and every field not
//! mentioned keeps the contract's default. No validation happens here: the
//! SDK checks names when the guest resolves its fields
//! ([`Schema`](crate::Schema)) and the host checks the rest at `describe`.

use crate::{
    GroupVersionKind, IndexLink, IndexSpec, KeyMapping, Manifest, ObjectRef, Watch, WriteRule,
};

impl GroupVersionKind {
    /// A type of API group `group` ("" for core), e.g.
    /// `GroupVersionKind::new("example.com", "v1", "GpuQuota")`.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// A core-group type, e.g. `GroupVersionKind::core("Pod")` (version v1).
    pub fn core(kind: &str) -> Self {
        Self::new("", "v1", kind)
    }

    /// The `apiVersion` of its objects: `v1`, `example.com/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// A reference to the object `namespace/name` of this type (`namespace`
    /// "" for a cluster-scoped object).
    pub fn object(&self, namespace: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: self.api_version(),
            kind: self.kind.clone(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            name: name.to_string(),
        }
    }
}

impl Manifest {
    /// A manifest for the guest `name` that watches and writes nothing yet.
    pub fn new(name: &str) -> Self {
        Manifest {
            name: name.to_string(),
            watches: Vec::new(),
            writes: Vec::new(),
            resync_seconds: None,
        }
    }

    /// Adds a watch.
    #[must_use]
    pub fn watch(mut self, watch: Watch) -> Self {
        self.watches.push(watch);
        self
    }

    /// Adds a write rule.
    #[must_use]
    pub fn write(mut self, rule: WriteRule) -> Self {
        self.writes.push(rule);
        self
    }

    /// Re-enqueues every key this often (the host's default is 10 minutes).
    #[must_use]
    pub fn resync_seconds(mut self, seconds: u32) -> Self {
        self.resync_seconds = Some(seconds);
        self
    }
}

impl Watch {
    /// A watch named `name` (a DNS label, unique in the manifest) over all
    /// objects of `gvk` in every namespace, projecting no fields, whose
    /// changes enqueue nothing (set [`Watch::keys`]).
    pub fn new(name: &str, gvk: GroupVersionKind) -> Self {
        Watch {
            name: name.to_string(),
            gvk,
            plural: None,
            namespace: None,
            label_selector: None,
            field_selector: None,
            fields: Vec::new(),
            indexes: Vec::new(),
            keys: KeyMapping::None,
            finalizer: None,
        }
    }

    /// The resource name in URLs, as a claim: the host lists what API
    /// discovery names for the kind and refuses a watch whose plural
    /// disagrees.
    #[must_use]
    pub fn plural(mut self, plural: &str) -> Self {
        self.plural = Some(plural.to_string());
        self
    }

    /// Only objects of this namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// A label selector, evaluated by the API server.
    #[must_use]
    pub fn label_selector(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }

    /// A field selector, evaluated by the API server. Objects that stop
    /// matching leave the snapshot as if deleted.
    #[must_use]
    pub fn field_selector(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }

    /// Adds projected field paths (the WIT `watch.fields` syntax). Only
    /// these fields are cached and sent; reading any other is an error when
    /// the guest resolves its fields, i.e. at `describe`.
    #[must_use]
    pub fn fields<S: AsRef<str>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.fields
            .extend(paths.into_iter().map(|p| p.as_ref().to_string()));
        self
    }

    /// Adds an index named `name` over the values of `field`.
    #[must_use]
    pub fn index(mut self, name: &str, field: &str) -> Self {
        self.indexes.push(IndexSpec {
            name: name.to_string(),
            field: field.to_string(),
        });
        self
    }

    /// Which requests a change causes.
    #[must_use]
    pub fn keys(mut self, keys: KeyMapping) -> Self {
        self.keys = keys;
        self
    }

    /// Each object is its own request (a primary watch).
    #[must_use]
    pub fn per_object(self) -> Self {
        self.keys(KeyMapping::PerObject)
    }

    /// Every change enqueues the one key `key`.
    #[must_use]
    pub fn aggregate(self, key: &str) -> Self {
        self.keys(KeyMapping::Aggregate(key.to_string()))
    }

    /// A change enqueues every object of the primary watch `primary` in the
    /// same namespace, whose snapshots hold this watch's objects of that
    /// namespace.
    #[must_use]
    pub fn same_namespace(self, primary: &str) -> Self {
        self.keys(KeyMapping::SameNamespace(primary.to_string()))
    }

    /// A shared input: a change enqueues every object of the primary watch
    /// `primary`, and every one of its snapshots holds all of this watch's
    /// objects, whatever their namespace (a platform-wide ConfigMap of
    /// defaults, say).
    #[must_use]
    pub fn all(self, primary: &str) -> Self {
        self.keys(KeyMapping::All(primary.to_string()))
    }

    /// A change enqueues the object's controller owner in the primary watch
    /// `primary`.
    #[must_use]
    pub fn owner(self, primary: &str) -> Self {
        self.keys(KeyMapping::Owner(primary.to_string()))
    }

    /// A change enqueues the objects of `primary` whose index `index` holds
    /// a value of this watch's `field`.
    #[must_use]
    pub fn by_index(self, primary: &str, index: &str, field: &str) -> Self {
        self.keys(KeyMapping::ByIndex(IndexLink {
            primary: primary.to_string(),
            index: index.to_string(),
            field: field.to_string(),
        }))
    }

    /// Like [`Watch::by_index`], kept to one namespace: a change enqueues
    /// the objects of `primary` in this object's namespace whose index
    /// `index` holds a value of `field`, and a primary's snapshot holds
    /// only the objects of its namespace that match (a ConfigMap `shared`
    /// and the Apps of its namespace that name it). The link names its
    /// primary `same-namespace:PRIMARY` (see [`IndexLink::primary_watch`]).
    #[must_use]
    pub fn by_index_same_namespace(self, primary: &str, index: &str, field: &str) -> Self {
        self.by_index(&format!("{SAME_NAMESPACE_PREFIX}{primary}"), index, field)
    }

    /// A finalizer the host manages on this (per-object) watch's objects.
    #[must_use]
    pub fn finalizer(mut self, finalizer: &str) -> Self {
        self.finalizer = Some(finalizer.to_string());
        self
    }
}

/// The prefix of an [`IndexLink::primary`] that keeps the link to one
/// namespace (`same-namespace:apps`); watch names are DNS labels, so no
/// watch name has it.
pub const SAME_NAMESPACE_PREFIX: &str = "same-namespace:";

impl IndexLink {
    /// The name of the primary watch the link names.
    pub fn primary_watch(&self) -> &str {
        self.primary
            .strip_prefix(SAME_NAMESPACE_PREFIX)
            .unwrap_or(&self.primary)
    }

    /// Whether the link relates only objects of one namespace (its primary
    /// is written `same-namespace:NAME`).
    pub fn same_namespace(&self) -> bool {
        self.primary.starts_with(SAME_NAMESPACE_PREFIX)
    }
}

impl WriteRule {
    /// Allows writing objects of `gvk`, any name, any namespace, not their
    /// status.
    pub fn new(gvk: GroupVersionKind) -> Self {
        WriteRule {
            gvk,
            namespace: None,
            names: Vec::new(),
            status: false,
        }
    }

    /// Only in this namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// Only this name (call again to allow more).
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.names.push(name.to_string());
        self
    }

    /// Also the status subresource (the host refuses it for a type that
    /// has none).
    #[must_use]
    pub fn status(mut self, status: bool) -> Self {
        self.status = status;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_fill_every_field_they_name_and_default_the_rest() {
        let quotas = GroupVersionKind::new("example.com", "v1", "GpuQuota");
        let m = Manifest::new("gpu-quota")
            .watch(
                Watch::new("quotas", quotas.clone())
                    .fields(["spec.limit"])
                    .per_object()
                    .finalizer("example.com/gpu-quota"),
            )
            .watch(
                Watch::new("pods", GroupVersionKind::core("Pod"))
                    .field_selector("spec.nodeName!=")
                    .fields(vec!["spec.nodeName".to_string()])
                    .same_namespace("quotas"),
            )
            .write(WriteRule::new(quotas.clone()).status(true))
            .resync_seconds(60);
        assert_eq!(m.watches[0].keys, KeyMapping::PerObject);
        assert_eq!(
            m.watches[0].finalizer.as_deref(),
            Some("example.com/gpu-quota")
        );
        assert_eq!(
            m.watches[1].keys,
            KeyMapping::SameNamespace("quotas".into())
        );
        assert_eq!(m.watches[1].plural, None);
        assert!(m.writes[0].status && m.writes[0].names.is_empty());
        assert_eq!(m.resync_seconds, Some(60));
        assert_eq!(quotas.api_version(), "example.com/v1");
        assert_eq!(GroupVersionKind::core("Pod").api_version(), "v1");
        let r = quotas.object("team-a", "gpus");
        assert_eq!(
            (r.api_version.as_str(), r.namespace.as_deref()),
            ("example.com/v1", Some("team-a"))
        );
        assert_eq!(
            GroupVersionKind::core("Node").object("", "n1").namespace,
            None
        );
    }
}
