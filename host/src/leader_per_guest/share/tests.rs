//! The spreading rule alone, and a model of replicas applying it to leases
//! over random join / leave / kill sequences.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn guests(n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("g{i}")).collect()
}

#[test]
fn fair_share_is_the_ceiling_with_at_least_one_replica() {
    assert_eq!(fair_share(6, 3), 2);
    assert_eq!(fair_share(7, 3), 3);
    assert_eq!(fair_share(2, 3), 1);
    assert_eq!(fair_share(0, 3), 0);
    assert_eq!(fair_share(5, 0), 5);
}

#[test]
fn a_surplus_seen_for_fewer_than_the_settle_rounds_releases_nothing() {
    let view = View {
        guests: guests(6),
        live_replicas: 3,
        led: guests(6),
        ..View::default()
    };
    let mut h = Hysteresis::default();
    for _ in 1..SETTLE_ROUNDS {
        assert_eq!(decide("a", &view, &mut h), Decision::default());
    }
    // One round where the others are not seen resets the count.
    let alone = View {
        live_replicas: 1,
        ..view.clone()
    };
    assert_eq!(decide("a", &alone, &mut h), Decision::default());
    for _ in 1..SETTLE_ROUNDS {
        assert!(decide("a", &view, &mut h).release.is_empty());
    }
    let d = decide("a", &view, &mut h);
    assert_eq!(d.release.len(), 4, "releases down to its share: {d:?}");
}

#[test]
fn a_replica_below_its_share_stands_for_free_guests_up_to_the_share() {
    let view = View {
        guests: guests(6),
        live_replicas: 2,
        led: set(&["g0"]),
        candidates: set(&["g1"]),
        free: set(&["g1", "g2", "g3", "g4"]),
        ..View::default()
    };
    let d = decide("b", &view, &mut Hysteresis::default());
    assert_eq!(d.acquire.len(), 1, "{d:?}");
    assert!(d.release.is_empty() && d.withdraw.is_empty());
    assert!(["g2", "g3", "g4"].contains(&d.acquire[0].as_str()));
}

#[test]
fn replicas_with_the_same_view_stand_for_different_free_guests() {
    let live = set(&["r-a", "r-b", "r-c"]);
    for n in [3, 6, 12, 13, 40] {
        let all = guests(n);
        let share = fair_share(n, 3);
        let mut taken: BTreeSet<String> = BTreeSet::new();
        for id in &live {
            let view = View {
                guests: all.clone(),
                live_replicas: 3,
                live: live.clone(),
                free: all.clone(),
                ..View::default()
            };
            let d = decide(id, &view, &mut Hysteresis::default());
            assert!(d.acquire.len() <= share, "{n} guests: {id}: {d:?}");
            for g in d.acquire {
                assert!(taken.insert(g.clone()), "{n} guests: {g} wanted twice");
            }
        }
        assert_eq!(taken, all, "{n} guests: every one stood for at once");
        // The assignment covers every guest, none twice, none above the share.
        let mut every = BTreeSet::new();
        for id in &live {
            let mine = assigned(id, &all, &live, &BTreeMap::new());
            assert!(mine.len() <= share);
            assert!(mine.iter().all(|g| every.insert(g.clone())));
        }
        assert_eq!(every, all);
    }
}

