//! Where a per-object request's primary is in its life:
//! [`Lifecycle::Live`] (reconcile it), [`Lifecycle::Deleting`] (clean up,
//! then [`Deleting::release`]), [`Lifecycle::Gone`] (deleted: delete what
//! it controlled, if anything is left) or [`Lifecycle::Unselected`] (still
//! exists, but left the watch's selectors: delete what it controlled). The
//! request's `presence`, the host's word from the server, tells the last
//! two apart; neither snapshot holds the primary, and both still hold the
//! objects related to it (see `reconcile` in `wit/controller.wit`). Like
//! kube-runtime's `finalizer::Event::{Apply, Cleanup}`, but the host adds
//! the finalizer: this module only reads the snapshot and plans its
//! removal (after deleting the objects the guest names, with
//! [`Deleting::delete_then_release`]), and never decides what clean-up is.

use crate::snapshot::{Object, Snapshot};
use crate::{Plan, Presence, Request};

/// The field path whose projection tells whether an object still holds the
/// watch's finalizer.
pub const FINALIZERS: &str = "metadata.finalizers[*]";

/// A request's primary object, by where it is in its life.
#[derive(Clone, Copy)]
pub enum Lifecycle<'s> {
    /// Present and not being deleted.
    Live(Object<'s>),
    /// Being deleted (finalizers hold it): clean up, then release.
    Deleting(Deleting<'s>),
    /// Deleted (`presence` `gone`): the request key. The snapshot no longer
    /// holds it but still holds the objects related to it (those it
    /// controlled, say): delete what it controlled that is left. Its
    /// finalizer, if it had one, was released by an earlier reconcile.
    Gone(&'s str),
    /// Still on the server, but no longer matching its watch's selectors
    /// (`presence` `unselected`): the request key. The snapshot does not
    /// hold it but still holds the objects related to it: delete what it
    /// controlled. After this reconcile succeeds, the host releases its
    /// finalizer, if the watch declares one.
    Unselected(&'s str),
}

/// A primary being deleted, and the finalizer that holds it for us.
#[derive(Clone, Copy)]
pub struct Deleting<'s> {
    object: Object<'s>,
    finalizer: Option<&'s str>,
    holds: bool,
}

impl<'s> Deleting<'s> {
    /// The object.
    pub fn object(&self) -> Object<'s> {
        self.object
    }

    /// The watch's declared finalizer, if any.
    pub fn finalizer(&self) -> Option<&'s str> {
        self.finalizer
    }

    /// Whether it still holds the watch's finalizer: read from
    /// [`FINALIZERS`] when the watch projects it, otherwise assumed (the
    /// host skips removing a finalizer that is not there). False when the
    /// watch declares none.
    pub fn holds_finalizer(&self) -> bool {
        self.holds
    }

    /// Plans the removal of the watch's finalizer, which lets the object
    /// go: call it once clean-up is done. Plans nothing when the object no
    /// longer holds it or the watch declares none.
    pub fn release<'p>(&self, plan: &'p mut Plan) -> &'p mut Plan {
        match self.finalizer {
            Some(finalizer) if self.holds => {
                plan.remove_finalizer(&self.object.object_ref(), finalizer)
            }
            _ => plan,
        }
    }

    /// Cleans up by deleting `owned` (the objects it controls, each delete
    /// pinned to the uid the snapshot saw) and plans the finalizer's
    /// release only once none is left: their deletions wake the object
    /// again, and that reconcile releases it. Without a garbage collector
    /// (an API server with no kube-controller-manager) nothing else would
    /// delete them.
    pub fn delete_then_release<'p, 'o>(
        &self,
        owned: impl IntoIterator<Item = Object<'o>>,
        plan: &'p mut Plan,
    ) -> &'p mut Plan {
        let mut owned = owned.into_iter().peekable();
        if owned.peek().is_none() {
            return self.release(plan);
        }
        plan.delete_all(owned)
    }
}

