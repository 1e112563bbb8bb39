//! The manifest's key mappings over a [`World`], as the host applies them
//! (`host/src/relations`): which requests a change wakes
//! ([`World::wakes`]) and which objects a request's snapshot holds
//! ([`World::objects_for`], [`World::snapshot_for`]). The host's own
//! relation tests run a shared table of cases through both, so the two
//! cannot drift. A watch holds only the objects its label selector admits
//! (the API server evaluates it before the host sees an object); field
//! selectors are not evaluated: add only objects they would admit.

use wasmctrl_snapshot::SnapshotData;

use super::{Obj, World};
use crate::snapshot::SchemaError;
use crate::{KeyMapping, Request};

impl Obj {
    /// The controller owner reference (the first with `controller: true`),
    /// as the host reads it: (apiVersion, kind, name, uid).
    fn controller(&self) -> Option<&crate::OwnerReference> {
        self.owner_references
            .iter()
            .find(|r| r.controller == Some(true))
    }

    /// Whether its controller owner is of `gvk`'s group and kind (the
    /// host compares those, not the version).
    fn controller_of_kind(&self, gvk: &crate::GroupVersionKind) -> Option<&crate::OwnerReference> {
        self.controller().filter(|r| {
            let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
            r.kind == gvk.kind && group == gvk.group
        })
    }
}

impl World {
    /// The index of the watch named `name`.
    pub(super) fn watch_index(&self, name: &str) -> Result<usize, SchemaError> {
        crate::Schema::new(&self.manifest)?
            .watch(name)
            .map(|w| w.id().index())
    }

    /// Whether watch `w`'s kind is cluster-scoped, as the world tells it:
    /// it has objects of `w`'s kind (selected, unselected or gone), and
    /// none has a namespace.
    fn cluster_scoped(&self, w: usize) -> bool {
        let name = self.manifest.watches.get(w).map(|s| s.name.as_str());
        let mut namespaces = self
            .objects
            .iter()
            .chain(&self.gone)
            .filter(|o| Some(o.watch.as_str()) == name)
            .map(|q| q.namespace.as_str());
        namespaces
            .next()
            .is_some_and(|first| first.is_empty() && namespaces.all(str::is_empty))
    }

