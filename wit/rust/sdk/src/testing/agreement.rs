//! The relation agreement table (`wit/agreement/relations.json`, described
//! in `wit/agreement/README.md`) read into this SDK's test types, and the
//! answers this SDK's [`World`] gives to its questions: which keys each
//! change wakes, and which objects each key's snapshot holds. The host runs
//! the same table through its own relations (`host/src/relations`), and so
//! do the Python and TypeScript SDKs' worlds, each asserting its answers
//! equal the table's: the four cannot drift apart. Reading only; nothing
//! here knows the file's location.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{Obj, World};
use crate::snapshot::SchemaError;
use crate::{GroupVersionKind, IndexSpec, KeyMapping, Manifest, OwnerReference, Request, Watch};

/// The whole table.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Table {
    /// What the file says of itself.
    #[serde(default)]
    pub about: Vec<String>,
    /// The guest's manifest (its watches; no writes).
    manifest: TableManifest,
    /// The kinds that are cluster-scoped (as API discovery would say).
    pub cluster_scoped_kinds: Vec<String>,
    /// The objects every case starts from.
    pub world: Vec<Case>,
    /// Changes, each applied alone to [`Table::world`]: a new object, or
    /// an edit of one of its objects (same watch, namespace and name).
    pub changes: Vec<Change>,
    /// Keys of [`Table::world`] and what each key's snapshot holds.
    pub snapshots: Vec<Holds>,
    /// Primaries of [`Table::world`] deleted: what each key's snapshot
    /// holds then (the primary gone, what related to it by its last state).
    pub departed: Vec<Holds>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableManifest {
    name: String,
    watches: Vec<TableWatch>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableWatch {
    name: String,
    gvk: TableGvk,
    #[serde(default)]
    fields: Vec<String>,
    #[serde(default)]
    indexes: Vec<TableIndex>,
    keys: TableKeys,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableGvk {
    group: String,
    version: String,
    kind: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableIndex {
    name: String,
    field: String,
}

/// A key mapping as the contract names it (`per-object`,
/// `{"owner": "quotas"}`, `{"by-index": {"primary", "index", "field"}}`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
enum TableKeys {
    PerObject,
    None,
    Aggregate(String),
    Owner(String),
    SameNamespace(String),
    All(String),
    ByIndex {
        primary: String,
        index: String,
        field: String,
    },
}

/// One object: its watch, namespace ("" when cluster-scoped), name, uid
/// (default `uid-<watch>-<namespace>-<name>`), string fields by dotted
/// path, labels, and a controller owner reference.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The watch it belongs to.
    pub watch: String,
    /// Its namespace, "" when cluster-scoped.
    pub namespace: String,
    /// Its name.
    pub name: String,
    uid: Option<String>,
    #[serde(default)]
    fields: BTreeMap<String, String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    controller: Option<Controller>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Controller {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
}

/// One change and the keys it wakes, as `watch:key` (`*:key` for an
/// aggregate key), sorted.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// The object as it is after the change.
    pub object: Case,
    /// The keys the change wakes.
    pub wakes: Vec<String>,
}

/// One key, as `watch:key` (`*:key` for an aggregate key), and the objects
/// its snapshot holds, as `watch:namespace/name`, sorted.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Holds {
    /// The key.
    pub key: String,
    /// The objects.
    pub holds: Vec<String>,
}

impl Holds {
    /// The key's watch (`None` for an aggregate key) and key.
    pub fn watch_and_key(&self) -> (Option<&str>, &str) {
        match self.key.split_once(':') {
            Some(("*", key)) => (None, key),
            Some((watch, key)) => (Some(watch), key),
            None => (None, &self.key),
        }
    }
}

impl Case {
    /// Its uid, as set or by default.
    pub fn uid(&self) -> String {
        self.uid
            .clone()
            .unwrap_or_else(|| format!("uid-{}-{}-{}", self.watch, self.namespace, self.name))
    }

    /// Whether `other` is the same object (watch, namespace, name).
    pub fn same(&self, other: &Case) -> bool {
        (&self.watch, &self.namespace, &self.name) == (&other.watch, &other.namespace, &other.name)
    }

    /// Its key, `namespace/name` (`name` when cluster-scoped).
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    /// As this SDK's test object.
    pub fn obj(&self) -> Obj {
        let mut o = Obj::new(&self.watch, &self.namespace, &self.name).uid(&self.uid());
        for (path, value) in &self.fields {
            o = o.set(path, value.as_str());
        }
        for (k, v) in &self.labels {
            o = o.label(k, v);
        }
        if let Some(c) = &self.controller {
            o = o.owner_reference(OwnerReference {
                api_version: c.api_version.clone(),
                kind: c.kind.clone(),
                name: c.name.clone(),
                uid: c.uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            });
        }
        o
    }

    /// As the API server would send it (what the host's watches read).
    pub fn json(&self) -> Value {
        let mut root = json!({"metadata": {"name": self.name, "uid": self.uid()}});
        if !self.namespace.is_empty() {
            root["metadata"]["namespace"] = json!(self.namespace);
        }
        for (path, value) in &self.fields {
            let mut at = &mut root;
            let mut parts = path.split('.').peekable();
            while let Some(part) = parts.next() {
                if parts.peek().is_none() {
                    at[part] = json!(value);
                    break;
                }
                if !at.get(part).is_some_and(Value::is_object) {
                    at[part] = Value::Object(Map::new());
                }
                at = &mut at[part];
            }
        }
        if !self.labels.is_empty() {
            root["metadata"]["labels"] = json!(self.labels);
        }
        if let Some(c) = &self.controller {
            root["metadata"]["ownerReferences"] = json!([{"apiVersion": c.api_version,
                "kind": c.kind, "name": c.name, "uid": c.uid, "controller": true}]);
        }
        root
    }
}

impl Table {
    /// Reads the table from its JSON text.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The manifest the table's objects are watched through.
    pub fn manifest(&self) -> Manifest {
        self.manifest
            .watches
            .iter()
            .fold(Manifest::new(&self.manifest.name), |m, w| {
                let gvk = GroupVersionKind::new(&w.gvk.group, &w.gvk.version, &w.gvk.kind);
                let mut watch = Watch::new(&w.name, gvk).fields(&w.fields);
                watch.indexes = w
                    .indexes
                    .iter()
                    .map(|i| IndexSpec {
                        name: i.name.clone(),
                        field: i.field.clone(),
                    })
                    .collect();
                m.watch(watch.keys(match &w.keys {
                    TableKeys::PerObject => KeyMapping::PerObject,
                    TableKeys::None => KeyMapping::None,
                    TableKeys::Aggregate(key) => KeyMapping::Aggregate(key.clone()),
                    TableKeys::Owner(p) => KeyMapping::Owner(p.clone()),
                    TableKeys::SameNamespace(p) => KeyMapping::SameNamespace(p.clone()),
                    TableKeys::All(p) => KeyMapping::All(p.clone()),
                    TableKeys::ByIndex {
                        primary,
                        index,
                        field,
                    } => KeyMapping::ByIndex(crate::IndexLink {
                        primary: primary.clone(),
                        index: index.clone(),
                        field: field.clone(),
                    }),
                }))
            })
    }

    /// The world's object that `change` edits, if it edits one.
    pub fn edited(&self, change: &Change) -> Option<&Case> {
        self.world.iter().find(|o| o.same(&change.object))
    }

    /// The world's object a `departed` entry deletes.
    pub fn departing(&self, departed: &Holds) -> Option<&Case> {
        let (watch, key) = departed.watch_and_key();
        self.world
            .iter()
            .find(|o| Some(o.watch.as_str()) == watch && o.key() == key)
    }

    /// The keys `change` wakes in this SDK's [`World`], as the table
    /// writes them.
    pub fn sdk_wakes(&self, change: &Change) -> Result<Vec<String>, SchemaError> {
        let world = World::new(&self.manifest()).with_all(self.world.iter().map(Case::obj));
        let old = self.edited(change).map(Case::obj);
        let mut keys: Vec<String> = world
            .wakes_edit(old.as_ref(), &change.object.obj())?
            .iter()
            .map(|r| format!("{}:{}", r.watch.as_deref().unwrap_or("*"), r.key))
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// What `entry`'s key's snapshot holds over [`Table::world`] in this
    /// SDK's [`World`], as the table writes it.
    pub fn sdk_holds(&self, entry: &Holds) -> Result<Vec<String>, SchemaError> {
        let world = World::new(&self.manifest()).with_all(self.world.iter().map(Case::obj));
        Self::holds_in(&world, &Self::request(entry))
    }

    /// The presence [`World::request`] gives `entry`'s key in this SDK's
    /// [`World`] once its primary is deleted ([`World::gone`]), and what the
    /// key's snapshot holds then.
    pub fn sdk_departed_holds(
        &self,
        entry: &Holds,
    ) -> Result<(Option<crate::Presence>, Vec<String>), SchemaError> {
        let departing = self.departing(entry);
        let (watch, key) = entry.watch_and_key();
        let mut world = World::new(&self.manifest()).with_all(
            self.world
                .iter()
                .filter(|o| departing.is_none_or(|d| !d.same(o)))
                .map(Case::obj),
        );
        if let Some(d) = departing {
            world = world.gone(d.obj());
        }
        let request = world.request(watch.unwrap_or_default(), key)?;
        Ok((request.presence, Self::holds_in(&world, &request)?))
    }

    fn request(entry: &Holds) -> Request {
        match entry.watch_and_key() {
            (Some(watch), key) => Request::object(watch, key),
            (None, key) => Request::aggregate(key),
        }
    }

    fn holds_in(world: &World, request: &Request) -> Result<Vec<String>, SchemaError> {
        let mut held: Vec<String> = world
            .objects_for(request)?
            .iter()
            .map(|o| {
                let key = o.key();
                let (ns, name) = key.split_once('/').unwrap_or(("", &key));
                format!("{}:{ns}/{name}", o.watch())
            })
            .collect();
        held.sort();
        Ok(held)
    }
}
