//! Typed views: a struct whose fields are declared once with their paths
//! (`#[derive(View)]`, from `wasmctrl-guest-sdk-derive`), giving the
//! projection list for `Watch::fields` ([`View::FIELDS`]), handles resolved
//! once per reconcile ([`View::resolve`]) and a typed read per object.
//! This module owns the [`View`] trait and how each Rust type reads from a
//! snapshot value ([`FieldValue`]); it never parses paths (the schema
//! does) and never panics: a value of another kind reads as absent.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::quantity::{parse_quantity, Quantity, QuantityError};
use crate::snapshot::{Field, Object, SchemaError, Value, WatchSchema};
use crate::{Condition, ConditionFields};

/// A typed view of one watch's objects: `#[derive(View)]` implements it.
///
/// ```
/// use wasmctrl_guest_sdk::{GroupVersionKind, View, Watch};
///
/// #[derive(View)]
/// struct App<'a> {
///     #[field("spec.message")]
///     message: Option<&'a str>,
///     #[field("spec.replicas")]
///     replicas: Option<i64>,
/// }
///
/// let apps = Watch::new("apps", GroupVersionKind::new("example.com", "v1", "App"))
///     .fields(App::FIELDS);
/// assert_eq!(apps.fields, ["spec.message", "spec.replicas"]);
/// ```
///
/// A field type no snapshot value maps onto is a compile error ("`Option<u8>` is
/// not a type a View field can read"):
///
/// ```compile_fail
/// #[derive(wasmctrl_guest_sdk::View)]
/// struct Bad {
///     #[field("spec.replicas")]
///     replicas: Option<u8>,
/// }
/// ```
///
/// A path holding `{name}` (format syntax; `{{`, `}}` for literal braces)
/// makes a *configured* view: its paths take that parameter at run time,
/// so it has no `View` impl but `fields(..)` and `<Name>Fields::resolve(&watch, ..)`
/// taking the parameters in order of first use:
///
/// ```
/// use wasmctrl_guest_sdk::pod_request::PodResources;
/// use wasmctrl_guest_sdk::{GroupVersionKind, View, Watch};
///
/// #[derive(View)]
/// struct Pod<'a> {
///     #[pod_resources("{resource}")]
///     resources: PodResources<'a>,
/// }
///
/// let pods = Watch::new("pods", GroupVersionKind::core("Pod"))
///     .fields(Pod::fields("example.com/fpga"));
/// assert_eq!(pods.fields[2], "spec.containers[*].resources.requests['example.com/fpga']");
/// ```
///
/// A placeholder that is not a Rust identifier (or is `watch` or `paths`)
/// is a compile error:
///
/// ```compile_fail
/// #[derive(wasmctrl_guest_sdk::View)]
/// struct Bad<'a> {
///     #[field("spec.{watch}")]
///     name: Option<&'a str>,
/// }
/// ```
///
/// and so is a field without its path:
///
/// ```compile_fail
/// #[derive(wasmctrl_guest_sdk::View)]
/// struct Bad {
///     replicas: Option<i64>,
/// }
/// ```
pub trait View<'a>: Sized {
    /// Every projection path the view reads, in field order: pass it to
    /// [`Watch::fields`](crate::Watch::fields).
    const FIELDS: &'static [&'static str];
    /// The resolved handles (`<Name>Fields`, generated).
    type Fields: Copy;
    /// Resolves every path in `watch` (once per reconcile, in
    /// [`Guest::fields`](crate::Guest::fields)).
    fn resolve(watch: &WatchSchema<'_>) -> Result<Self::Fields, SchemaError>;
    /// The view of `object`.
    fn read(fields: &Self::Fields, object: &Object<'a>) -> Self;
}

/// A Rust type a `#[field("path")]` of a view can have: how it reads from
/// the path's values.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a type a View field can read",
    label = "unsupported View field type",
    note = "#[field] supports Option<&str>, Option<String>, Option<i64>, Option<bool>, Option<f64>, Vec<&str>, Vec<String>, Vec<i64>, BTreeMap<String, String>, Option<serde_json::Value> and Option<Result<Quantity, QuantityError>>; use #[conditions] for Vec<Condition> and #[pod_resources] for PodResources"
)]
pub trait FieldValue<'a>: Sized {
    /// Reads `field` of `object`.
    fn read(object: &Object<'a>, field: Field) -> Self;
}

