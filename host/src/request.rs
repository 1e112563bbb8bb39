//! The request key: what one reconcile is about.
//!
//! Owns [`RequestKey`], the value the workqueue deduplicates and hands to
//! workers: a primary object's key together with the watch it belongs to
//! (so the guest's `request.watch` is known and two primaries with the same
//! `namespace/name` stay apart), or an aggregate key. It never maps changes
//! to keys ([`crate::relations`] does) and never parses objects.

use std::fmt;
use std::sync::Arc;

/// One reconcile request, as queued.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey {
    /// The primary watch (position in the manifest) for a per-object key;
    /// None for an aggregate key.
    pub watch: Option<usize>,
    /// `namespace/name` (or `name`), or the aggregate key.
    pub key: Arc<str>,
}

impl RequestKey {
    /// The key of object `namespace/name` of primary watch `watch`.
    pub fn object(watch: usize, key: impl Into<Arc<str>>) -> Self {
        RequestKey {
            watch: Some(watch),
            key: key.into(),
        }
    }

    /// An aggregate key.
    pub fn aggregate(key: impl Into<Arc<str>>) -> Self {
        RequestKey {
            watch: None,
            key: key.into(),
        }
    }

    /// (namespace, name) of a per-object key ("" namespace when
    /// cluster-scoped).
    pub fn namespace_and_name(&self) -> (&str, &str) {
        match self.key.split_once('/') {
            Some((ns, name)) => (ns, name),
            None => ("", &self.key),
        }
    }
}

impl fmt::Display for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_object_keys_split_into_namespace_and_name() {
        assert_eq!(
            RequestKey::object(0, "ml/a").namespace_and_name(),
            ("ml", "a")
        );
        assert_eq!(
            RequestKey::object(0, "node-1").namespace_and_name(),
            ("", "node-1")
        );
        assert_ne!(RequestKey::object(0, "x"), RequestKey::object(1, "x"));
        assert_ne!(RequestKey::object(0, "x"), RequestKey::aggregate("x"));
    }
}
