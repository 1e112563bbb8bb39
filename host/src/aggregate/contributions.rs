//! What one object contributed to the reductions, as the aggregate keeps
//! it for every object that contributes ([`Contributions`]): one (group,
//! value) pair, the usual case, held inline; more in one allocation of
//! exactly their size. Owns only that layout: it never reduces (`reduce`
//! does) and never calls a guest.

use std::sync::Arc;

/// One object's (group, value) pairs, as added to the reductions; never
/// empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Contributions {
    /// The one pair (24 bytes with the tag: no allocation).
    One((Arc<str>, i64)),
    /// Two pairs or more.
    Many(Box<[(Arc<str>, i64)]>),
}

impl Contributions {
    /// The pairs of `pairs`, in order; None when there are none.
    pub(super) fn new(mut pairs: Vec<(Arc<str>, i64)>) -> Option<Self> {
        match pairs.len() {
            0 => None,
            1 => pairs.pop().map(Contributions::One),
            _ => Some(Contributions::Many(pairs.into_boxed_slice())),
        }
    }

    /// The pairs, in the order given.
    pub(super) fn pairs(&self) -> &[(Arc<str>, i64)] {
        match self {
            Contributions::One(pair) => std::slice::from_ref(pair),
            Contributions::Many(pairs) => pairs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: i64) -> Vec<(Arc<str>, i64)> {
        (0..n).map(|i| (Arc::from(format!("g{i}")), i)).collect()
    }

    #[test]
    fn pairs_read_back_in_order_and_none_is_no_contribution() {
        assert_eq!(Contributions::new(Vec::new()), None);
        for n in 1..4 {
            let kept = Contributions::new(pairs(n));
            assert_eq!(kept.as_ref().map(Contributions::pairs), Some(&pairs(n)[..]));
            assert_eq!(matches!(kept, Some(Contributions::One(_))), n == 1);
        }
    }

    #[test]
    fn one_pair_costs_no_more_than_the_vec_it_replaces() {
        assert_eq!(
            std::mem::size_of::<Contributions>(),
            std::mem::size_of::<Vec<(Arc<str>, i64)>>()
        );
    }
}