#[test]
fn a_dead_replicas_free_guests_are_assigned_to_the_replicas_with_room() {
    // r-a and r-b hold 4 each; the dead one's 4 are free, and r-c (new)
    // holds nothing: they are all r-c's, whatever the hash prefers.
    let all = guests(12);
    let live = set(&["r-a", "r-b", "r-c"]);
    let held: BTreeMap<String, String> = all
        .iter()
        .take(8)
        .enumerate()
        .map(|(i, g)| (g.clone(), if i < 4 { "r-a" } else { "r-b" }.to_string()))
        .collect();
    let free: BTreeSet<String> = all.iter().skip(8).cloned().collect();
    assert_eq!(assigned("r-c", &all, &live, &held), free);
    let view = View {
        guests: all.clone(),
        live_replicas: 3,
        live: live.clone(),
        held: held.clone(),
        free: free.clone(),
        ..View::default()
    };
    let d = decide("r-c", &view, &mut Hysteresis::default());
    assert_eq!(d.acquire.iter().cloned().collect::<BTreeSet<_>>(), free);
    for id in ["r-a", "r-b"] {
        let led = held
            .iter()
            .filter(|(_, h)| *h == id)
            .map(|(g, _)| g.clone())
            .collect();
        let view = View {
            led,
            ..view.clone()
        };
        let d = decide(id, &view, &mut Hysteresis::default());
        assert!(d.acquire.is_empty(), "{id} is at its share: {d:?}");
    }
}

#[test]
fn a_candidacy_for_a_guest_held_elsewhere_or_gone_is_withdrawn() {
    let view = View {
        guests: set(&["g0", "g1"]),
        live_replicas: 1,
        led: set(&["old"]),
        candidates: set(&["g0", "gone"]),
        free: set(&["g1"]),
        ..View::default()
    };
    let d = decide("a", &view, &mut Hysteresis::default());
    assert_eq!(d.withdraw, vec!["g0".to_string(), "gone".to_string()]);
    assert_eq!(d.release, vec!["old".to_string()]);
    assert_eq!(d.acquire, vec!["g1".to_string()]);
}

// ---------------------------------------------------------------------------
// A model: leases with holders that expire unless renewed, replicas that
// apply the rule every round (in a random order), and events between rounds.

/// Rounds a lease (or a presence) lasts without a renewal.
const EXPIRY: u32 = 4;

#[derive(Debug, Clone)]
struct Lease {
    holder: String,
    until: u32,
}

#[derive(Debug, Default)]
struct SimReplica {
    alive: bool,
    hysteresis: Hysteresis,
    candidates: BTreeSet<String>,
    /// Presence valid until this round (renewed while alive).
    presence_until: u32,
}

#[derive(Debug, Default)]
struct World {
    round: u32,
    guests: BTreeSet<String>,
    leases: BTreeMap<String, Lease>,
    replicas: BTreeMap<String, SimReplica>,
    /// Every change of a guest's holder: (round, guest, new holder).
    handovers: Vec<(u32, String, Option<String>)>,
    /// A presence Lease of no replica, valid until this round: a replica
    /// seen for one round and gone.
    ghost_until: u32,
}

#[derive(Debug, Clone)]
enum Event {
    Join,
    /// SIGTERM: releases its leases and its presence.
    Leave(usize),
    /// SIGKILL: its leases and presence expire on their own.
    Kill(usize),
    /// Rounds with no event.
    Rounds(u32),
    /// A presence seen for one round only (a replica that started and
    /// died at once, or a stale read).
    Ghost,
}

impl World {
    fn new(guests: usize) -> Self {
        World {
            guests: super::tests::guests(guests),
            ..World::default()
        }
    }

    fn holder(&self, guest: &str) -> Option<&str> {
        self.leases
            .get(guest)
            .filter(|l| l.until > self.round && !l.holder.is_empty())
            .map(|l| l.holder.as_str())
    }

    fn set_holder(&mut self, guest: &str, holder: Option<&str>) {
        self.handovers
            .push((self.round, guest.to_string(), holder.map(String::from)));
        match holder {
            Some(h) => {
                self.leases.insert(
                    guest.to_string(),
                    Lease {
                        holder: h.to_string(),
                        until: self.round + EXPIRY,
                    },
                );
            }
            None => {
                self.leases.remove(guest);
            }
        }
    }

