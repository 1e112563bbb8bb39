//! Per-group reductions kept incrementally: adding or removing one
//! contribution costs O(log groups) (O(log values) more for min, max and
//! set, which keep a multiset of each group's values), and the reduced
//! groups come out sorted by key. It never calls a guest and never decides
//! which contributions exist: the caller adds what `map-objects` returned
//! and removes exactly what it added before.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::guest::aggregate::{Group, Reduction};

#[derive(Debug, Default)]
struct GroupState {
    /// Contributions held.
    count: u64,
    /// Exact sum of their values (no overflow: |value| < 2^63 and fewer
    /// than 2^64 contributions).
    sum: i128,
    /// Value → how many contributions hold it (min, max and set only).
    values: BTreeMap<i64, u64>,
}

/// Every group's reduced state for one reduction.
#[derive(Debug)]
pub struct Reductions {
    reduction: Reduction,
    groups: BTreeMap<Arc<str>, GroupState>,
    /// Groups added to or removed from since [`Reductions::take_touched`].
    touched: BTreeSet<Arc<str>>,
}

impl Reductions {
    /// No groups yet.
    pub fn new(reduction: Reduction) -> Self {
        Reductions {
            reduction,
            groups: BTreeMap::new(),
            touched: BTreeSet::new(),
        }
    }

    fn keeps_values(&self) -> bool {
        matches!(
            self.reduction,
            Reduction::Min | Reduction::Max | Reduction::Set
        )
    }

    /// Folds `value` into `group`; returns the group key as stored (shared
    /// with the caller's cache, so a key is allocated once per group).
    pub fn add(&mut self, group: &str, value: i64) -> Arc<str> {
        let keeps = self.keeps_values();
        let key = match self.groups.get_key_value(group) {
            Some((k, _)) => k.clone(),
            None => Arc::from(group),
        };
        self.touched.insert(key.clone());
        let g = self.groups.entry(key.clone()).or_default();
        g.count += 1;
        g.sum += i128::from(value);
        if keeps {
            *g.values.entry(value).or_default() += 1;
        }
        key
    }

    /// Takes back one earlier [`Reductions::add`] of `value` to `group`; a
    /// group left without contributions is dropped. A contribution never
    /// added is ignored.
    pub fn remove(&mut self, group: &str, value: i64) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        if self.reduction != Reduction::Sum && self.reduction != Reduction::Count {
            match g.values.get_mut(&value) {
                Some(n) if *n > 1 => *n -= 1,
                Some(_) => {
                    g.values.remove(&value);
                }
                None => return,
            }
        }
        g.count = g.count.saturating_sub(1);
        g.sum -= i128::from(value);
        if g.count == 0 {
            if let Some((key, _)) = self.groups.remove_entry(group) {
                self.touched.insert(key);
            }
        } else if let Some((key, _)) = self.groups.get_key_value(group) {
            self.touched.insert(key.clone());
        }
    }

    /// The groups added to or removed from since the last call, sorted
    /// (some may now be empty, or reduce to what they did before).
    pub fn take_touched(&mut self) -> BTreeSet<Arc<str>> {
        std::mem::take(&mut self.touched)
    }

    /// Marks `keys` touched again (a render of them failed).
    pub fn touch(&mut self, keys: impl IntoIterator<Item = Arc<str>>) {
        self.touched.extend(keys);
    }

    /// Group `key` reduced; `None` when it has no contributions.
    pub fn group(&self, key: &str) -> Option<Group> {
        self.groups
            .get_key_value(key)
            .map(|(k, g)| self.reduce(k, g))
    }

    /// Number of non-empty groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there are no groups.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Every non-empty group, reduced, sorted by key (the contract's
    /// `group` records).
    pub fn groups(&self) -> Vec<Group> {
        self.groups
            .iter()
            .map(|(key, g)| self.reduce(key, g))
            .collect()
    }

    fn reduce(&self, key: &str, g: &GroupState) -> Group {
        let mut members = Vec::new();
        let value = match self.reduction {
            Reduction::Sum => clamp(g.sum),
            Reduction::Count => i64::try_from(g.count).unwrap_or(i64::MAX),
            Reduction::Min => g.values.keys().next().copied().unwrap_or(0),
            Reduction::Max => g.values.keys().next_back().copied().unwrap_or(0),
            Reduction::Set => {
                members = g.values.keys().copied().collect();
                i64::try_from(members.len()).unwrap_or(i64::MAX)
            }
        };
        Group {
            key: key.to_string(),
            value,
            count: g.count,
            members,
        }
    }
}

