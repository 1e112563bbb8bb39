//! Guest configuration given on the command line: `KEY=VALUE` pairs for one
//! guest (`wasmctrl reconcile`) and `GUEST.KEY=VALUE` pairs for several
//! (`wasmctrl run`).
//!
//! Owns parsing and the errors that name the offending pair. It never
//! decides which guest a `GUEST` prefix means (see `supervisor`).

use std::collections::BTreeMap;

/// A `--config` pair that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--config {pair:?}: expected {expected}")]
pub struct ConfigPairError {
    /// The pair as given.
    pub pair: String,
    /// The form it should have had (`KEY=VALUE`, `GUEST.KEY=VALUE`, or a
    /// non-empty key).
    pub expected: &'static str,
}

/// Configuration per guest, keyed by guest name (or file stem).
pub type GuestConfigs = BTreeMap<String, BTreeMap<String, String>>;

/// Parses `KEY=VALUE` pairs.
pub fn parse_pairs(pairs: &[String]) -> Result<BTreeMap<String, String>, ConfigPairError> {
    let mut out = BTreeMap::new();
    for p in pairs {
        let err = |expected| ConfigPairError {
            pair: p.clone(),
            expected,
        };
        let (k, v) = p.split_once('=').ok_or_else(|| err("KEY=VALUE"))?;
        if k.is_empty() {
            return Err(err("a non-empty KEY in KEY=VALUE"));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// Parses `GUEST.KEY=VALUE` pairs into configuration per guest.
pub fn parse_guest_pairs(pairs: &[String]) -> Result<GuestConfigs, ConfigPairError> {
    let mut out = GuestConfigs::new();
    for p in pairs {
        let (guest, key, value) = p
            .split_once('=')
            .and_then(|(lhs, value)| {
                let (guest, key) = lhs.split_once('.')?;
                (!guest.is_empty() && !key.is_empty()).then_some((guest, key, value))
            })
            .ok_or_else(|| ConfigPairError {
                pair: p.clone(),
                expected: "GUEST.KEY=VALUE",
            })?;
        out.entry(guest.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn guest_pairs_group_by_guest_and_bad_pairs_are_named() {
        let c =
            parse_guest_pairs(&strings(&["gpu.name=s", "gpu.namespace=ops", "x.k=a=b"])).unwrap();
        assert_eq!(c["gpu"]["name"], "s");
        assert_eq!(c["x"]["k"], "a=b");
        for bad in ["gpu=1", ".k=v", "gpu.=v", "nothing"] {
            let e = parse_guest_pairs(&strings(&[bad])).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("--config {bad:?}: expected GUEST.KEY=VALUE")
            );
        }
    }

    #[test]
    fn pairs_need_an_equals_sign_and_a_key() {
        assert_eq!(parse_pairs(&strings(&["a=1"])).unwrap()["a"], "1");
        assert!(parse_pairs(&strings(&["a"])).is_err());
        assert!(parse_pairs(&strings(&["=1"]))
            .unwrap_err()
            .to_string()
            .contains("non-empty KEY"));
    }
}