/// The first value as text (strings as they are, numbers rendered,
/// objects and lists as JSON); `None` when absent.
impl<'a> FieldValue<'a> for Option<&'a str> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        object.text(field)
    }
}

/// As `Option<&str>`, owned.
impl<'a> FieldValue<'a> for Option<String> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        object.text(field).map(str::to_string)
    }
}

/// [`Object::int`]: an integer, a float without fraction, or a string
/// holding a decimal integer.
impl<'a> FieldValue<'a> for Option<i64> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        object.int(field)
    }
}

/// A boolean; any other value reads as `None`.
impl<'a> FieldValue<'a> for Option<bool> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        object.bool(field)
    }
}

/// A number (integer or float); any other value reads as `None`.
impl<'a> FieldValue<'a> for Option<f64> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        match object.value_at(field, 0) {
            Value::Float(f) => Some(f),
            Value::Int(n) => Some(n as f64),
            _ => None,
        }
    }
}

/// Every value as text, in order (a `[*]` path), absent ones skipped.
impl<'a> FieldValue<'a> for Vec<&'a str> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        (0..object.len(field))
            .filter_map(|i| object.text_at(field, i))
            .collect()
    }
}

/// As `Vec<&str>`, owned.
impl<'a> FieldValue<'a> for Vec<String> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        (0..object.len(field))
            .filter_map(|i| object.text_at(field, i).map(str::to_string))
            .collect()
    }
}

/// Every value as an integer ([`Object::int_at`]), in order (a `[*]`
/// path), values that are none skipped.
impl<'a> FieldValue<'a> for Vec<i64> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        (0..object.len(field))
            .filter_map(|i| object.int_at(field, i))
            .collect()
    }
}

/// The first value as a map of strings (labels, a ConfigMap's `data`, a
/// selector, a quota's `hard`): the string members of a JSON object,
/// others skipped; empty when absent or not an object.
impl<'a> FieldValue<'a> for BTreeMap<String, String> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        match object.value_at(field, 0) {
            Value::Json(text) => string_members(text).unwrap_or_default(),
            _ => BTreeMap::new(),
        }
    }
}

/// The first value as JSON: maps and lists parsed, scalars as JSON
/// scalars; `None` when absent (or, never from the host, unparsable).
impl<'a> FieldValue<'a> for Option<Json> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        match object.value_at(field, 0) {
            Value::Absent => None,
            Value::Str(s) => Some(Json::String(s.to_string())),
            Value::Int(n) => Some(Json::from(n)),
            Value::Float(f) => serde_json::Number::from_f64(f).map(Json::Number),
            Value::Bool(b) => Some(Json::Bool(b)),
            Value::Json(s) => serde_json::from_str(s).ok(),
        }
    }
}

/// The first value parsed as a Kubernetes quantity (apimachinery's rules):
/// `None` when absent, `Some(Err(..))` when it is not a quantity.
impl<'a> FieldValue<'a> for Option<Result<Quantity, QuantityError>> {
    fn read(object: &Object<'a>, field: Field) -> Self {
        object.text(field).map(parse_quantity)
    }
}

/// What `#[conditions("prefix")]` reads: [`ConditionFields::read`].
pub fn conditions(fields: &ConditionFields, object: &Object<'_>) -> Vec<Condition> {
    fields.read(object)
}