/// An exact sum, clamped to the s64 range.
fn clamp(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The groups recomputed from scratch over `contributions`, without
    /// `Reductions`: what the contract says each reduction is.
    fn from_scratch(reduction: Reduction, contributions: &[(String, i64)]) -> Vec<Group> {
        let mut by: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (g, v) in contributions {
            by.entry(g).or_default().push(*v);
        }
        by.into_iter()
            .map(|(key, mut values)| {
                values.sort_unstable();
                let count = values.len() as u64;
                let exact: i128 = values.iter().map(|&v| i128::from(v)).sum();
                let mut distinct = values.clone();
                distinct.dedup();
                let (value, members) = match reduction {
                    Reduction::Sum => (clamp(exact), vec![]),
                    Reduction::Count => (values.len() as i64, vec![]),
                    Reduction::Min => (values[0], vec![]),
                    Reduction::Max => (values[values.len() - 1], vec![]),
                    Reduction::Set => (distinct.len() as i64, distinct),
                };
                Group {
                    key: key.to_string(),
                    value,
                    count,
                    members,
                }
            })
            .collect()
    }

    /// The records' fields, comparable.
    fn tuples(groups: Vec<Group>) -> Vec<(String, i64, u64, Vec<i64>)> {
        groups
            .into_iter()
            .map(|g| (g.key, g.value, g.count, g.members))
            .collect()
    }

    fn reduction() -> impl Strategy<Value = Reduction> {
        proptest::sample::select(vec![
            Reduction::Sum,
            Reduction::Count,
            Reduction::Min,
            Reduction::Max,
            Reduction::Set,
        ])
    }

    #[test]
    fn sums_are_exact_until_rendered_so_a_removal_undoes_saturation() {
        let mut r = Reductions::new(Reduction::Sum);
        r.add("n", i64::MAX);
        r.add("n", i64::MAX);
        assert_eq!(r.groups()[0].value, i64::MAX);
        r.remove("n", i64::MAX);
        r.add("n", -1);
        assert_eq!(r.groups()[0].value, i64::MAX - 1);
        assert_eq!(r.groups()[0].count, 2);
    }

    #[test]
    fn min_max_and_set_keep_every_value_so_removing_the_extreme_reveals_the_next() {
        for (reduction, want) in [
            (Reduction::Min, (1, 3)),
            (Reduction::Max, (5, 3)),
            (Reduction::Set, (3, 2)),
        ] {
            let mut r = Reductions::new(reduction);
            for v in [1, 3, 5, 3] {
                r.add("g", v);
            }
            let extreme = if reduction == Reduction::Max { 5 } else { 1 };
            let before = r.groups()[0].value;
            r.remove("g", extreme);
            assert_eq!((before, r.groups()[0].value), want, "{reduction:?}");
        }
        let mut r = Reductions::new(Reduction::Set);
        for v in [4, 2, 4] {
            r.add("g", v);
        }
        assert_eq!(r.groups()[0].members, [2, 4]);
        r.remove("g", 4);
        assert_eq!(r.groups()[0].members, [2, 4]);
        r.remove("g", 4);
        assert_eq!(r.groups()[0].members, [2]);
    }

    #[test]
    fn a_group_left_empty_is_gone_and_unknown_removals_change_nothing() {
        let mut r = Reductions::new(Reduction::Max);
        r.add("a", 1);
        r.remove("a", 2);
        r.remove("b", 1);
        assert_eq!(r.len(), 1);
        r.remove("a", 1);
        assert!(r.is_empty());
        assert!(r.groups().is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any interleaving of adds and removals of earlier adds leaves the
        /// groups a from-scratch fold of the survivors gives.
        #[test]
        fn incremental_groups_equal_a_fold_of_the_surviving_contributions(
            reduction in reduction(),
            ops in proptest::collection::vec(
                (0..4u8, proptest::sample::select(vec!["a", "b", "c"]),
                 prop_oneof![Just(i64::MAX), Just(i64::MIN), -5..5i64], any::<prop::sample::Index>()),
                0..60,
            ),
        ) {
            let mut r = Reductions::new(reduction);
            let mut live: Vec<(String, i64)> = Vec::new();
            let mut before: Vec<(String, i64, u64, Vec<i64>)> = Vec::new();
            for (i, (op, group, value, pick)) in ops.into_iter().enumerate() {
                if op == 0 && !live.is_empty() {
                    let (g, v) = live.remove(pick.index(live.len()));
                    r.remove(&g, v);
                } else {
                    r.add(group, value);
                    live.push((group.to_string(), value));
                }
                // Every few steps: a group not touched since the last look
                // reduces as it did then (what an entry-wise render relies
                // on), and each touched group is looked up alone.
                if i % 3 == 0 {
                    let touched = r.take_touched();
                    let now = tuples(r.groups());
                    for g in &before {
                        if !touched.contains(g.0.as_str()) {
                            prop_assert!(now.contains(g), "{:?} changed untouched", g);
                        }
                    }
                    for k in &touched {
                        let alone = r.group(k).map(|g| tuples(vec![g]));
                        let listed: Vec<_> = now.iter().filter(|g| g.0 == **k).cloned().collect();
                        prop_assert_eq!(alone.unwrap_or_default(), listed);
                    }
                    let keys: Vec<&str> = now.iter().map(|g| g.0.as_str()).collect();
                    for g in &before {
                        if !keys.contains(&g.0.as_str()) {
                            prop_assert!(touched.contains(g.0.as_str()), "{} vanished untouched", g.0);
                        }
                    }
                    before = now;
                }
            }
            prop_assert_eq!(tuples(r.groups()), tuples(from_scratch(reduction, &live)));
        }
    }
}
