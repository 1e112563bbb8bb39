//! The spreading rule: which guests one replica should try to lead, which
//! it should give up, decided from what the Leases show.
//!
//! Owns the arithmetic — a fair share of `ceil(guests / live replicas)`,
//! hysteresis before giving up a surplus, and a per-replica preference
//! order (rendezvous hashing) so replicas racing for free guests mostly
//! want different ones. It is a pure function of a [`View`] and a little
//! [`Hysteresis`] state: it never talks to the API server, never starts
//! or stops an elector, and never reads a clock.

use std::collections::BTreeSet;

/// How many consecutive rounds a replica must see itself leading more than
/// its share before it releases the surplus: a replica seen live for one
/// round (or missed for one) moves no guest.
pub const SETTLE_ROUNDS: u32 = 3;

/// What one replica sees in one round.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Every guest this host runs (the same on every replica).
    pub guests: BTreeSet<String>,
    /// Replicas whose presence Lease is valid, this one included (at least 1).
    pub live_replicas: usize,
    /// Their identities, as far as known (this one included; empty: only
    /// their number is known).
    pub live: BTreeSet<String>,
    /// Who holds each guest held validly, as last listed.
    pub held: std::collections::BTreeMap<String, String>,
    /// Guests whose Lease this replica holds.
    pub led: BTreeSet<String>,
    /// Guests this replica is a candidate for (an elector running, not leading).
    pub candidates: BTreeSet<String>,
    /// Guests whose Lease is free: absent, released, or expired as observed.
    pub free: BTreeSet<String>,
}

/// What one replica should do this round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Guests to stop leading (and release, once their work has stopped).
    pub release: Vec<String>,
    /// Free guests to become a candidate for.
    pub acquire: Vec<String>,
    /// Candidacies to end: their guest is gone or validly held by another.
    pub withdraw: Vec<String>,
}

/// The state the rule keeps between rounds.
#[derive(Debug, Clone, Default)]
pub struct Hysteresis {
    /// Consecutive rounds seen leading more than the share.
    surplus_rounds: u32,
    /// The guests seen free in the last round.
    free_before: BTreeSet<String>,
}

/// `ceil(guests / live)`, with at least one live replica (this one).
pub fn fair_share(guests: usize, live: usize) -> usize {
    guests.div_ceil(live.max(1))
}

/// This replica's preference for a guest: higher is preferred. Rendezvous
/// hashing (FNV-1a of identity and guest), so replicas' orders differ and
/// racing replicas mostly go for different free guests.
pub fn preference(identity: &str, guest: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in identity.bytes().chain([0]).chain(guest.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The guests assigned to `identity`: every replica with the same view of
/// the guests, the live replicas and who holds what computes the same
/// assignment, so replicas standing for free guests at once go for
/// different ones. Each live replica gets `guests / live` of them, the
/// first `guests % live` (by identity) one more. A guest stays with the
/// live replica holding it while that one has room; the others, in the
/// order of their hash, go to the live replica preferring them most that
/// has room (rendezvous hashing with bounded loads: a replica joining or
/// leaving moves few guests).
pub fn assigned(
    identity: &str,
    guests: &BTreeSet<String>,
    live: &BTreeSet<String>,
    held: &std::collections::BTreeMap<String, String>,
) -> BTreeSet<String> {
    let Some(n) = std::num::NonZeroUsize::new(live.len()) else {
        return BTreeSet::new();
    };
    let (base, extra) = (guests.len() / n, guests.len() % n);
    let mut room: std::collections::BTreeMap<&str, usize> = live
        .iter()
        .enumerate()
        .map(|(i, r)| (r.as_str(), base + usize::from(i < extra)))
        .collect();
    let mut order: Vec<&String> = guests.iter().collect();
    order.sort_by_key(|g| (preference("", g), *g));
    let mut to: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for g in &order {
        if let Some(holder) = held.get(*g) {
            if let Some(n) = room.get_mut(holder.as_str()).filter(|n| **n > 0) {
                *n -= 1;
                to.insert(g.as_str(), holder.as_str());
            }
        }
    }
    for g in &order {
        if to.contains_key(g.as_str()) {
            continue;
        }
        let mut replicas: Vec<&String> = live.iter().collect();
        replicas.sort_by_key(|r| std::cmp::Reverse(preference(r, g)));
        let Some(r) = replicas
            .into_iter()
            .find(|r| room.get(r.as_str()).is_some_and(|n| *n > 0))
        else {
            continue;
        };
        if let Some(n) = room.get_mut(r.as_str()) {
            *n -= 1;
        }
        to.insert(g.as_str(), r.as_str());
    }
    to.into_iter()
        .filter(|(_, r)| *r == identity)
        .map(|(g, _)| g.to_string())
        .collect()
}

/// The rule, for the replica `identity`:
/// - a guest that left the host, led or candidate, is released or withdrawn;
/// - candidacies for guests no longer free are withdrawn;
/// - leading more than the share for [`SETTLE_ROUNDS`] rounds in a row
///   releases the surplus, least preferred first;
/// - leading and standing for fewer than the share becomes a candidate for
///   free guests, up to the share: those [`assigned`] to it at once, the
///   others once they were free in the last round too (their replica had
///   its chance: views differ), each most preferred first. Without the
///   live replicas' identities, any free guest at once.
pub fn decide(identity: &str, view: &View, hysteresis: &mut Hysteresis) -> Decision {
    let free_before = std::mem::replace(&mut hysteresis.free_before, view.free.clone());
    let mut decision = Decision::default();
    let share = fair_share(view.guests.len(), view.live_replicas);
    let led: Vec<&String> = view
        .led
        .iter()
        .filter(|g| {
            let stays = view.guests.contains(*g);
            if !stays {
                decision.release.push((*g).clone());
            }
            stays
        })
        .collect();
    let candidates = view
        .candidates
        .iter()
        .filter(|g| {
            let stays = view.guests.contains(*g) && view.free.contains(*g);
            if !stays {
                decision.withdraw.push((*g).clone());
            }
            stays
        })
        .count();
    if led.len() > share {
        hysteresis.surplus_rounds = hysteresis.surplus_rounds.saturating_add(1);
        if hysteresis.surplus_rounds >= SETTLE_ROUNDS {
            hysteresis.surplus_rounds = 0;
            let mut by_preference = led.clone();
            by_preference.sort_by_key(|g| preference(identity, g));
            let surplus = led.len() - share;
            decision
                .release
                .extend(by_preference.into_iter().take(surplus).cloned());
        }
        return decision;
    }
    hysteresis.surplus_rounds = 0;
    let gap = share.saturating_sub(led.len() + candidates);
    if gap > 0 {
        let mut free: Vec<&String> = view
            .free
            .iter()
            .filter(|g| view.guests.contains(*g))
            .filter(|g| !view.led.contains(*g) && !view.candidates.contains(*g))
            .collect();
        if view.live.contains(identity) {
            let mine = assigned(identity, &view.guests, &view.live, &view.held);
            free.retain(|g| mine.contains(*g) || free_before.contains(*g));
            free.sort_by_key(|g| {
                (
                    !mine.contains(*g),
                    std::cmp::Reverse(preference(identity, g)),
                )
            });
        } else {
            free.sort_by_key(|g| std::cmp::Reverse(preference(identity, g)));
        }
        decision.acquire = free.into_iter().take(gap).cloned().collect();
    }
    decision
}

#[cfg(test)]
mod tests;
