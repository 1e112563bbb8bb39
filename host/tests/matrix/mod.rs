//! The controller-pattern matrix (issue 21): every guest shape the host must
//! be correct for, driven through every event a controller meets, each
//! cell checking the same invariants.
//!
//! Shapes ([`shapes`]), each a hand-written `.wat` guest on one embedded
//! API server: an aggregate; per-object writing another kind (a child it
//! controls, finalizer, explicit delete); per-object writing its own status
//! (finalizer); per-object updating the very objects it watches,
//! cluster-wide and namespaced; two guests sharing one informer. Events
//! ([`Step`]): create, spec edit, label edit, someone else's status edit, a
//! person's edit and deletion of what the guest wrote, delete with and
//! without finalizer, delete before the finalizer lands, host restart, host
//! restart in the middle of a deletion, resyncs. After every step
//! ([`Lab::step`]): converged (read back with the kube client: every
//! primary the person left has what the guest writes, every other one is
//! gone and stays gone, no child names a gone owner), a write only when
//! something changed (a step that changes nothing the guest wants costs no
//! write, even over resyncs, and a converged host stays quiet), explicit
//! deletes sent, no write war and no write held back. [`random`] runs a
//! seeded random interleaving of the same steps.
//!
//! It never sleeps a fixed time to let something happen: it polls for a
//! condition (up to [`CONVERGE`]) and checks quiet for [`QUIET`].

mod app;
mod random;
mod shapes;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use tokio::time::Instant;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::WriteVerb;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_apiserver::{ApiServerConfig, RunningApiServer};

use crate::support::widget::{install_widget_crd, widget, widget_api};
use crate::support::*;

pub(crate) use shapes::Shape;

/// How long a converged host must then send nothing.
const QUIET: Duration = Duration::from_secs(1);
/// The resync period of every matrix host: a step is judged only after two
/// resyncs have reconciled every key again.
const RESYNC: Duration = Duration::from_millis(400);