    fn alive(&self) -> Vec<String> {
        self.replicas
            .iter()
            .filter(|(_, r)| r.alive)
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn apply(&mut self, event: &Event, order: &mut impl FnMut(usize) -> usize) {
        match event {
            Event::Join => {
                let id = format!("r{}", self.replicas.len());
                self.replicas.insert(
                    id,
                    SimReplica {
                        alive: true,
                        presence_until: self.round + EXPIRY,
                        ..SimReplica::default()
                    },
                );
            }
            Event::Leave(i) | Event::Kill(i) => {
                let alive = self.alive();
                if alive.is_empty() {
                    return;
                }
                let id = alive[i % alive.len()].clone();
                let graceful = matches!(event, Event::Leave(_));
                if let Some(r) = self.replicas.get_mut(&id) {
                    r.alive = false;
                    if graceful {
                        r.presence_until = 0;
                    }
                }
                if graceful {
                    let held: Vec<String> = self
                        .guests
                        .iter()
                        .filter(|g| self.holder(g) == Some(&id))
                        .cloned()
                        .collect();
                    for g in held {
                        self.set_holder(&g, None);
                    }
                }
            }
            Event::Ghost => self.ghost_until = self.round + 2,
            Event::Rounds(n) => {
                for _ in 0..*n {
                    self.step(order);
                }
            }
        }
    }

    /// One round: every live replica, in a random order, looks, decides,
    /// and acts; its candidacies acquire what is free; it renews.
    fn step(&mut self, order: &mut impl FnMut(usize) -> usize) {
        self.round += 1;
        let mut alive = self.alive();
        // A random permutation.
        for i in (1..alive.len()).rev() {
            alive.swap(i, order(i + 1));
        }
        let live_ids: BTreeSet<String> = self
            .replicas
            .iter()
            .filter(|(_, r)| r.presence_until > self.round)
            .map(|(id, _)| id.clone())
            .collect();
        for id in alive {
            let live = self
                .replicas
                .values()
                .filter(|r| r.presence_until > self.round)
                .count()
                .max(1)
                + usize::from(self.ghost_until > self.round);
            let led: BTreeSet<String> = self
                .guests
                .iter()
                .filter(|g| self.holder(g) == Some(&id))
                .cloned()
                .collect();
            let free: BTreeSet<String> = self
                .guests
                .iter()
                .filter(|g| self.holder(g).is_none())
                .cloned()
                .collect();
            let held: BTreeMap<String, String> = self
                .guests
                .iter()
                .filter_map(|g| Some((g.clone(), self.holder(g)?.to_string())))
                .collect();
            let Some(r) = self.replicas.get_mut(&id) else {
                continue;
            };
            let view = View {
                guests: self.guests.clone(),
                live_replicas: live,
                live: live_ids.clone(),
                held,
                led,
                candidates: r.candidates.clone(),
                free,
            };
            let d = decide(&id, &view, &mut r.hysteresis);
            for g in &d.withdraw {
                r.candidates.remove(g);
            }
            r.candidates.extend(d.acquire.iter().cloned());
            r.presence_until = self.round + EXPIRY;
            let candidates = r.candidates.clone();
            for g in &d.release {
                self.set_holder(g, None);
            }
            for g in candidates {
                if self.holder(&g).is_none() {
                    self.set_holder(&g, Some(&id));
                    if let Some(r) = self.replicas.get_mut(&id) {
                        r.candidates.remove(&g);
                    }
                }
            }
            let round = self.round;
            for lease in self.leases.values_mut() {
                if lease.holder == id && lease.until > round {
                    lease.until = round + EXPIRY;
                }
            }
        }
    }

    /// Every guest led by a live replica, none by more than its share.
    fn spread(&self) -> Result<(), String> {
        let alive = self.alive();
        if alive.is_empty() {
            return Ok(());
        }
        let share = fair_share(self.guests.len(), alive.len());
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for g in &self.guests {
            match self.holder(g) {
                Some(h) if alive.iter().any(|a| a == h) => *counts.entry(h).or_default() += 1,
                other => return Err(format!("{g} is held by {other:?}, not a live replica")),
            }
        }
        match counts.iter().find(|(_, n)| **n > share) {
            Some((id, n)) => Err(format!("{id} leads {n} > share {share}")),
            None => Ok(()),
        }
    }
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => Just(Event::Join),
        1 => Just(Event::Ghost),
        1 => any::<usize>().prop_map(Event::Leave),
        1 => any::<usize>().prop_map(Event::Kill),
        3 => (1u32..6).prop_map(Event::Rounds),
    ]
}

