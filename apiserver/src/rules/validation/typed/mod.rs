//! Typed decoding of built-in kinds: whether a write body decodes into the
//! Go type the real server decodes it into, and the decoder's error when it
//! does not.
//!
//! The real server decodes a built-in kind with `sigs.k8s.io/json` (a fork
//! of Go's `encoding/json`) into its Go struct before anything else, so a
//! value of the wrong JSON type never reaches storage: `data: [1]` in a
//! ConfigMap is `json: cannot unmarshal array into Go struct field
//! ConfigMap.data of type map[string]string` (`UnmarshalTypeError.Error`:
//! the innermost struct, the path of struct fields from the root, the Go
//! type). This module stands in for that decoder with the k8s-openapi type
//! of each kind (deserialized through `serde_path_to_error` for the path),
//! and recovers the Go wording by probing the same type: what a location
//! expects (`i32` is `int32`, a k8s-openapi struct `Container` is
//! `v1.Container`, a map is `map[string]` of what its values expect), and
//! which keys of the path are struct fields rather than map keys.
//!
//! Where Go and k8s-openapi disagree it follows Go: `null` decodes into
//! anything (it is removed first), a field k8s-openapi requires may be
//! missing (a placeholder of the expected type is put in its place), a
//! quantity may be a number, and `Quantity.UnmarshalJSON`'s errors (see
//! [`super::quantity`]) abort the decode, so they win over a type error
//! elsewhere as in Go (whose type errors are only saved). Timestamps are
//! only checked to be strings (`metav1.Time` parses RFC 3339, whose Go
//! parse errors are not modelled); int-or-string values follow
//! `IntOrString.UnmarshalJSON`.
//!
//! This module owns *whether an object decodes and what the decoder says*;
//! it never words the surrounding HTTP error (see [`super::check`]) and
//! never looks at fields the type does not declare (see `unknown`).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::quantity;
use crate::rules::go_words::Seg;
use crate::storage::registry::ResourceInfo;

/// A decode that failed: the serde message and where.
struct Failure {
    path: Vec<Seg>,
    msg: String,
}

/// The typed form of one built-in kind.
#[derive(Clone, Copy)]
pub(super) struct Kind {
    decode: fn(&Value) -> Result<(), Failure>,
    round_trip: fn(&Value) -> Option<Value>,
    /// Where the kind keeps `resource.Quantity` values (see [`QUANTITIES`]).
    pod_spec_at: Option<&'static [&'static str]>,
    node: bool,
    /// Fields of type `map[string]string` (from the root), which a map of
    /// strings passes unchanged (see [`Kind::hold_verbatim`]).
    string_maps: &'static [&'static str],
}

impl Kind {
    /// `obj` decoded into the type and encoded again; `None` when it does
    /// not decode.
    pub(super) fn round_trip(&self, obj: &Value) -> Option<Value> {
        (self.round_trip)(obj)
    }

    /// Whether [`decode_error`] checks quantities for this kind (beyond
    /// what decoding the type checks).
    pub(super) fn checks_quantities(&self) -> bool {
        self.pod_spec_at.is_some() || self.node
    }

    /// Takes out of `obj` the large values the typed round trip would
    /// pass unchanged, whatever the rest of the object holds, each
    /// replaced by `{}` (which the type passes unchanged too): a
    /// `map[string]string` field whose values are all strings, and the
    /// `fieldsV1` object of each `metadata.managedFields` entry
    /// (`FieldsV1` holds any JSON). `obj` then decodes exactly when it
    /// decoded before (a struct's fields decode independently), and its
    /// round trip drops the same keys; [`restore`] puts the values back.
    pub(super) fn hold_verbatim(&self, obj: &mut Value) -> Vec<(Vec<Seg>, Value)> {
        let mut held = Vec::new();
        #[cfg(test)]
        if !HOLD.with(std::cell::Cell::get) {
            return held;
        }
        let mut hold = |v: &mut Value, path: Vec<Seg>| {
            held.push((
                path,
                std::mem::replace(v, Value::Object(serde_json::Map::new())),
            ));
        };
        if let Some(Value::Array(entries)) = obj.pointer_mut("/metadata/managedFields") {
            for (i, entry) in entries.iter_mut().enumerate() {
                if let Some(f @ Value::Object(_)) = entry.get_mut("fieldsV1") {
                    let path = ["metadata", "managedFields"]
                        .iter()
                        .map(|k| Seg::Key((*k).to_owned()))
                        .chain([Seg::Index(i), Seg::Key("fieldsV1".to_owned())])
                        .collect();
                    hold(f, path);
                }
            }
        }
        for field in self.string_maps {
            if let Some(m @ Value::Object(_)) = obj.get_mut(*field) {
                if m.as_object()
                    .is_some_and(|m| m.values().all(Value::is_string))
                {
                    hold(m, vec![Seg::Key((*field).to_owned())]);
                }
            }
        }
        held
    }
}

