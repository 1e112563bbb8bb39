//! Written objects' live state parsed once per version: the outputs cache
//! keeps each object as text, and a large summary is read several times
//! per write. It never reads the cluster; it parses what the cache holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;

use crate::guest::ObjectKey;
use crate::projection::{whole_object, ProjectedObject};
use crate::sync::lock;

/// A live object parsed: (its resourceVersion, the object).
type Parsed = (Arc<str>, Arc<Json>);

/// Live objects kept parsed at most.
const PARSED_CACHE: usize = 64;

/// The size of a whole object's text from which the echo of our merge
/// patch is parsed ahead; a smaller object (a child ConfigMap of a few
/// hundred bytes) is parsed only when a write needs it.
pub(super) const PARSE_AHEAD_BYTES: usize = 16 * 1024;

/// Each written object's live state parsed once per version: the cache
/// keeps it as text, and a large summary is read several times per write.
#[derive(Default)]
pub(super) struct ParsedCache(Mutex<HashMap<ObjectKey, Parsed>>);

impl ParsedCache {
    /// `obj` (the cached version of `target`) parsed: kept from before
    /// when that version was parsed already.
    pub(super) fn get_or_parse(
        &self,
        target: &ObjectKey,
        obj: &ProjectedObject,
        at: usize,
    ) -> Option<Arc<Json>> {
        if let Some((rv, json)) = lock(&self.0).get(target) {
            if !rv.is_empty() && *rv == obj.resource_version {
                return Some(json.clone());
            }
        }
        let json = Arc::new(whole_object(obj, at)?);
        let mut parsed = lock(&self.0);
        // Bounded: a guest writing many objects keeps only recent ones.
        if parsed.len() >= PARSED_CACHE {
            parsed.clear();
        }
        parsed.insert(target.clone(), (obj.resource_version.clone(), json.clone()));
        Some(json)
    }

    pub(super) fn forget(&self, target: &ObjectKey) {
        lock(&self.0).remove(target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::resource_version;
    use crate::guest::Gvk;
    use crate::projection::FieldPath;

    /// A cached whole ConfigMap at resourceVersion `rv`.
    fn cached_at(rv: &str) -> ProjectedObject {
        let obj = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "resourceVersion": rv},
            "data": {"n1": "2"}});
        let projection = crate::projection::Projection::new(vec![FieldPath::whole()], vec![]);
        projection.project(&obj, &mut crate::projection::Interner::default())
    }

    #[test]
    fn a_live_object_is_parsed_once_per_version() {
        let cache = ParsedCache::default();
        let v1 = cached_at("1");
        let a = cache.get_or_parse(&target(), &v1, 0).unwrap();
        assert_eq!(a["data"]["n1"], "2");
        let again = cache.get_or_parse(&target(), &v1, 0).unwrap();
        assert!(Arc::ptr_eq(&a, &again), "the same version is parsed once");
        let v2 = cache.get_or_parse(&target(), &cached_at("2"), 0).unwrap();
        assert!(!Arc::ptr_eq(&a, &v2));
        assert_eq!(resource_version(&v2), Some("2"));
        cache.forget(&target());
        let after = cache.get_or_parse(&target(), &cached_at("2"), 0).unwrap();
        assert!(!Arc::ptr_eq(&v2, &after), "forgotten: parsed anew");
    }

    fn target() -> ObjectKey {
        ObjectKey {
            gvk: Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            namespace: Some("ops".into()),
            name: "s".into(),
        }
    }
}
