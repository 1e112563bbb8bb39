//! Property-based tests of selectors: parsing never panics, and matching
//! agrees with a reference evaluation of generated requirements
//! (`=`, `==`, `!=`, `in`, `notin`, exists, `!key`) on generated labels and
//! pod fields.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;

const KEYS: &[&str] = &["app", "tier", "example.com/team", "x_y-z"];
const VALUES: &[&str] = &["web", "db", "", "a.b-c_1"];

/// One generated label requirement, with its own reference semantics.
#[derive(Debug, Clone)]
enum Requirement {
    Eq(&'static str, &'static str, &'static str),
    NotEq(&'static str, &'static str),
    In(&'static str, Vec<&'static str>),
    NotIn(&'static str, Vec<&'static str>),
    Exists(&'static str),
    NotExists(&'static str),
}

impl Requirement {
    fn text(&self) -> String {
        match self {
            Requirement::Eq(k, op, v) => format!("{k}{op}{v}"),
            Requirement::NotEq(k, v) => format!("{k} != {v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", vs.join(", ")),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => (*k).to_string(),
            Requirement::NotExists(k) => format!("!{k}"),
        }
    }

    /// Kubernetes' semantics (`labels.Requirement.Matches`): `!=` and
    /// `notin` match objects without the label.
    fn holds(&self, labels: &BTreeMap<&str, &str>) -> bool {
        match self {
            Requirement::Eq(k, _, v) => labels.get(k) == Some(v),
            Requirement::NotEq(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        }
    }
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(KEYS)
}

/// A non-empty value (an empty one cannot be written inside `in (...)`).
fn set_value() -> impl Strategy<Value = &'static str> {
    prop::sample::select(VALUES).prop_filter("non-empty", |v| !v.is_empty())
}

fn requirement() -> impl Strategy<Value = Requirement> {
    prop_oneof![
        (
            key(),
            prop::sample::select(&["=", "=="][..]),
            prop::sample::select(VALUES)
        )
            .prop_map(|(k, op, v)| Requirement::Eq(k, op, v)),
        (key(), prop::sample::select(VALUES)).prop_map(|(k, v)| Requirement::NotEq(k, v)),
        (key(), prop::collection::vec(set_value(), 1..3)).prop_map(|(k, v)| Requirement::In(k, v)),
        (key(), prop::collection::vec(set_value(), 1..3))
            .prop_map(|(k, v)| Requirement::NotIn(k, v)),
        key().prop_map(Requirement::Exists),
        key().prop_map(Requirement::NotExists),
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<&'static str, &'static str>> {
    prop::collection::btree_map(key(), prop::sample::select(VALUES), 0..4)
}

fn attrs(labels: &BTreeMap<&str, &str>, node: &str, phase: &str) -> Attrs {
    extract_attrs(
        "pods",
        &json!({"metadata": {"name": "p", "namespace": "ml", "labels": labels},
                "spec": {"nodeName": node}, "status": {"phase": phase}}),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any text: label and field selector parsing never panic.
    #[test]
    fn parsing_never_panics(s in ".{0,30}|[a-z!=(), .-]{0,30}") {
        let _ = LabelSelector::parse(&s);
        let _ = FieldSelector::parse(&s, "pods");
        let _ = FieldSelector::parse(&s, "events");
    }

    /// Generated selectors parse, and match generated label maps exactly
    /// when every requirement holds by the reference semantics.
    #[test]
    fn label_matching_agrees_with_reference(
        reqs in prop::collection::vec(requirement(), 0..4),
        labels in labels(),
    ) {
        let text = reqs.iter().map(Requirement::text).collect::<Vec<_>>().join(",");
        let selector = LabelSelector::parse(&text);
        prop_assert!(selector.is_ok(), "{:?}: {:?}", text, selector);
        let selector = selector.unwrap();
        prop_assert_eq!(selector.is_empty(), reqs.is_empty());
        let want = reqs.iter().all(|r| r.holds(&labels));
        prop_assert_eq!(selector.matches(&attrs(&labels, "", "Running")), want, "{} on {:?}", text, labels);
    }

    /// Field selectors on pods: `=`/`==`/`!=` on nodeName and phase agree
    /// with comparing the fields directly (a missing field reads as "").
    #[test]
    fn field_matching_agrees_with_reference(
        node in prop::sample::select(&["", "n1", "n2"][..]),
        phase in prop::sample::select(&["Running", "Succeeded", ""][..]),
        reqs in prop::collection::vec(
            (prop::sample::select(&["spec.nodeName", "status.phase"][..]),
             prop::sample::select(&["=", "==", "!="][..]),
             prop::sample::select(&["", "n1", "Running", "Succeeded"][..])),
            0..3),
    ) {
        let text = reqs.iter().map(|(f, op, v)| format!("{f}{op}{v}")).collect::<Vec<_>>().join(",");
        let selector = FieldSelector::parse(&text, "pods");
        prop_assert!(selector.is_ok(), "{:?}: {:?}", text, selector);
        let want = reqs.iter().all(|(f, op, v)| {
            let actual = if *f == "spec.nodeName" { node } else { phase };
            (actual == *v) == (*op != "!=")
        });
        let got = selector.unwrap().matches(&attrs(&BTreeMap::new(), node, phase));
        prop_assert_eq!(got, want, "{} on node {:?} phase {:?}", text, node, phase);
    }

    /// A field label the resource does not support is refused by name.
    #[test]
    fn unsupported_field_labels_are_refused(field in "[a-z]{1,6}\\.[a-z]{1,6}") {
        prop_assume!(!supported_fields("pods").contains(&field.as_str()));
        prop_assert_eq!(
            FieldSelector::parse(&format!("{field}=x"), "pods"),
            Err(SelectorError::UnsupportedField(field.clone()))
        );
    }
}