#[cfg(test)]
thread_local! {
    /// Whether [`Kind::hold_verbatim`] holds anything (tests compare).
    pub(super) static HOLD: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Puts back what [`Kind::hold_verbatim`] took out of `obj`.
pub(super) fn restore(obj: &mut Value, held: Vec<(Vec<Seg>, Value)>) {
    for (path, value) in held {
        if let Some(slot) = at_mut(obj, &path) {
            *slot = value;
        }
    }
}

fn decode_as<T: DeserializeOwned>(v: &Value) -> Result<(), Failure> {
    serde_path_to_error::deserialize::<_, T>(v)
        .map(|_| ())
        .map_err(|e| Failure {
            path: e
                .path()
                .iter()
                .filter_map(|s| match s {
                    serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                    serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                    _ => None,
                })
                .collect(),
            msg: e.into_inner().to_string(),
        })
}

fn round_trip_as<T: DeserializeOwned + Serialize>(obj: &Value) -> Option<Value> {
    let t = T::deserialize(obj).ok()?;
    serde_json::to_value(&t).ok()
}

fn kind_of<T: DeserializeOwned + Serialize>() -> Kind {
    Kind {
        decode: decode_as::<T>,
        round_trip: round_trip_as::<T>,
        pod_spec_at: None,
        node: false,
        string_maps: &[],
    }
}

/// `(group, version, kind, typed form)` of each listed k8s-openapi type,
/// the coordinates taken from the type itself (`k8s_openapi::Resource`).
macro_rules! typed_kinds {
    ($($ty:ty),* $(,)?) => {
        &[$((
            <$ty as k8s_openapi::Resource>::GROUP,
            <$ty as k8s_openapi::Resource>::VERSION,
            <$ty as k8s_openapi::Resource>::KIND,
            kind_of::<$ty> as fn() -> Kind,
        )),*]
    };
}

/// `(group, version, kind, typed form)`.
type TypedKind = (&'static str, &'static str, &'static str, fn() -> Kind);

/// Every built-in kind a 1.32 server serves (see `storage::builtin`; a
/// test checks none is missing), as k8s-openapi types.
#[rustfmt::skip]
static TYPED: &[TypedKind] = {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
        authorization::v1 as authz, autoscaling, batch::v1 as batch, certificates::v1 as certs,
        coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
        events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as networking,
        node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    typed_kinds![
        core::Binding, core::ComponentStatus, core::ConfigMap, core::Endpoints, core::Event,
        core::LimitRange, core::Namespace, core::Node, core::PersistentVolumeClaim,
        core::PersistentVolume, core::Pod, core::PodTemplate, core::ReplicationController,
        core::ResourceQuota, core::Secret, core::ServiceAccount, core::Service,
        admission::MutatingWebhookConfiguration, admission::ValidatingAdmissionPolicy,
        admission::ValidatingAdmissionPolicyBinding, admission::ValidatingWebhookConfiguration,
        apiextensions::CustomResourceDefinition, apiregistration::APIService,
        apps::ControllerRevision, apps::DaemonSet, apps::Deployment, apps::ReplicaSet,
        apps::StatefulSet,
        authn::SelfSubjectReview, authn::TokenReview,
        authz::LocalSubjectAccessReview, authz::SelfSubjectAccessReview,
        authz::SelfSubjectRulesReview, authz::SubjectAccessReview,
        autoscaling::v2::HorizontalPodAutoscaler, autoscaling::v1::HorizontalPodAutoscaler,
        batch::CronJob, batch::Job, certs::CertificateSigningRequest, coordination::Lease,
        discovery::EndpointSlice, events::Event, flowcontrol::FlowSchema,
        flowcontrol::PriorityLevelConfiguration, networking::IngressClass, networking::Ingress,
        networking::NetworkPolicy, node::RuntimeClass, policy::PodDisruptionBudget,
        rbac::ClusterRoleBinding, rbac::ClusterRole, rbac::RoleBinding, rbac::Role,
        scheduling::PriorityClass, storage::CSIDriver, storage::CSINode,
        storage::CSIStorageCapacity, storage::StorageClass, storage::VolumeAttachment,
    ]
};

/// Where a kind embeds a pod spec (its quantities are checked as a pod's).
fn pod_spec_at(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    match (group, kind) {
        ("", "Pod") => Some(&["spec"]),
        ("", "PodTemplate") => Some(&["template", "spec"]),
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job") => Some(&["spec", "template", "spec"]),
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

/// The typed form of `info`'s kind, when it is a built-in kind this module
/// knows.
pub(super) fn kind(info: &ResourceInfo) -> Option<Kind> {
    let (g, v, k) = (
        info.group.as_str(),
        info.version.as_str(),
        info.kind.as_str(),
    );
    let (_, _, _, make) = TYPED
        .iter()
        .find(|(tg, tv, tk, _)| *tg == g && *tv == v && *tk == k)?;
    Some(Kind {
        pod_spec_at: pod_spec_at(g, k),
        node: (g, k) == ("", "Node"),
        string_maps: if (g, k) == ("", "ConfigMap") {
            &["data"]
        } else {
            &[]
        },
        ..make()
    })
}

/// Where a pod spec keeps quantities, relative to the spec (`*`: every
/// array element or map value). Pod status keeps more (allocated
/// resources of container statuses); those are only written by the
/// kubelet and are not checked.
const QUANTITIES: &[&[&str]] = &[
    &["containers", "*", "resources", "limits", "*"],
    &["containers", "*", "resources", "requests", "*"],
    &["initContainers", "*", "resources", "limits", "*"],
    &["initContainers", "*", "resources", "requests", "*"],
    &["ephemeralContainers", "*", "resources", "limits", "*"],
    &["ephemeralContainers", "*", "resources", "requests", "*"],
    &["overhead", "*"],
    &["resources", "limits", "*"],
    &["resources", "requests", "*"],
    &["volumes", "*", "emptyDir", "sizeLimit"],
];
/// Where a Node keeps quantities.
const NODE_QUANTITIES: &[&[&str]] = &[
    &["status", "capacity", "*"],
    &["status", "allocatable", "*"],
];

/// Most retries of one decode (placeholders for missing fields).
const MAX_ROUNDS: usize = 64;

/// The real decoder's error for `obj` as `kind`, or `None` when it
/// decodes.
pub(super) fn decode_error(kind: Kind, obj: &Value) -> Option<String> {
    let mut work = obj.clone();
    strip_nulls(&mut work);
    if let Some(err) = quantities(kind, &mut work) {
        return Some(err.to_string());
    }
    for _ in 0..MAX_ROUNDS {
        let failure = match (kind.decode)(&work) {
            Ok(()) => return None,
            Err(f) => f,
        };
        if let Some(field) = missing_field(&failure.msg) {
            let mut path = failure.path.clone();
            path.push(Seg::Key(field.to_string()));
            let placeholder =
                expected_at(kind, &work, &path).map_or(Value::Null, |e| placeholder(&e));
            if placeholder.is_null() {
                return None;
            }
            insert_at(&mut work, &path, placeholder);
            continue;
        }
        let (unexpected, expected) = split_message(&failure.msg);
        if unexpected.starts_with("null") {
            // a null array element: Go leaves the element zero
            let p = expected.map_or(Value::Null, placeholder);
            if p.is_null() || at_mut(&mut work, &failure.path).is_none() {
                return None;
            }
            insert_at(&mut work, &failure.path, p);
            continue;
        }
        let expected = expected.map(str::to_string).or_else(|| {
            // a custom error (base64, timestamps): ask the type
            expected_at(kind, &work, &failure.path)
        });
        let is_string = at(&work, &failure.path).is_some_and(Value::is_string);
        if expected.as_deref().is_some_and(is_time) && is_string {
            insert_at(&mut work, &failure.path, placeholder("Time"));
            continue;
        }
        return Some(go_message(
            kind,
            &work,
            &failure,
            expected.unwrap_or_default(),
        ));
    }
    None
}

/// `metav1.Time` and `MicroTime` take any string here (see the module doc).
fn is_time(expected: &str) -> bool {
    // k8s-openapi's Time and MicroTime wrap a jiff Timestamp
    matches!(expected, "Time" | "MicroTime" | "a timestamp string")
}

/// Removes every `null`-valued key: Go's decoder leaves the field as it was.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Checks every quantity of `kind`'s object (first error wins) and turns
/// numeric ones into strings for k8s-openapi.
fn quantities(kind: Kind, work: &mut Value) -> Option<&'static str> {
    let mut patterns: Vec<Vec<&str>> = Vec::new();
    if let Some(prefix) = kind.pod_spec_at {
        for q in QUANTITIES {
            patterns.push(prefix.iter().chain(q.iter()).copied().collect());
        }
    }
    if kind.node {
        patterns.extend(NODE_QUANTITIES.iter().map(|q| q.to_vec()));
    }
    for p in &patterns {
        if let Some(err) = visit_quantities(work, p) {
            return Some(err);
        }
    }
    None
}

fn visit_quantities(v: &mut Value, pattern: &[&str]) -> Option<&'static str> {
    let Some((first, rest)) = pattern.split_first() else {
        let err = quantity::unmarshal_error(v);
        if err.is_none() && !v.is_string() {
            let text = v.to_string();
            *v = Value::String(text);
        }
        return err;
    };
    match (v, *first) {
        (Value::Array(a), "*") => a.iter_mut().find_map(|x| visit_quantities(x, rest)),
        (Value::Object(m), "*") => m.values_mut().find_map(|x| visit_quantities(x, rest)),
        (Value::Object(m), key) => m.get_mut(key).and_then(|x| visit_quantities(x, rest)),
        _ => None,
    }
}

fn missing_field(msg: &str) -> Option<&str> {
    msg.strip_prefix("missing field `")?.split('`').next()
}

/// (what was found, what was expected) of a serde `invalid type` /
/// `invalid value` message.
fn split_message(msg: &str) -> (&str, Option<&str>) {
    let body = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
        .unwrap_or(msg);
    match body.rsplit_once(", expected ") {
        Some((found, expected)) => (found, Some(expected)),
        None => (body, None),
    }
}

/// What the type expects at `path` of `work`, in serde's words (`a
/// string`, `i32`, `a map`, `Container`), found by putting a value of the
/// wrong type there.
fn expected_at(kind: Kind, work: &Value, path: &[Seg]) -> Option<String> {
    for probe in [json!(true), json!("")] {
        let mut copy = work.clone();
        insert_at(&mut copy, path, probe);
        match (kind.decode)(&copy) {
            Err(f) if f.path == path => {
                if let (_, Some(e)) = split_message(&f.msg) {
                    return Some(e.to_string());
                }
                // a custom error (base64): the probe was a string
                return Some("a base64-encoded string".into());
            }
            Err(f) if f.path.starts_with(path) && f.path.len() > path.len() => {
                // inside the probe: cannot happen for scalars
                return None;
            }
            _ => {}
        }
    }
    None
}

/// Whether the field at `path` of `obj` (a key of an object the type
/// decodes) is one the type declares: a `true` put there either fails to
/// decode right there or survives the round trip. When the probe fails
/// elsewhere the answer is yes, so nothing is called unknown on a guess.
pub(super) fn declares(kind: Kind, obj: &Value, path: &[Seg]) -> bool {
    let mut probe = obj.clone();
    insert_at(&mut probe, path, json!(true));
    if (kind.decode)(&probe).is_err() {
        return true;
    }
    kind.round_trip(&probe)
        .is_none_or(|typed| at(&typed, path).is_some())
}

/// A value of the type serde calls `expected`, for a missing field.
fn placeholder(expected: &str) -> Value {
    match expected {
        "a string" | "a base64-encoded string" | "Quantity" => json!(""),
        "a sequence" => json!([]),
        "a boolean" => json!(false),
        "IntOrString" => json!(0),
        e if is_time(e) => json!("1970-01-01T00:00:00Z"),
        e if e.starts_with('i') || e.starts_with('u') || e.starts_with('f') => json!(0),
        "a map" => json!({}),
        e if e.starts_with(char::is_uppercase) => json!({}),
        _ => Value::Null,
    }
}

/// The Go type serde's `expected` stands for at `path` (map and slice
/// element types found by probing one level deeper).
fn go_type(kind: Kind, work: &Value, path: &[Seg], expected: &str) -> String {
    let element = |container: Value, seg: Seg| {
        let mut copy = work.clone();
        insert_at(&mut copy, path, container);
        let mut inner = path.to_vec();
        inner.push(seg);
        expected_at(kind, &copy, &inner)
            .map(|e| go_type(kind, &copy, &inner, &e))
            .unwrap_or_default()
    };
    match expected {
        "a string" => "string".into(),
        "a boolean" => "bool".into(),
        "a base64-encoded string" => "[]uint8".into(),
        "i32" | "i64" | "u32" | "u64" | "i16" | "u16" | "i8" | "u8" => {
            let (sign, bits) = expected.split_at(1);
            format!("{}int{bits}", if sign == "u" { "u" } else { "" })
        }
        "f64" => "float64".into(),
        "f32" => "float32".into(),
        "a map" => format!(
            "map[string]{}",
            element(json!({"k": null}), Seg::Key("k".into()))
        ),
        "a sequence" => format!("[]{}", element(json!([null]), Seg::Index(0))),
        "Quantity" => "resource.Quantity".into(),
        "IntOrString" => "intstr.IntOrString".into(),
        other => format!("v1.{other}"),
    }
}

/// Fields whose Go type is a named type k8s-openapi does not keep
/// (`reflect.Type.String()` prints the name): (struct, field, Go type).
const NAMED: &[(&str, &str, &str)] = &[
    ("Container", "imagePullPolicy", "v1.PullPolicy"),
    ("ContainerPort", "protocol", "v1.Protocol"),
    ("NamespaceSpec", "finalizers", "[]v1.FinalizerName"),
    ("NamespaceStatus", "phase", "v1.NamespacePhase"),
    ("NodeStatus", "allocatable", "v1.ResourceList"),
    ("NodeStatus", "capacity", "v1.ResourceList"),
    ("NodeStatus", "phase", "v1.NodePhase"),
    ("ObjectMeta", "uid", "types.UID"),
    ("OwnerReference", "uid", "types.UID"),
    ("ObjectReference", "uid", "types.UID"),
    ("PodSpec", "dnsPolicy", "v1.DNSPolicy"),
    ("PodSpec", "overhead", "v1.ResourceList"),
    ("PodSpec", "restartPolicy", "v1.RestartPolicy"),
    ("PodStatus", "phase", "v1.PodPhase"),
    ("PodStatus", "qosClass", "v1.PodQOSClass"),
    ("ResourceRequirements", "limits", "v1.ResourceList"),
    ("ResourceRequirements", "requests", "v1.ResourceList"),
    ("Secret", "type", "v1.SecretType"),
    ("Taint", "effect", "v1.TaintEffect"),
    ("Toleration", "effect", "v1.TaintEffect"),
    ("Toleration", "operator", "v1.TolerationOperator"),
];

/// The Go type at a failure whose innermost struct field is `field` of
/// `strukt` and whose path ends in `last`, when [`NAMED`] knows it.
fn named_type(strukt: &str, field: Option<&String>, last: Option<&Seg>) -> Option<String> {
    let field = field?;
    let (_, _, ty) = NAMED.iter().find(|(s, f, _)| *s == strukt && f == field)?;
    match last? {
        Seg::Key(k) if k == field => Some((*ty).to_string()),
        Seg::Index(_) => ty.strip_prefix("[]").map(str::to_string),
        Seg::Key(_) if *ty == "v1.ResourceList" => Some("resource.Quantity".into()),
        Seg::Key(_) => None,
    }
}

/// `failure` in Go's words.
fn go_message(kind: Kind, work: &Value, failure: &Failure, expected: String) -> String {
    let (found, _) = split_message(&failure.msg);
    let value = at(work, &failure.path).cloned().unwrap_or(Value::Null);
    if expected == "a base64-encoded string" {
        if let Value::String(s) = &value {
            // encoding/json saves base64.CorruptInputError as is
            return format!(
                "illegal base64 data at input byte {}",
                base64_error_offset(s)
            );
        }
    }
    let go_value = match &value {
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".into(),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) => {
            if expected.starts_with('i') || expected.starts_with('u') || expected == "IntOrString" {
                format!("number {n}")
            } else {
                "number".into()
            }
        }
        Value::Null => found.to_string(),
    };
    if expected == "IntOrString" {
        // IntOrString.UnmarshalJSON: json.Unmarshal(value, &intstr.IntVal)
        return format!("json: cannot unmarshal {go_value} into Go value of type int32");
    }
    if is_time(&expected) {
        // metav1.Time.UnmarshalJSON: json.Unmarshal(b, &str)
        return format!("json: cannot unmarshal {go_value} into Go value of type string");
    }
    let (strukt, fields) = struct_context(kind, work, &failure.path);
    let go_type = named_type(&strukt, fields.last(), failure.path.last())
        .unwrap_or_else(|| go_type(kind, work, &failure.path, &expected));
    if fields.is_empty() {
        return format!("json: cannot unmarshal {go_value} into Go value of type {go_type}");
    }
    format!(
        "json: cannot unmarshal {go_value} into Go struct field {strukt}.{} of type {go_type}",
        fields.join(".")
    )
}

/// Go's error context for `path`: the innermost struct whose field the
/// path enters, and the struct fields along the path (map keys and
/// indices are not fields).
fn struct_context(kind: Kind, work: &Value, path: &[Seg]) -> (String, Vec<String>) {
    let mut strukt = String::new();
    let mut fields = Vec::new();
    for (i, seg) in path.iter().enumerate() {
        let Seg::Key(k) = seg else { continue };
        let parent = &path[..i];
        let expected = if parent.is_empty() {
            // the object itself: its kind
            work.get("kind").and_then(Value::as_str).map(str::to_string)
        } else {
            expected_at(kind, work, parent)
        };
        match expected {
            Some(e) if e == "a map" => {}
            Some(e) => {
                strukt = e;
                fields.push(k.clone());
            }
            None => {}
        }
    }
    (strukt, fields)
}

/// The offset `base64.StdEncoding.Decode` reports in its
/// `CorruptInputError` for `s` (newlines are skipped, as Go does): the
/// first byte outside the alphabet, a misplaced `=`, or the start of an
/// incomplete final quantum.
fn base64_error_offset(s: &str) -> usize {
    let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let bytes = s.as_bytes();
    let mut quantum = 0;
    let mut quantum_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' || b == b'\r' {
            continue;
        }
        if b == b'=' {
            // padding is only allowed as the last one or two bytes of a quantum
            let rest: Vec<u8> = bytes[i..]
                .iter()
                .copied()
                .filter(|c| *c != b'\n' && *c != b'\r')
                .collect();
            let ok = match quantum {
                2 => rest == b"==",
                3 => rest == b"=",
                _ => false,
            };
            return if ok { usize::MAX } else { i };
        }
        if !valid(b) {
            return i;
        }
        if quantum == 0 {
            quantum_start = i;
        }
        quantum = (quantum + 1) % 4;
    }
    if quantum == 0 {
        usize::MAX
    } else {
        quantum_start
    }
}

fn at<'a>(v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| match seg {
        Seg::Key(k) => cur.get(k.as_str()),
        Seg::Index(i) => cur.get(*i),
    })
}

fn at_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, seg| match seg {
        Seg::Key(k) => cur.get_mut(k.as_str()),
        Seg::Index(i) => cur.get_mut(*i),
    })
}

/// Puts `value` at `path` (its parent must exist).
fn insert_at(v: &mut Value, path: &[Seg], value: Value) {
    let Some((last, parent)) = path.split_last() else {
        *v = value;
        return;
    };
    match (at_mut(v, parent), last) {
        (Some(Value::Object(m)), Seg::Key(k)) => {
            m.insert(k.clone(), value);
        }
        (Some(Value::Array(a)), Seg::Index(i)) => {
            if let Some(slot) = a.get_mut(*i) {
                *slot = value;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
