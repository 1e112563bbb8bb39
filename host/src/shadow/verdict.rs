//! The promotion gate over a shadow's report (`wasmctrl shadow report`):
//! whether the shadow agreed with its guest on every key compared since it
//! loaded, and if not, why. It reads a report as served on
//! `/shadow/GUEST`; it never talks to a host or a cluster itself.

use serde_json::Value as Json;

/// Whether a shadow may be promoted, read off its report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Keys compared and found the same.
    pub same: u64,
    /// Every reason the shadow is not (yet) known to agree; empty when it
    /// agreed on every key compared and at least one was.
    pub reasons: Vec<String>,
}

impl Verdict {
    /// Reads `report` (the JSON of `/shadow/GUEST`); a field missing or of
    /// the wrong type is a reason too (the report is not one).
    pub fn of(report: &Json) -> Self {
        let mut reasons = Vec::new();
        let mut count = |field: &str| -> u64 {
            match report.get(field).and_then(Json::as_u64) {
                Some(n) => n,
                None => {
                    reasons.push(format!("the report has no count {field:?}"));
                    0
                }
            }
        };
        let (same, differs, errors, skipped, refused) = (
            count("same"),
            count("differs"),
            count("errors"),
            count("skipped"),
            count("dry_run_refusals"),
        );
        let keys = count("differing_keys");
        if differs > 0 {
            let shown: Vec<&str> = report
                .get("differences")
                .and_then(Json::as_array)
                .map(|d| d.iter().filter_map(|d| d["key"].as_str()).collect())
                .unwrap_or_default();
            reasons.push(format!(
                "{differs} reconciles of {keys} keys planned differently (first: {})",
                shown.join(", ")
            ));
        }
        if errors > 0 {
            reasons.push(format!("the shadow failed {errors} times"));
        }
        if refused > 0 {
            reasons.push(format!(
                "the API server would refuse {refused} of the shadow's writes (dry run)"
            ));
        }
        if skipped > 0 {
            reasons.push(format!(
                "{skipped} reconciles were not compared (the shadow's queue was full)"
            ));
        }
        if same == 0 && reasons.is_empty() {
            reasons.push("no key has been compared yet".into());
        }
        Verdict { same, reasons }
    }

    /// True when the shadow agreed on every key compared.
    pub fn agreed(&self) -> bool {
        self.reasons.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(same: u64, differs: u64, errors: u64, skipped: u64, refused: u64) -> Json {
        json!({
            "guest": "g", "shadow": "g.shadow.wasm",
            "same": same, "differs": differs, "errors": errors, "skipped": skipped,
            "differing_keys": differs.min(2),
            "differences": if differs > 0 { json!([{"key": "ns/a"}, {"key": "ns/b"}]) } else { json!([]) },
            "dry_runs": refused, "dry_run_refusals": refused,
        })
    }

    #[test]
    fn only_a_report_of_compared_keys_all_the_same_agrees() {
        assert!(Verdict::of(&report(5, 0, 0, 0, 0)).agreed());
        let none = Verdict::of(&report(0, 0, 0, 0, 0));
        assert_eq!(none.reasons, ["no key has been compared yet"]);
    }

    #[test]
    fn every_kind_of_disagreement_is_a_reason() {
        let v = Verdict::of(&report(5, 3, 1, 2, 4));
        assert!(!v.agreed());
        assert_eq!(v.reasons.len(), 4, "{:?}", v.reasons);
        assert!(
            v.reasons[0].contains("3 reconciles of 2 keys") && v.reasons[0].contains("ns/a, ns/b")
        );
        assert!(v.reasons[1].contains("failed 1 times"));
        assert!(v.reasons[2].contains("refuse 4"));
        assert!(v.reasons[3].contains("2 reconciles were not compared"));
    }

    #[test]
    fn something_else_than_a_report_does_not_agree() {
        let v = Verdict::of(&json!({"message": "hello"}));
        assert!(!v.agreed());
        assert!(
            v.reasons.iter().any(|r| r.contains("\"same\"")),
            "{:?}",
            v.reasons
        );
    }
}
