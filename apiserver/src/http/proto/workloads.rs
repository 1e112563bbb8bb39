//! Protobuf decoding of the kinds kubectl's other generator commands send
//! (`kubectl create deployment`, `create service …`, `create job`):
//! message descriptors (field number, JSON name, how to read it) of
//! `k8s.io/api` `generated.proto` for the fields those commands set and
//! their neighbours. Unknown field numbers are skipped; zero scalars that
//! Go's generated code writes for non-pointer fields are dropped as JSON's
//! `omitempty` drops them. It never encodes and never validates.

use serde_json::{Map, Value};

use super::meta::object_meta;
use super::wire::{fields, map_entry, string, Field, ProtoError};

/// How one field is read.
#[derive(Clone, Copy)]
enum Ty {
    /// A string (left out when empty).
    Str,
    /// A repeated string.
    Strs,
    /// A non-pointer integer (left out when 0).
    Int,
    /// A pointer integer (kept when 0).
    IntPtr,
    /// A non-pointer bool (left out when false).
    Bool,
    /// A pointer bool.
    BoolPtr,
    /// `map<string, string>`.
    StrMap,
    /// `map<string, Quantity>` (`ResourceList`).
    Quantities,
    /// `IntOrString`.
    IntOrString,
    /// `ObjectMeta`.
    Meta,
    /// A nested message.
    Msg(&'static [Desc]),
    /// A repeated nested message.
    Msgs(&'static [Desc]),
}

type Desc = (u64, &'static str, Ty);

const EMPTY: &[Desc] = &[];
const SELECTOR_REQUIREMENT: &[Desc] = &[
    (1, "key", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "values", Ty::Strs),
];
const LABEL_SELECTOR: &[Desc] = &[
    (1, "matchLabels", Ty::StrMap),
    (2, "matchExpressions", Ty::Msgs(SELECTOR_REQUIREMENT)),
];
const CONTAINER_PORT: &[Desc] = &[
    (1, "name", Ty::Str),
    (2, "hostPort", Ty::Int),
    (3, "containerPort", Ty::Int),
    (4, "protocol", Ty::Str),
    (5, "hostIP", Ty::Str),
];
const ENV_VAR: &[Desc] = &[(1, "name", Ty::Str), (2, "value", Ty::Str)];
const RESOURCES: &[Desc] = &[
    (1, "limits", Ty::Quantities),
    (2, "requests", Ty::Quantities),
];
const CONTAINER: &[Desc] = &[
    (1, "name", Ty::Str),
    (2, "image", Ty::Str),
    (3, "command", Ty::Strs),
    (4, "args", Ty::Strs),
    (5, "workingDir", Ty::Str),
    (6, "ports", Ty::Msgs(CONTAINER_PORT)),
    (7, "env", Ty::Msgs(ENV_VAR)),
    (8, "resources", Ty::Msg(RESOURCES)),
    (13, "terminationMessagePath", Ty::Str),
    (14, "imagePullPolicy", Ty::Str),
    (16, "stdin", Ty::Bool),
    (17, "stdinOnce", Ty::Bool),
    (18, "tty", Ty::Bool),
    (20, "terminationMessagePolicy", Ty::Str),
];
const POD_SPEC: &[Desc] = &[
    (2, "containers", Ty::Msgs(CONTAINER)),
    (3, "restartPolicy", Ty::Str),
    (4, "terminationGracePeriodSeconds", Ty::IntPtr),
    (5, "activeDeadlineSeconds", Ty::IntPtr),
    (6, "dnsPolicy", Ty::Str),
    (7, "nodeSelector", Ty::StrMap),
    (8, "serviceAccountName", Ty::Str),
    (10, "nodeName", Ty::Str),
    (11, "hostNetwork", Ty::Bool),
    (12, "hostPID", Ty::Bool),
    (13, "hostIPC", Ty::Bool),
    (16, "hostname", Ty::Str),
    (17, "subdomain", Ty::Str),
    (19, "schedulerName", Ty::Str),
    (20, "initContainers", Ty::Msgs(CONTAINER)),
];
const POD_TEMPLATE: &[Desc] = &[(1, "metadata", Ty::Meta), (2, "spec", Ty::Msg(POD_SPEC))];
const DEPLOYMENT_STRATEGY: &[Desc] = &[(1, "type", Ty::Str)];
const DEPLOYMENT_SPEC: &[Desc] = &[
    (1, "replicas", Ty::IntPtr),
    (2, "selector", Ty::Msg(LABEL_SELECTOR)),
    (3, "template", Ty::Msg(POD_TEMPLATE)),
    (4, "strategy", Ty::Msg(DEPLOYMENT_STRATEGY)),
    (5, "minReadySeconds", Ty::Int),
    (6, "revisionHistoryLimit", Ty::IntPtr),
    (7, "paused", Ty::Bool),
    (9, "progressDeadlineSeconds", Ty::IntPtr),
];
const SERVICE_PORT: &[Desc] = &[
    (1, "name", Ty::Str),
    (2, "protocol", Ty::Str),
    (3, "port", Ty::Int),
    (4, "targetPort", Ty::IntOrString),
    (5, "nodePort", Ty::Int),
    (6, "appProtocol", Ty::Str),
];
const SERVICE_SPEC: &[Desc] = &[
    (1, "ports", Ty::Msgs(SERVICE_PORT)),
    (2, "selector", Ty::StrMap),
    (3, "clusterIP", Ty::Str),
    (4, "type", Ty::Str),
    (5, "externalIPs", Ty::Strs),
    (7, "sessionAffinity", Ty::Str),
    (10, "externalName", Ty::Str),
];
const SERVICE_STATUS: &[Desc] = &[(1, "loadBalancer", Ty::Msg(EMPTY))];
const JOB_SPEC: &[Desc] = &[
    (1, "parallelism", Ty::IntPtr),
    (2, "completions", Ty::IntPtr),
    (3, "activeDeadlineSeconds", Ty::IntPtr),
    (4, "selector", Ty::Msg(LABEL_SELECTOR)),
    (5, "manualSelector", Ty::BoolPtr),
    (6, "template", Ty::Msg(POD_TEMPLATE)),
    (7, "backoffLimit", Ty::IntPtr),
    (8, "ttlSecondsAfterFinished", Ty::IntPtr),
    (9, "completionMode", Ty::Str),
    (10, "suspend", Ty::BoolPtr),
];

/// The top-level message of `api_version`/`kind`, if this module reads it.
fn descriptor(api_version: &str, kind: &str) -> Option<&'static [Desc]> {
    const DEPLOYMENT: &[Desc] = &[
        (1, "metadata", Ty::Meta),
        (2, "spec", Ty::Msg(DEPLOYMENT_SPEC)),
        (3, "status", Ty::Msg(EMPTY)),
    ];
    const SERVICE: &[Desc] = &[
        (1, "metadata", Ty::Meta),
        (2, "spec", Ty::Msg(SERVICE_SPEC)),
        (3, "status", Ty::Msg(SERVICE_STATUS)),
    ];
    const JOB: &[Desc] = &[
        (1, "metadata", Ty::Meta),
        (2, "spec", Ty::Msg(JOB_SPEC)),
        (3, "status", Ty::Msg(EMPTY)),
    ];
    match (api_version, kind) {
        ("apps/v1", "Deployment") => Some(DEPLOYMENT),
        ("v1", "Service") => Some(SERVICE),
        ("batch/v1", "Job") => Some(JOB),
        _ => None,
    }
}

/// The JSON form of a `kind` message in `api_version`, if this module
/// reads that kind.
pub(super) fn decode(
    api_version: &str,
    kind: &str,
    raw: &[u8],
) -> Option<Result<Map<String, Value>, ProtoError>> {
    descriptor(api_version, kind).map(|d| message(d, raw))
}

/// Varints of Go's int32/int64 fields are two's complement.
fn int(v: u64) -> Value {
    Value::from(v as i64)
}

fn int_or_string(b: &[u8]) -> Result<Value, ProtoError> {
    let (mut ty, mut int_val, mut str_val) = (0, 0, String::new());
    for (num, f) in fields(b)? {
        match (num, f) {
            (1, Field::Varint(v)) => ty = v,
            (2, Field::Varint(v)) => int_val = v,
            (3, Field::Bytes(x)) => str_val = string(x)?,
            _ => {}
        }
    }
    Ok(if ty == 1 {
        Value::String(str_val)
    } else {
        int(int_val)
    })
}

/// Decodes one message by its descriptor.
fn message(desc: &[Desc], b: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let mut out = Map::new();
    for (num, f) in fields(b)? {
        let Some((_, name, ty)) = desc.iter().find(|(n, _, _)| *n == num) else {
            continue;
        };
        let name = (*name).to_string();
        let push = |out: &mut Map<String, Value>, v: Value| {
            if let Value::Array(a) = out
                .entry(name.clone())
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                a.push(v);
            }
        };
        let entry = |out: &mut Map<String, Value>, (k, v): (String, Value)| {
            if let Value::Object(m) = out
                .entry(name.clone())
                .or_insert_with(|| Value::Object(Map::new()))
            {
                m.insert(k, v);
            }
        };
        match (*ty, f) {
            (Ty::Str, Field::Bytes(x)) => {
                let s = string(x)?;
                if !s.is_empty() {
                    out.insert(name, Value::String(s));
                }
            }
            (Ty::Strs, Field::Bytes(x)) => push(&mut out, Value::String(string(x)?)),
            (Ty::Int, Field::Varint(v)) if v != 0 => {
                out.insert(name, int(v));
            }
            (Ty::IntPtr, Field::Varint(v)) => {
                out.insert(name, int(v));
            }
            (Ty::Bool, Field::Varint(v)) if v != 0 => {
                out.insert(name, Value::Bool(true));
            }
            (Ty::BoolPtr, Field::Varint(v)) => {
                out.insert(name, Value::Bool(v != 0));
            }
            (Ty::StrMap, Field::Bytes(x)) => entry(&mut out, map_entry(x, false)?),
            (Ty::Quantities, Field::Bytes(x)) => {
                let mut key = String::new();
                let mut value = String::new();
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(k)) => key = string(k)?,
                        (2, Field::Bytes(q)) => {
                            for (qn, qf) in fields(q)? {
                                if let (1, Field::Bytes(s)) = (qn, qf) {
                                    value = string(s)?;
                                }
                            }
                        }
                        _ => {}
                    }
                }
                entry(&mut out, (key, Value::String(value)));
            }
            (Ty::IntOrString, Field::Bytes(x)) => {
                out.insert(name, int_or_string(x)?);
            }
            (Ty::Meta, Field::Bytes(x)) => {
                out.insert(name, object_meta(x)?);
            }
            (Ty::Msg(d), Field::Bytes(x)) => {
                out.insert(name, Value::Object(message(d, x)?));
            }
            (Ty::Msgs(d), Field::Bytes(x)) => push(&mut out, Value::Object(message(d, x)?)),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::wire::field as bytes;
    use super::*;

    fn varint(num: u64, v: u8) -> Vec<u8> {
        vec![u8::try_from(num << 3).unwrap(), v]
    }

    #[test]
    fn a_deployment_with_a_container_decodes_as_its_json() {
        let container = [
            bytes(1, b"web"),
            bytes(2, b"nginx"),
            bytes(5, b""),
            bytes(8, &[]),
        ]
        .concat();
        let pod_spec = [bytes(2, &container), bytes(6, b""), varint(11, 0)].concat();
        let template = [
            bytes(
                1,
                &bytes(11, &[bytes(1, b"app"), bytes(2, b"web")].concat()),
            ),
            bytes(2, &pod_spec),
        ]
        .concat();
        let spec = [
            varint(1, 2),
            bytes(3, &template),
            bytes(4, &[]),
            varint(5, 0),
        ]
        .concat();
        let d = [bytes(1, &bytes(1, b"web")), bytes(2, &spec), bytes(3, &[])].concat();
        let got = message(descriptor("apps/v1", "Deployment").unwrap(), &d).unwrap();
        assert_eq!(
            Value::Object(got),
            serde_json::json!({"metadata": {"name": "web"}, "status": {}, "spec": {"replicas": 2, "strategy": {},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {}}]}}}})
        );
    }
}