/// The string members of the JSON object `text` (other members skipped),
/// by serde_json; `None` when `text` is not a JSON object.
fn string_members(text: &str) -> Option<BTreeMap<String, String>> {
    let map: BTreeMap<String, Json> = serde_json::from_str(text).ok()?;
    Some(
        map.into_iter()
            .filter_map(|(k, v)| match v {
                Json::String(s) => Some((k, s)),
                _ => None,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// Whatever serde_json writes for a map of strings (any text)
        /// reads back as that map.
        #[test]
        fn serde_json_s_text_of_a_string_map_reads_back(
            map in proptest::collection::btree_map(".*", ".*", 0..6)
        ) {
            let text = serde_json::to_string(&map).expect("serialisable");
            prop_assert_eq!(super::string_members(&text), Some(map));
        }
    }

    #[test]
    fn string_members_skip_other_values_and_malformed_text_reads_none() {
        let got = super::string_members(r#"{"a":"1","n":2,"o":{"x":["}"]},"e":"\u00e9"}"#);
        let want: Vec<(String, String)> = vec![("a".into(), "1".into()), ("e".into(), "é".into())];
        assert_eq!(got.map(|m| m.into_iter().collect::<Vec<_>>()), Some(want));
        for bad in ["", "[]", "{", "{\"a\":\"1\",}", "{\"a\":\"1\"} x"] {
            assert_eq!(super::string_members(bad), None, "{bad}");
        }
    }

    use super::*;
    use crate::pod_request::{pod_resource_paths, PodResources};
    use crate::testing::{Obj, Val, World};
    use crate::{condition::condition_paths, GroupVersionKind, Manifest, Schema, Snapshot, Watch};

    /// Every supported type, borrowed and owned.
    #[derive(crate::View, Debug, PartialEq)]
    struct Thing<'a> {
        #[field("spec.name")]
        name: Option<&'a str>,
        #[field("spec.owned")]
        owned: Option<String>,
        #[field("spec.count")]
        count: Option<i64>,
        #[field("spec.on")]
        on: Option<bool>,
        #[field("spec.ratio")]
        ratio: Option<f64>,
        #[field("spec.tags[*]")]
        tags: Vec<&'a str>,
        #[field("spec.hosts[*]")]
        hosts: Vec<String>,
        #[field("spec.labels")]
        labels: Option<Json>,
        #[field("spec.size")]
        size: Option<Result<Quantity, QuantityError>>,
        #[conditions("status.conditions")]
        conditions: Vec<Condition>,
    }

    /// A pod's requests, through the SDK's composite reader.
    #[derive(crate::View)]
    struct Pod<'a> {
        #[pod_resources("nvidia.com/gpu")]
        resources: PodResources<'a>,
    }

    /// Paths that depend on a parameter the guest knows at `describe`
    /// (its configured resource), and one that does not.
    #[derive(crate::View)]
    struct Configured<'a> {
        #[pod_resources("{resource}")]
        resources: PodResources<'a>,
        #[field("spec.overhead['{resource}']")]
        overhead: Option<&'a str>,
        #[field("metadata.labels['{{team}}']")]
        braces: Option<&'a str>,
        #[conditions("{prefix}.conditions")]
        conditions: Vec<Condition>,
    }

    /// Owned, without a lifetime.
    #[derive(crate::View)]
    struct Named {
        #[field("spec.name")]
        name: Option<String>,
    }

    fn manifest() -> Manifest {
        Manifest::new("t")
            .watch(Watch::new("things", GroupVersionKind::core("Thing")).fields(Thing::FIELDS))
    }

    #[test]
    fn fields_are_every_path_in_order_with_conditions_and_pod_resources_expanded() {
        let mut want: Vec<String> = [
            "spec.name",
            "spec.owned",
            "spec.count",
            "spec.on",
            "spec.ratio",
            "spec.tags[*]",
            "spec.hosts[*]",
            "spec.labels",
            "spec.size",
        ]
        .map(String::from)
        .into();
        want.extend(condition_paths("status.conditions"));
        assert_eq!(Thing::FIELDS, want);
        assert_eq!(Pod::FIELDS, pod_resource_paths("nvidia.com/gpu"));
        assert_eq!(Named::FIELDS, ["spec.name"]);
    }

    #[test]
    fn values_read_typed_and_absent_or_mistyped_ones_read_as_none() {
        let m = manifest();
        let [t, s, ..] = condition_paths("status.conditions");
        let data = World::new(&m)
            .with(
                Obj::new("things", "ns", "full")
                    .set("spec.name", "a")
                    .set("spec.owned", "b")
                    .set("spec.count", 3)
                    .set("spec.on", true)
                    .set("spec.ratio", Val::Float(0.5))
                    .set_list("spec.tags[*]", ["x", "y"])
                    .set_list("spec.hosts[*]", ["h"])
                    .set("spec.labels", Val::Json(r#"{"team":"ml"}"#.into()))
                    .set("spec.size", "1500m")
                    .set_list(&t, ["Ready"])
                    .set_list(&s, ["True"]),
            )
            .with(
                Obj::new("things", "ns", "odd")
                    .set("spec.count", "seven")
                    .set("spec.on", "yes")
                    .set("spec.ratio", 2)
                    .set("spec.labels", "plain")
                    .set("spec.size", "two"),
            )
            .snapshot()
            .expect("declared names");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let fields = Thing::resolve(&schema.watch("things").expect("declared")).expect("projected");
        let full = snap.get(fields.watch(), "ns", "full").expect("present");
        let full = fields.read(&full);
        assert_eq!(
            (
                full.name,
                full.owned.as_deref(),
                full.count,
                full.on,
                full.ratio
            ),
            (Some("a"), Some("b"), Some(3), Some(true), Some(0.5))
        );
        assert_eq!(
            (full.tags, full.hosts),
            (vec!["x", "y"], vec!["h".to_string()])
        );
        assert_eq!(full.labels, Some(serde_json::json!({"team": "ml"})));
        assert_eq!(full.size.map(|q| q.map(|q| q.value())), Some(Ok(2)));
        assert_eq!(full.conditions.len(), 1);
        assert!(full.conditions[0].is_true());
        let odd = snap.get(fields.watch(), "ns", "odd").expect("present");
        let odd = Thing::read(&fields, &odd);
        assert_eq!((odd.count, odd.on, odd.ratio), (None, None, Some(2.0)));
        assert_eq!(odd.labels, Some(Json::String("plain".into())));
        assert!(matches!(odd.size, Some(Err(_))));
        assert!(odd.name.is_none() && odd.tags.is_empty() && odd.conditions.is_empty());
    }

    #[test]
    fn a_configured_view_takes_its_parameters_in_order_of_first_use_and_reads_their_paths() {
        let fpga = "example.com/fpga";
        let mut want = pod_resource_paths(fpga);
        want.push("spec.overhead['example.com/fpga']".into());
        want.push("metadata.labels['{team}']".into());
        want.extend(condition_paths("status.conditions"));
        assert_eq!(Configured::fields(fpga, "status"), want);
        let m = Manifest::new("t").watch(
            Watch::new("pods", GroupVersionKind::core("Pod"))
                .fields(Configured::fields(fpga, "status")),
        );
        let data = World::new(&m)
            .with(
                Obj::new("pods", "ns", "p")
                    .set("spec.nodeName", "n1")
                    .set("spec.overhead['example.com/fpga']", "1")
                    .set("metadata.labels['{team}']", "ml")
                    .set_list("status.conditions[*].type", ["Ready"]),
            )
            .snapshot()
            .expect("declared names");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let pods = schema.watch("pods").expect("declared");
        let f = ConfiguredFields::resolve(&pods, fpga, "status").expect("projected");
        let p = f.read(&snap.get(f.watch(), "ns", "p").expect("present"));
        assert_eq!(
            (p.resources.node_name, p.overhead, p.braces),
            (Some("n1"), Some("1"), Some("ml"))
        );
        assert_eq!(p.conditions.len(), 1, "read from status.conditions");
        let err = ConfiguredFields::resolve(&pods, "nvidia.com/gpu", "status").unwrap_err();
        assert!(err.to_string().contains("nvidia.com/gpu"), "{err}");
    }

    #[test]
    fn a_path_the_watch_does_not_project_is_an_error_naming_it() {
        let m = Manifest::new("t")
            .watch(Watch::new("things", GroupVersionKind::core("Thing")).fields(["spec.name"]));
        let schema = Schema::new(&m).expect("unique names");
        let err = Thing::resolve(&schema.watch("things").expect("declared")).unwrap_err();
        assert!(err.to_string().contains("\"spec.owned\""), "{err}");
    }

    #[test]
    fn owned_views_and_pod_resources_read_like_the_sdk_s_own_readers() {
        let m = Manifest::new("t")
            .watch(Watch::new("things", GroupVersionKind::core("Thing")).fields(Named::FIELDS))
            .watch(Watch::new("pods", GroupVersionKind::core("Pod")).fields(Pod::FIELDS));
        let data = World::new(&m)
            .with(Obj::new("things", "ns", "a").set("spec.name", "x"))
            .with(Obj::new("pods", "ns", "p").set("spec.nodeName", "n1"))
            .snapshot()
            .expect("declared names");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        let named =
            NamedFields::resolve(&schema.watch("things").expect("declared")).expect("projected");
        let pods = Pod::resolve(&schema.watch("pods").expect("declared")).expect("projected");
        let a = snap.get(named.watch(), "ns", "a").expect("present");
        assert_eq!(named.read(&a).name.as_deref(), Some("x"));
        let p = snap.get(pods.watch(), "ns", "p").expect("present");
        let pod = pods.read(&p).resources;
        assert_eq!((pod.name, pod.node_name), ("p", Some("n1")));
        assert_eq!(
            named.read(&p).name,
            None,
            "a pod read through another watch's view"
        );
    }
}