/// One event of a controller's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A person creates the primary.
    Create(&'static str),
    /// A person edits its spec (a ConfigMap primary: a data key the guest
    /// does not write).
    EditSpec(&'static str),
    /// A person edits its labels.
    EditLabels(&'static str),
    /// Another controller sets a status field the guest does not write.
    ForeignStatus(&'static str),
    /// A person edits what the guest wrote for it (its child's data, the
    /// status field, the data key).
    EditOutput(&'static str),
    /// A person deletes what the guest wrote for it (a child).
    DeleteOutput(&'static str),
    /// A person deletes the primary (through the finalizer if the shape
    /// has one).
    Delete(&'static str),
    /// Creates the primary and deletes it at once, before the host's
    /// finalizer can land (five times, 0–40 ms apart).
    DeleteBeforeFinalizer(&'static str),
    /// The host stops (drained) and a new one starts: nothing changed, so
    /// the new host writes nothing.
    Restart,
    /// A person deletes the primary and the host stops at once, then a new
    /// host starts and finishes the deletion.
    RestartMidDeletion(&'static str),
    /// Nothing happens while the host resyncs.
    Resync,
}

/// How many writes a step may cost once converged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// Nothing the guest wants changed: not one write.
    None,
    /// Something changed: at least one write.
    Some,
    /// Depends on how the race went (still converged, no loop).
    Any,
}

/// Every guest's counters of one host, summed.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    writes: u64,
    deletes: u64,
    finalizers_removed: u64,
    skipped: u64,
    held_back: u64,
    resyncs: u64,
    errors: u64,
}

/// What the cluster shows, read with the kube client.
pub(crate) struct World {
    pub widgets: Vec<DynamicObject>,
    /// ConfigMaps of every namespace.
    pub maps: Vec<ConfigMap>,
}

impl World {
    pub fn widget(&self, name: &str) -> Option<&DynamicObject> {
        self.widgets
            .iter()
            .find(|w| w.metadata.name.as_deref() == Some(name))
    }

    pub fn map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.maps.iter().find(|m| {
            m.metadata.namespace.as_deref() == Some(namespace)
                && m.metadata.name.as_deref() == Some(name)
        })
    }

    /// ConfigMaps whose controller owner reference names a Widget that
    /// does not exist (a child created, or left, for a gone owner).
    fn orphans(&self) -> Vec<String> {
        let live: BTreeSet<&str> = self
            .widgets
            .iter()
            .filter_map(|w| w.metadata.uid.as_deref())
            .collect();
        self.maps
            .iter()
            .filter(|m| {
                m.metadata
                    .owner_references
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|r| {
                        r.kind == "Widget" && r.controller == Some(true) && !live.contains(&*r.uid)
                    })
            })
            .map(|m| format!("{:?}", m.metadata.name))
            .collect()
    }
}

/// A shape's guests on one embedded API server, with the host running them
/// and what the person has done so far.
pub(crate) struct Lab {
    pub shape: Shape,
    /// Kept running for as long as the lab.
    _server: RunningApiServer,
    pub client: Client,
    dir: tempfile::TempDir,
    host: Option<RunningHost>,
    /// Primaries that should exist.
    alive: BTreeSet<&'static str>,
    /// Primaries ever created.
    ever: BTreeSet<&'static str>,
}

impl Lab {
    pub async fn new(shape: Shape) -> Lab {
        let (server, client) =
            server_with(ApiServerConfig::default().garbage_collector(shape.gc())).await;
        install_widget_crd(&client).await;
        let dir = tempfile::tempdir().unwrap();
        let mut lab = Lab {
            shape,
            _server: server,
            client,
            dir,
            host: None,
            alive: BTreeSet::new(),
            ever: BTreeSet::new(),
        };
        lab.start_host().await;
        lab.settle(Step::Resync, Counters::default()).await;
        lab
    }

    async fn start_host(&mut self) {
        let mut paths = Vec::new();
        for (name, bytes) in self.shape.guests() {
            let path = self.dir.path().join(format!("{name}.wasm"));
            std::fs::write(&path, bytes).unwrap();
            paths.push(path);
        }
        let config = SupervisorConfig {
            guests: paths,
            namespace: HOST_NS.into(),
            controller: ControllerConfig::default().resync(RESYNC),
            runtime: RuntimeConfig::default().cache_dir(None),
            ..SupervisorConfig::default()
        };
        self.host = Some(run_host(&self.client, config, None).await);
    }

    pub async fn stop_host(&mut self) {
        if let Some(host) = self.host.take() {
            host.stop().await.unwrap();
        }
    }

    fn host(&self) -> &RunningHost {
        self.host.as_ref().expect("a host runs")
    }

    fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for g in self.host().host.controllers() {
            let m = g.metrics();
            c.writes += m.writes();
            c.deletes += m.deletes();
            c.finalizers_removed += m.written(WriteVerb::RemoveFinalizer);
            c.skipped += m.skipped();
            c.held_back += m.held_back_writes();
            c.resyncs = c.resyncs.max(m.resyncs());
            c.errors += m.errors();
        }
        c
    }

    fn idle(&self) -> bool {
        let host = self.host();
        let metrics = host.metrics.as_ref().expect("run_host");
        host.host.controllers().iter().all(|g| idle(g, metrics))
    }

    fn write_wars(&self) -> u64 {
        let text = self.host().metrics.as_ref().expect("run_host").encode();
        prom::metric(&text, "wasmctrl_write_wars_total", &[]) as u64
    }

    pub async fn world(&self) -> World {
        let widgets = widget_api(&self.client, PODS_NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let maps = Api::<ConfigMap>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        World { widgets, maps }
    }

    /// Whether the world is what the person left: every alive primary
    /// exists and has what the shape's guests write, every other one is
    /// gone, and no child names a gone owner.
    fn converged(&self, world: &World) -> Result<(), String> {
        for name in &self.ever {
            let exists = self.shape.primary_exists(world, name);
            if exists != self.alive.contains(name) {
                return Err(format!(
                    "{name}: exists {exists}, should {}",
                    self.alive.contains(name)
                ));
            }
            if !self.alive.contains(name) {
                if let Some(what) = self.shape.outputs_left(world, name) {
                    return Err(format!("{name} is gone but {what} is left"));
                }
            }
        }
        for name in &self.alive {
            self.shape
                .has_outputs(world, name)
                .map_err(|e| format!("{name}: {e}"))?;
        }
        self.shape.has_shared_outputs(world)?;
        let orphans = world.orphans();
        if !orphans.is_empty() {
            return Err(format!("children of gone owners: {orphans:?}"));
        }
        Ok(())
    }

    /// Waits until converged, every key reconciled by two resyncs since
    /// `since`, and the queues idle.
    async fn settle(&self, step: Step, since: Counters) {
        let deadline = Instant::now() + CONVERGE;
        loop {
            let world = self.world().await;
            let state = self.converged(&world);
            let c = self.counters();
            if state.is_ok() && c.resyncs >= since.resyncs + 2 && self.idle() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "{}: {step:?} never converged: {state:?}; {c:?} (before the step: {since:?})",
                    self.shape.name()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every invariant, after `step` (counters `before` it, on the same
    /// host unless the step restarted it).
    async fn check(&self, step: Step, before: Counters, writes: Writes) {
        let shape = self.shape.name();
        let wars = war_events(&self.client).await;
        assert!(
            wars.is_empty(),
            "{shape}: {step:?}: WriteWar events {wars:?}"
        );
        assert_eq!(self.write_wars(), 0, "{shape}: {step:?}: write wars");
        let now = self.counters();
        assert_eq!(now.held_back, 0, "{shape}: {step:?}: writes held back");
        assert_eq!(now.errors, 0, "{shape}: {step:?}: reconcile errors");
        let sent = now.writes - before.writes;
        match writes {
            Writes::None => assert_eq!(
                sent, 0,
                "{shape}: {step:?} changed nothing the guests want, yet {sent} writes were sent ({before:?} -> {now:?})"
            ),
            Writes::Some => assert!(
                sent > 0,
                "{shape}: {step:?} needed a write and none was sent"
            ),
            Writes::Any => {}
        }
        if !self.alive.is_empty() || self.shape == Shape::Aggregate {
            assert!(
                now.skipped > before.skipped,
                "{shape}: {step:?}: resyncs reconciled and skipped their writes"
            );
        }
        if let Step::Delete(_) = step {
            let (deletes, released) = self.shape.deletes_on_delete();
            // Gone once the server applied the patch, maybe before the host
            // counted the answer.
            eventually("the deletion's writes are counted", || async {
                let c = self.counters();
                c.finalizers_removed - before.finalizers_removed == released
                    && c.deletes - before.deletes == deletes
            })
            .await;
        }
        let quiet_from = self.counters().writes;
        stays_for(QUIET, "a converged host sends nothing", || async {
            self.counters().writes == quiet_from
        })
        .await;
        let world = self.world().await;
        if let Err(e) = self.converged(&world) {
            panic!("{shape}: {step:?}: converged, then not: {e}");
        }
    }

    /// Carries out `step` and checks every invariant after it.
    pub async fn step(&mut self, step: Step) {
        eprintln!("{}: {step:?}", self.shape.name());
        let before = self.counters();
        let writes = self.shape.writes_for(step);
        let before = if self.act(step).await {
            Counters::default()
        } else {
            before
        };
        self.settle(step, before).await;
        self.check(step, before, writes).await;
    }

    /// Carries out `step` without waiting for the host: whether it started
    /// a new host.
    pub async fn act(&mut self, step: Step) -> bool {
        let mut restarted = false;
        match step {
            Step::Create(name) => {
                self.create(name).await;
            }
            Step::EditSpec(name) => self.shape.edit_spec(&self.client, name).await,
            Step::EditLabels(name) => self.shape.edit_labels(&self.client, name).await,
            Step::ForeignStatus(name) => {
                // Another controller's forced status apply. The embedded
                // server answers one racing the host's own status write
                // with 409 (a real one retries inside); that controller
                // sends it again, as any would.
                let api = widget_api(&self.client, PODS_NS);
                let patch = Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": name}, "status": {"note": "theirs"}}));
                let params = PatchParams::apply("someone-else").force();
                let mut tries = 0;
                loop {
                    match api.patch_status(name, &params, &patch).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(e)) if e.code == 409 && tries < 10 => tries += 1,
                        Err(e) => panic!("someone else's status apply of {name}: {e}"),
                    }
                }
            }
            Step::EditOutput(name) => self.shape.edit_output(&self.client, name).await,
            Step::DeleteOutput(name) => self.shape.delete_output(&self.client, name).await,
            Step::Delete(name) => {
                self.delete(name).await;
            }
            Step::DeleteBeforeFinalizer(name) => {
                for delay in [0, 10, 20, 30, 40] {
                    self.create(name).await;
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    self.delete(name).await;
                    let api = widget_api(&self.client, PODS_NS);
                    eventually("the widget is gone", || async {
                        api.get_opt(name).await.unwrap().is_none()
                    })
                    .await;
                }
            }
            Step::Restart => {
                self.stop_host().await;
                self.start_host().await;
                restarted = true;
            }
            Step::RestartMidDeletion(name) => {
                self.delete(name).await;
                self.stop_host().await;
                self.start_host().await;
                restarted = true;
            }
            Step::Resync => {}
        }
        restarted
    }

    async fn create(&mut self, name: &'static str) {
        self.shape.create(&self.client, name).await;
        self.alive.insert(name);
        self.ever.insert(name);
    }

    async fn delete(&mut self, name: &'static str) {
        self.shape.delete(&self.client, name).await;
        self.alive.remove(name);
    }

    /// Whether `name` should exist.
    pub fn alive(&self, name: &str) -> bool {
        self.alive.contains(name)
    }

    pub async fn run(mut self, steps: &[Step]) {
        let started = Instant::now();
        for step in steps {
            self.step(*step).await;
        }
        eprintln!(
            "{}: {} steps in {:?}",
            self.shape.name(),
            steps.len(),
            started.elapsed()
        );
        self.stop_host().await;
    }
}

/// Every `WriteWar` event, in every namespace.
async fn war_events(client: &Client) -> Vec<String> {
    Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WriteWar"))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

/// Creates Widget `name`, retrying while a previous one of that name is
/// still finalizing.
async fn create_widget(client: &Client, name: &str) {
    let api = widget_api(client, PODS_NS);
    let deadline = Instant::now() + CONVERGE;
    loop {
        match api.create(&PostParams::default(), &widget(name, 0)).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("create widget {name}: {e}"),
        }
    }
}

/// Deletes `name` through `api` unless it is already gone.
async fn delete_if_there<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete {name}: {e}"),
    }
}

#[tokio::test]
async fn an_aggregate_guest_is_correct_for_every_event() {
    shapes::aggregate_cells().await;
}

#[tokio::test]
async fn a_guest_controlling_a_child_of_another_kind_is_correct_for_every_event() {
    shapes::child_cells().await;
}

#[tokio::test]
async fn a_guest_writing_its_own_status_is_correct_for_every_event() {
    shapes::status_cells().await;
}

#[tokio::test]
async fn a_guest_updating_the_kind_it_watches_cluster_wide_is_correct_for_every_event() {
    shapes::own_kind_cells(false).await;
}

#[tokio::test]
async fn a_guest_updating_the_kind_it_watches_in_one_namespace_is_correct_for_every_event() {
    shapes::own_kind_cells(true).await;
}

#[tokio::test]
async fn two_guests_sharing_an_informer_are_correct_for_every_event() {
    shapes::shared_cells().await;
}

#[tokio::test]
async fn a_seeded_random_schedule_of_edits_deletes_and_restarts_keeps_every_invariant() {
    random::schedule(Shape::Child).await;
}

#[tokio::test]
async fn a_seeded_random_schedule_keeps_every_invariant_for_an_aggregate_guest() {
    random::schedule(Shape::Aggregate).await;
}

#[tokio::test]
async fn a_seeded_random_schedule_keeps_every_invariant_for_a_guest_writing_its_own_status() {
    random::schedule(Shape::Status).await;
}

#[tokio::test]
async fn a_seeded_random_schedule_keeps_every_invariant_for_a_guest_updating_the_kind_it_watches() {
    random::schedule(Shape::OwnKind { namespaced: false }).await;
}

#[tokio::test]
async fn a_seeded_random_schedule_keeps_every_invariant_for_two_guests_sharing_an_informer() {
    random::schedule(Shape::Shared).await;
}