    /// The namespace primary `q` of watch `p` stands for in
    /// `same-namespace` relations: its own when `p`'s kind is namespaced,
    /// its name when `p` watches Namespaces, none for another
    /// cluster-scoped kind (the host refuses such a manifest).
    fn namespace_of<'a>(&self, p: usize, q: &'a Obj) -> Option<&'a str> {
        let gvk = &self.manifest.watches[p].gvk;
        if !self.cluster_scoped(p) {
            Some(&q.namespace)
        } else if gvk.group.is_empty() && gvk.kind == "Namespace" {
            Some(&q.name)
        } else {
            None
        }
    }

    /// The objects watch `w` holds: those of its kind its label selector
    /// admits.
    fn of(&self, w: usize) -> impl Iterator<Item = &Obj> + '_ {
        self.on_server_of(w).filter(move |o| self.selected(w, o))
    }

    /// Every object of watch `w`'s kind on the server, selected or not.
    fn on_server_of(&self, w: usize) -> impl Iterator<Item = &Obj> + '_ {
        let name = self.manifest.watches.get(w).map(|s| s.name.as_str());
        self.objects
            .iter()
            .filter(move |o| Some(o.watch.as_str()) == name)
    }

    /// The object `key` watch `p` holds.
    pub(super) fn held(&self, p: usize, key: &str) -> Option<&Obj> {
        self.of(p).find(|o| o.key() == key)
    }

    /// The object `key` of watch `p`'s kind on the server, selected or not.
    pub(super) fn on_server(&self, p: usize, key: &str) -> Option<&Obj> {
        self.on_server_of(p).find(|o| o.key() == key)
    }

    /// The requests a change to `object` wakes, by its watch's key mapping,
    /// looked up among the world's objects (`same-namespace`: the primaries
    /// of its namespace; `by-index`: the primaries whose index holds a
    /// value of its field, of its namespace only for a
    /// [`Watch::by_index_same_namespace`](crate::Watch::by_index_same_namespace) link; `owner`: its controller owner, when of the
    /// primary's kind, present or not — in the object's namespace, or in
    /// none when the primary's kind is cluster-scoped, which the world
    /// tells by its primaries: some, and none with a namespace). Sorted and
    /// without duplicates.
    pub fn wakes(&self, object: &Obj) -> Result<Vec<Request>, SchemaError> {
        self.wakes_edit(None, object)
    }

    /// The requests an edit from `old` to `new` wakes: both versions'
    /// (a child whose owner changes wakes both owners).
    pub fn wakes_edit(&self, old: Option<&Obj>, new: &Obj) -> Result<Vec<Request>, SchemaError> {
        self.check_selectors()?;
        let w = self.watch_index(&new.watch)?;
        let spec = &self.manifest.watches[w];
        let versions: Vec<&Obj> = old.into_iter().chain([new]).collect();
        let mut keys = Vec::new();
        match &spec.keys {
            KeyMapping::PerObject => keys.push((w, Request::object(&spec.name, &new.key()))),
            KeyMapping::Aggregate(key) => keys.push((usize::MAX, Request::aggregate(key))),
            KeyMapping::None => {}
            KeyMapping::Owner(primary) => {
                let p = self.watch_index(primary)?;
                let gvk = &self.manifest.watches[p].gvk;
                let cluster_scoped = self.cluster_scoped(p);
                for o in &versions {
                    if let Some(owner) = o.controller_of_kind(gvk) {
                        let namespace = if cluster_scoped { "" } else { &o.namespace };
                        let key = Obj::new(primary, namespace, &owner.name).key();
                        keys.push((p, Request::object(primary, &key)));
                    }
                }
            }
            KeyMapping::SameNamespace(primary) => {
                let p = self.watch_index(primary)?;
                for o in &versions {
                    for q in self
                        .of(p)
                        .filter(|q| self.namespace_of(p, q) == Some(o.namespace.as_str()))
                    {
                        keys.push((p, Request::object(primary, &q.key())));
                    }
                }
            }
            KeyMapping::All(primary) => {
                let p = self.watch_index(primary)?;
                for q in self.of(p) {
                    keys.push((p, Request::object(primary, &q.key())));
                }
            }
            KeyMapping::ByIndex(link) => {
                let primary = link.primary_watch();
                let p = self.watch_index(primary)?;
                let Some(index) = self.manifest.watches[p]
                    .indexes
                    .iter()
                    .find(|i| i.name == link.index)
                else {
                    return Ok(Vec::new());
                };
                for o in &versions {
                    for value in o.strings(&link.field) {
                        for q in self.of(p) {
                            if q.strings(&index.field).contains(&value)
                                && (!link.same_namespace()
                                    || self.namespace_of(p, q) == Some(o.namespace.as_str()))
                            {
                                keys.push((p, Request::object(primary, &q.key())));
                            }
                        }
                    }
                }
            }
        }
        keys.sort_by(|a, b| (a.0, &a.1.key).cmp(&(b.0, &b.1.key)));
        keys.dedup();
        Ok(keys.into_iter().map(|(_, r)| r).collect())
    }

    /// The objects `request`'s snapshot holds, in snapshot order: every
    /// object the watches hold for an aggregate request; for a primary's
    /// request, the primary and what the watches mapped to its watch relate
    /// to it (the objects it controls, those of its namespace, those whose
    /// field holds one of its index values, every object of an `all`
    /// watch) — other primaries are not in it. When its watch no longer
    /// holds the primary, the snapshot lacks it but still holds what
    /// relates to it: by its state on the server when it left the watch's
    /// selectors (`unselected`), by its last state when it is
    /// [`World::gone`] (only `all` watches when the world never had it).
    /// The request's own `presence` is not read: [`World::request`] tells
    /// it.
    pub fn objects_for(&self, request: &Request) -> Result<Vec<&Obj>, SchemaError> {
        let Some(watch) = &request.watch else {
            return self.watched();
        };
        self.check_selectors()?;
        let p = self.watch_index(watch)?;
        let held = self.held(p, &request.key);
        let basis = held
            .or_else(|| self.on_server(p, &request.key))
            .or_else(|| {
                self.gone
                    .iter()
                    .rev()
                    .find(|o| o.watch == *watch && o.key() == request.key)
            });
        let mut out: Vec<&Obj> = held.into_iter().collect();
        let primary_gvk = &self.manifest.watches[p].gvk;
        for (w, spec) in self.manifest.watches.iter().enumerate() {
            let related: Vec<&Obj> = match (&spec.keys, basis) {
                (KeyMapping::All(to), _) if *to == *watch => self.of(w).collect(),
                (KeyMapping::Owner(to), Some(primary)) if *to == *watch => self
                    .of(w)
                    .filter(|o| {
                        !primary.uid.is_empty()
                            && o.controller_of_kind(primary_gvk)
                                .is_some_and(|r| r.uid == primary.uid)
                    })
                    .collect(),
                (KeyMapping::SameNamespace(to), Some(primary)) if *to == *watch => self
                    .of(w)
                    .filter(|o| self.namespace_of(p, primary) == Some(o.namespace.as_str()))
                    .collect(),
                (KeyMapping::ByIndex(link), Some(primary)) if link.primary_watch() == *watch => {
                    let index = self.manifest.watches[p]
                        .indexes
                        .iter()
                        .find(|i| i.name == link.index);
                    let values = index.map(|i| primary.strings(&i.field)).unwrap_or_default();
                    self.of(w)
                        .filter(|o| {
                            !link.same_namespace()
                                || self.namespace_of(p, primary) == Some(o.namespace.as_str())
                        })
                        .filter(|o| o.strings(&link.field).iter().any(|v| values.contains(v)))
                        .collect()
                }
                _ => Vec::new(),
            };
            out.extend(related);
        }
        let position = |o: &Obj| self.watch_index(&o.watch).unwrap_or(usize::MAX);
        out.sort_by(|a, b| {
            (position(a), &a.namespace, &a.name).cmp(&(position(b), &b.namespace, &b.name))
        });
        out.dedup_by(|a, b| a.watch == b.watch && a.namespace == b.namespace && a.name == b.name);
        Ok(out)
    }

    /// The snapshot the host would send for `request`: [`World::snapshot`]
    /// of [`World::objects_for`]`(request)`.
    pub fn snapshot_for(&self, request: &Request) -> Result<SnapshotData, SchemaError> {
        let objects = self.objects_for(request)?;
        self.build(objects.into_iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GroupVersionKind, Manifest, Watch};

    fn quota() -> GroupVersionKind {
        GroupVersionKind::new("example.com", "v1", "Quota")
    }

    /// Quotas (primary, indexed by `spec.node`), pods of their namespace,
    /// ConfigMaps they control, nodes matched by index, and an aggregate.
    fn manifest() -> Manifest {
        Manifest::new("t")
            .watch(
                Watch::new("quotas", quota())
                    .index("node", "spec.node")
                    .per_object(),
            )
            .watch(Watch::new("pods", GroupVersionKind::core("Pod")).same_namespace("quotas"))
            .watch(Watch::new("parts", GroupVersionKind::core("ConfigMap")).owner("quotas"))
            .watch(
                Watch::new("nodes", GroupVersionKind::core("Node"))
                    .fields(["metadata.name"])
                    .by_index("quotas", "node", "metadata.name"),
            )
            .watch(Watch::new("all", GroupVersionKind::core("Secret")).aggregate("sum"))
    }

    fn q(ns: &str, name: &str, node: &str) -> Obj {
        Obj::new("quotas", ns, name).set("spec.node", node)
    }

    fn world() -> World {
        World::new(&manifest())
            .with(q("a", "q1", "n1"))
            .with(q("a", "q2", "n2"))
            .with(q("b", "q3", "n1"))
    }

    fn keys(requests: Vec<Request>) -> Vec<String> {
        requests
            .into_iter()
            .map(|r| format!("{}:{}", r.watch.as_deref().unwrap_or("*"), r.key))
            .collect()
    }

    #[test]
    fn each_mapping_wakes_the_keys_the_host_would() {
        let w = world();
        let wakes = |o: Obj| keys(w.wakes(&o).expect("declared watch"));
        assert_eq!(wakes(q("a", "q9", "n1")), ["quotas:a/q9"]);
        assert_eq!(
            wakes(Obj::new("pods", "a", "p")),
            ["quotas:a/q1", "quotas:a/q2"]
        );
        assert!(wakes(Obj::new("pods", "c", "p")).is_empty());
        let owner = Obj::new("quotas", "a", "q1");
        let part = Obj::new("parts", "a", "c").controlled_by(&quota(), &owner);
        assert_eq!(wakes(part), ["quotas:a/q1"]);
        let other_kind = Obj::new("parts", "a", "c")
            .controlled_by(&GroupVersionKind::new("other.io", "v1", "Quota"), &owner);
        assert!(wakes(other_kind).is_empty());
        let node = |name: &str| Obj::new("nodes", "", name).set("metadata.name", name);
        assert_eq!(wakes(node("n1")), ["quotas:a/q1", "quotas:b/q3"]);
        assert_eq!(wakes(Obj::new("all", "x", "s")), ["*:sum"]);
        let moved =
            Obj::new("parts", "a", "c").controlled_by(&quota(), &Obj::new("quotas", "a", "q2"));
        let was = Obj::new("parts", "a", "c").controlled_by(&quota(), &owner);
        assert_eq!(
            keys(w.wakes_edit(Some(&was), &moved).expect("declared")),
            ["quotas:a/q1", "quotas:a/q2"]
        );
    }

    #[test]
    fn a_same_namespace_by_index_link_relates_only_objects_of_one_namespace() {
        let apps = GroupVersionKind::new("example.com", "v1", "App");
        let m = Manifest::new("t")
            .watch(
                Watch::new("apps", apps)
                    .index("config", "spec.configMap")
                    .per_object(),
            )
            .watch(
                Watch::new("configs", GroupVersionKind::core("ConfigMap"))
                    .fields(["metadata.name"])
                    .by_index_same_namespace("apps", "config", "metadata.name"),
            );
        let app = |ns: &str, name: &str| Obj::new("apps", ns, name).set("spec.configMap", "shared");
        let config = |ns: &str| Obj::new("configs", ns, "shared").set("metadata.name", "shared");
        let w = World::new(&m)
            .with(app("a", "one"))
            .with(app("a", "two"))
            .with(app("b", "three"))
            .with(config("b"));
        assert_eq!(
            keys(w.wakes(&config("a")).expect("declared")),
            ["apps:a/one", "apps:a/two"]
        );
        let held: Vec<String> = w
            .objects_for(&Request::object("apps", "b/three"))
            .expect("declared")
            .iter()
            .map(|o| format!("{}:{}", o.watch(), o.key()))
            .collect();
        assert_eq!(held, ["apps:b/three", "configs:b/shared"]);
        let w = w.with(config("a"));
        assert_eq!(
            w.objects_for(&Request::object("apps", "a/one"))
                .expect("declared")
                .len(),
            2,
            "a/one and a/shared, not b/shared"
        );
    }

    #[test]
    fn a_primary_s_snapshot_holds_it_and_its_related_objects_only() {
        let owner = Obj::new("quotas", "a", "q1");
        let w = world()
            .with(Obj::new("pods", "a", "p"))
            .with(Obj::new("pods", "b", "p"))
            .with(Obj::new("parts", "a", "mine").controlled_by(&quota(), &owner))
            .with(
                Obj::new("parts", "a", "stale")
                    .controlled_by(&quota(), &owner.clone().uid("old-uid")),
            )
            .with(Obj::new("nodes", "", "n1").set("metadata.name", "n1"))
            .with(Obj::new("nodes", "", "n2").set("metadata.name", "n2"))
            .with(Obj::new("all", "a", "s"));
        let held = |r: Request| -> Vec<String> {
            w.objects_for(&r)
                .expect("declared")
                .iter()
                .map(|o| format!("{}:{}", o.watch(), o.key()))
                .collect()
        };
        assert_eq!(
            held(Request::object("quotas", "a/q1")),
            ["quotas:a/q1", "pods:a/p", "parts:a/mine", "nodes:n1"]
        );
        assert!(held(Request::object("quotas", "a/gone")).is_empty());
        assert_eq!(held(Request::aggregate("sum")).len(), 10);
        let data = w
            .snapshot_for(&Request::object("quotas", "b/q3"))
            .expect("declared");
        assert_eq!(data.object_name.len(), 3, "q3, pod b/p, node n1");
    }

    /// Namespaces selected by `tier=gold`, each controlling Secrets, and
    /// the ConfigMaps of `platform` shared by all of them.
    fn provisioner() -> (Manifest, GroupVersionKind) {
        let namespace = GroupVersionKind::core("Namespace");
        let m = Manifest::new("t")
            .watch(
                Watch::new("spaces", namespace.clone())
                    .label_selector("tier=gold")
                    .per_object(),
            )
            .watch(Watch::new("secrets", GroupVersionKind::core("Secret")).owner("spaces"))
            .watch(
                Watch::new("defaults", GroupVersionKind::core("ConfigMap"))
                    .namespace("platform")
                    .all("spaces"),
            );
        (m, namespace)
    }

    fn names(objects: Vec<&Obj>) -> Vec<String> {
        objects
            .into_iter()
            .map(|o| format!("{}:{}", o.watch(), o.key()))
            .collect()
    }

    #[test]
    fn a_primary_out_of_its_label_selector_is_unselected_with_what_it_controls() {
        let (m, namespace) = provisioner();
        let gold = Obj::new("spaces", "", "a").label("tier", "gold");
        let child = Obj::new("secrets", "a", "quota").controlled_by(&namespace, &gold);
        let defaults = Obj::new("defaults", "platform", "tiers");
        let world = |space: Obj| {
            World::new(&m)
                .with(space)
                .with(child.clone())
                .with(defaults.clone())
        };
        let live = world(gold.clone());
        let request = live.request("spaces", "a").expect("declared");
        assert_eq!(request.presence, Some(crate::Presence::Present));
        assert_eq!(
            names(live.objects_for(&request).expect("declared")),
            ["spaces:a", "secrets:a/quota", "defaults:platform/tiers"]
        );
        // The label goes: still on the server, out of the watch.
        let left = world(gold.clone().label("tier", "none"));
        let request = left.request("spaces", "a").expect("declared");
        assert_eq!(request.presence, Some(crate::Presence::Unselected));
        assert_eq!(
            names(left.objects_for(&request).expect("declared")),
            ["secrets:a/quota", "defaults:platform/tiers"],
            "no primary, but what it controls and the shared input"
        );
        assert!(
            left.snapshot().expect("declared").object_name.len() == 2,
            "the watch no longer holds it"
        );
        // Deleted: gone, related by its last state.
        let deleted = World::new(&m)
            .with(child.clone())
            .with(defaults.clone())
            .gone(gold);
        let request = deleted.request("spaces", "a").expect("declared");
        assert_eq!(request.presence, Some(crate::Presence::Gone));
        assert_eq!(
            names(deleted.objects_for(&request).expect("declared")),
            ["secrets:a/quota", "defaults:platform/tiers"]
        );
        // Never seen: only the shared input.
        let request = deleted.request("spaces", "b").expect("declared");
        assert_eq!(
            names(deleted.objects_for(&request).expect("declared")),
            ["defaults:platform/tiers"]
        );
    }

    #[test]
    fn a_shared_input_wakes_every_primary_whatever_its_namespace() {
        let (m, _) = provisioner();
        let w = World::new(&m)
            .with(Obj::new("spaces", "", "a").label("tier", "gold"))
            .with(Obj::new("spaces", "", "b").label("tier", "gold"))
            .with(Obj::new("spaces", "", "c").label("tier", "bronze"));
        assert_eq!(
            keys(
                w.wakes(&Obj::new("defaults", "platform", "tiers"))
                    .expect("declared")
            ),
            ["spaces:a", "spaces:b"],
            "every selected primary; not c, out of the selector"
        );
    }

    #[test]
    fn a_label_selector_that_does_not_parse_is_an_error_naming_the_watch() {
        let m = Manifest::new("t").watch(
            Watch::new("spaces", GroupVersionKind::core("Namespace"))
                .label_selector("tier in (gold")
                .per_object(),
        );
        let err = World::new(&m).snapshot().unwrap_err();
        assert!(err.to_string().contains("watch \"spaces\""), "{err}");
    }
}