impl<'a> Snapshot<'a> {
    /// Where `request`'s primary is in its life (see [`Lifecycle`]): `Gone`
    /// and `Unselected` as its `presence` says, never guessed from the
    /// snapshot (`Gone` too when a present primary is not in it, as for
    /// an aggregate request).
    pub fn lifecycle<'s>(&'s self, request: &'s Request) -> Lifecycle<'s> {
        match request.presence {
            Some(Presence::Gone) => return Lifecycle::Gone(&request.key),
            Some(Presence::Unselected) => return Lifecycle::Unselected(&request.key),
            Some(Presence::Present) | None => {}
        }
        let Some(object) = self.primary(request) else {
            return Lifecycle::Gone(&request.key);
        };
        if !object.is_deleting() {
            return Lifecycle::Live(object);
        }
        let watch = request
            .watch
            .as_deref()
            .and_then(|w| self.schema().watch(w).ok());
        let finalizer = watch.and_then(|w| w.finalizer());
        let projected = watch.and_then(|w| w.field(FINALIZERS).ok());
        let holds = match (finalizer, projected) {
            (Some(ours), Some(list)) => object.texts(list).any(|f| f == Some(ours)),
            (Some(_), None) => true,
            (None, _) => false,
        };
        Lifecycle::Deleting(Deleting {
            object,
            finalizer,
            holds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Obj, World};
    use crate::{wit, GroupVersionKind, Manifest, Schema, Watch};

    const FIN: &str = "example.com/cleanup";

    fn manifest(finalizer: Option<&str>, project: bool) -> Manifest {
        let mut apps = Watch::new("apps", GroupVersionKind::new("example.com", "v1", "App"));
        if project {
            apps = apps.fields([FINALIZERS]);
        }
        apps = apps.per_object();
        if let Some(f) = finalizer {
            apps = apps.finalizer(f);
        }
        Manifest::new("t").watch(apps)
    }

    /// The writes `release` plans for `object`, or `None` when the
    /// lifecycle is not `Deleting`; with the lifecycle's name.
    fn run(manifest: &Manifest, objects: Vec<Obj>) -> (&'static str, Vec<wit::Write>) {
        let data = World::new(manifest)
            .with_all(objects)
            .snapshot()
            .expect("declared names");
        let schema = Schema::new(manifest).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let request = Request::object("apps", "ns/a");
        let mut plan = Plan::new();
        let name = match snap.lifecycle(&request) {
            Lifecycle::Live(o) => {
                assert_eq!(o.name(), "a");
                "live"
            }
            Lifecycle::Deleting(d) => {
                assert_eq!(d.object().name(), "a");
                d.release(&mut plan);
                "deleting"
            }
            Lifecycle::Gone(key) => {
                assert_eq!(key, "ns/a");
                "gone"
            }
            Lifecycle::Unselected(key) => {
                assert_eq!(key, "ns/a");
                "unselected"
            }
        };
        (name, plan.writes().to_vec())
    }

    fn removes_ours(writes: &[wit::Write]) -> bool {
        matches!(writes, [wit::Write::RemoveFinalizer(f)] if f.finalizer == FIN && f.target.name == "a")
    }

    #[test]
    fn live_deleting_and_gone_are_told_apart() {
        let m = manifest(Some(FIN), true);
        let a = || Obj::new("apps", "ns", "a");
        assert_eq!(run(&m, vec![a()]), ("live", vec![]));
        assert_eq!(run(&m, vec![Obj::new("apps", "ns", "b")]), ("gone", vec![]));
        let (name, writes) = run(
            &m,
            vec![a()
                .deleting("2026-01-01T00:00:00Z")
                .set_list(FINALIZERS, ["other", FIN])],
        );
        assert_eq!(name, "deleting");
        assert!(removes_ours(&writes), "{writes:?}");
    }

    #[test]
    fn gone_and_unselected_come_from_the_request_s_presence_not_the_snapshot() {
        let m = manifest(Some(FIN), true);
        let data = World::new(&m)
            .with(Obj::new("apps", "ns", "a"))
            .snapshot()
            .expect("declared names");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let request = |p| Request::object("apps", "ns/a").presence(p);
        // Even a snapshot holding the object does not override the server.
        assert!(matches!(
            snap.lifecycle(&request(Presence::Unselected)),
            Lifecycle::Unselected("ns/a")
        ));
        assert!(matches!(
            snap.lifecycle(&request(Presence::Gone)),
            Lifecycle::Gone("ns/a")
        ));
        assert!(matches!(
            snap.lifecycle(&request(Presence::Present)),
            Lifecycle::Live(_)
        ));
    }

    #[test]
    fn release_plans_nothing_once_our_finalizer_is_gone_or_none_is_declared() {
        let deleting = || Obj::new("apps", "ns", "a").deleting("2026-01-01T00:00:00Z");
        let m = manifest(Some(FIN), true);
        assert_eq!(
            run(&m, vec![deleting().set_list(FINALIZERS, ["other"])]),
            ("deleting", vec![])
        );
        assert_eq!(
            run(&manifest(None, true), vec![deleting()]),
            ("deleting", vec![])
        );
    }

    #[test]
    fn delete_then_release_deletes_the_owned_first_and_releases_once_none_is_left() {
        let mut m = manifest(Some(FIN), true);
        m.watches
            .push(Watch::new("children", GroupVersionKind::core("ConfigMap")));
        let deleting = Obj::new("apps", "ns", "a")
            .deleting("2026-01-01T00:00:00Z")
            .set_list(FINALIZERS, [FIN]);
        let schema = Schema::new(&m).expect("unique names");
        let children = schema.watch("children").expect("declared").id();
        let request = Request::object("apps", "ns/a");
        let writes = |objects: Vec<Obj>| {
            let data = World::new(&m)
                .with_all(objects)
                .snapshot()
                .expect("declared names");
            let snap = Snapshot::new(&schema, &data).expect("valid");
            let mut plan = Plan::new();
            match snap.lifecycle(&request) {
                Lifecycle::Deleting(d) => {
                    d.delete_then_release(snap.objects(children), &mut plan);
                }
                _ => panic!("not deleting"),
            }
            plan.writes().to_vec()
        };
        let child = Obj::new("children", "ns", "a");
        let with_child = writes(vec![deleting.clone(), child]);
        assert!(
            matches!(with_child.as_slice(), [wit::Write::Delete(t)] if t.name == "a" && t.kind == "ConfigMap"),
            "{with_child:?}"
        );
        assert!(removes_ours(&writes(vec![deleting])));
    }

    #[test]
    fn without_the_finalizers_projected_release_assumes_it_is_held() {
        let (name, writes) = run(
            &manifest(Some(FIN), false),
            vec![Obj::new("apps", "ns", "a").deleting("2026-01-01T00:00:00Z")],
        );
        assert_eq!(name, "deleting");
        assert!(removes_ours(&writes), "{writes:?}");
    }
}