/// Rounds after the last event within which the guests must be spread:
/// a killed replica's leases and presence expire, the surplus settles and
/// is released, and the free guests are taken.
const CONVERGE_ROUNDS: u32 = EXPIRY + 2 * SETTLE_ROUNDS + 4;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After any sequence of joins, leaves and kills, once nothing happens
    /// for [`CONVERGE_ROUNDS`]: every guest is led by exactly one live
    /// replica (a dead replica's guests moved), none leads more than its
    /// fair share, and nothing moves afterwards (no ping-pong).
    #[test]
    fn guests_spread_over_live_replicas_and_then_stay_put(
        n_guests in 1usize..10,
        first in 1usize..4,
        events in proptest::collection::vec(event(), 0..25),
        seed in any::<u64>(),
    ) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut order = move |n: usize| rng.usize(..n);
        let mut world = World::new(n_guests);
        for _ in 0..first {
            world.apply(&Event::Join, &mut order);
        }
        for e in &events {
            world.apply(e, &mut order);
        }
        if world.alive().is_empty() {
            world.apply(&Event::Join, &mut order);
        }
        world.apply(&Event::Rounds(CONVERGE_ROUNDS), &mut order);
        prop_assert!(world.spread().is_ok(), "{:?} after {events:?}: {world:#?}", world.spread());
        let settled = world.handovers.len();
        world.apply(&Event::Rounds(5 * SETTLE_ROUNDS), &mut order);
        prop_assert_eq!(world.handovers.len(), settled, "ping-pong after settling: {:?}", &world.handovers[settled..]);
    }

    /// A killed replica's guests are led again by the survivors within the
    /// lease expiry and a few rounds, while nothing else happens.
    #[test]
    fn a_killed_replicas_guests_move_within_the_expiry(
        n_guests in 1usize..10,
        replicas in 2usize..5,
        victim in any::<usize>(),
        seed in any::<u64>(),
    ) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut order = move |n: usize| rng.usize(..n);
        let mut world = World::new(n_guests);
        for _ in 0..replicas {
            world.apply(&Event::Join, &mut order);
        }
        world.apply(&Event::Rounds(CONVERGE_ROUNDS), &mut order);
        prop_assert!(world.spread().is_ok());
        world.apply(&Event::Kill(victim), &mut order);
        // Expiry, then one round to see it, one to stand, one to take; the
        // survivors' share only grows, so no surplus has to settle.
        world.apply(&Event::Rounds(EXPIRY + 2), &mut order);
        prop_assert!(world.spread().is_ok(), "{:?}: {world:#?}", world.spread());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Hysteresis: once the guests are spread, a replica seen for a single
    /// round (which lowers everyone's share for that round) moves no guest.
    #[test]
    fn a_replica_seen_for_one_round_moves_no_guest(
        n_guests in 1usize..10,
        replicas in 1usize..4,
        seed in any::<u64>(),
    ) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut order = move |n: usize| rng.usize(..n);
        let mut world = World::new(n_guests);
        for _ in 0..replicas {
            world.apply(&Event::Join, &mut order);
        }
        world.apply(&Event::Rounds(CONVERGE_ROUNDS), &mut order);
        prop_assert!(world.spread().is_ok());
        let settled = world.handovers.len();
        world.apply(&Event::Ghost, &mut order);
        world.apply(&Event::Rounds(3 * SETTLE_ROUNDS), &mut order);
        prop_assert_eq!(world.handovers.len(), settled, "moved: {:?}", &world.handovers[settled..]);
    }
}
