//! The configuration and storage printers: ConfigMap (DATA counts `data`
//! and `binaryData`), Secret (TYPE, DATA), ServiceAccount (SECRETS) and
//! PersistentVolumeClaim (STATUS, VOLUME, CAPACITY, ACCESS MODES,
//! STORAGECLASS, VOLUMEATTRIBUTESCLASS, VOLUMEMODE when wide).

use serde_json::{json, Value};

use super::column::{col, wide, Printer, AGE, NAME};
use super::descriptions as d;
use super::format::{age, items, keys, name, text};

pub(super) static CONFIG_MAP: Printer =
    Printer::new(&[NAME, col("Data", "string", d::CM_DATA), AGE], config_map);

fn config_map(obj: &Value) -> Vec<Value> {
    vec![
        name(obj),
        json!(keys(obj, "/data") + keys(obj, "/binaryData")),
        age(obj),
    ]
}

pub(super) static SECRET: Printer = Printer::new(
    &[
        NAME,
        col("Type", "string", d::SECRET_TYPE),
        col("Data", "string", d::SECRET_DATA),
        AGE,
    ],
    secret,
);

/// `len(secret.Data)` once `stringData` is merged into `data`, as the
/// real server's conversion does before storing (this server stores
/// `stringData` as sent): the union of both maps' keys.
fn secret_data(obj: &Value) -> usize {
    let keys = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys())
    };
    keys("/data")
        .chain(keys("/stringData"))
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

fn secret(obj: &Value) -> Vec<Value> {
    vec![
        name(obj),
        json!(text(obj, "/type")),
        json!(secret_data(obj)),
        age(obj),
    ]
}

pub(super) static SERVICE_ACCOUNT: Printer = Printer::new(
    &[NAME, col("Secrets", "string", d::SA_SECRETS), AGE],
    service_account,
);

fn service_account(obj: &Value) -> Vec<Value> {
    vec![name(obj), json!(items(obj, "/secrets").len()), age(obj)]
}

pub(super) static PERSISTENT_VOLUME_CLAIM: Printer = Printer::new(
    &[
        NAME,
        col("Status", "string", d::PVC_PHASE),
        col("Volume", "string", d::PVC_VOLUME_NAME),
        col("Capacity", "string", d::PVC_CAPACITY),
        col("Access Modes", "string", d::PVC_ACCESS_MODES),
        col("StorageClass", "string", "StorageClass of the pvc"),
        col(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pvc",
        ),
        AGE,
        wide("VolumeMode", "string", d::PVC_VOLUME_MODE),
    ],
    persistent_volume_claim,
);

/// `helper.GetAccessModesAsString`: the modes present, abbreviated, in
/// the fixed order RWO, ROX, RWX, RWOP.
fn access_modes(modes: &[Value]) -> String {
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.iter().any(|m| m == mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn persistent_volume_claim(obj: &Value) -> Vec<Value> {
    let deleting = obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let phase = if deleting {
        "Terminating"
    } else {
        text(obj, "/status/phase")
    };
    let volume = text(obj, "/spec/volumeName");
    // Capacity and access modes only once bound, from the status. The
    // quantity is printed as stored (the real server canonicalizes it).
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            text(obj, "/status/capacity/storage").to_string(),
            access_modes(items(obj, "/status/accessModes")),
        )
    };
    // helper.GetPersistentVolumeClaimClass: the beta annotation wins.
    let class = obj
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
        .unwrap_or_else(|| text(obj, "/spec/storageClassName"));
    let unset = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("<unset>")
            .to_string()
    };
    vec![
        name(obj),
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(unset("/spec/volumeAttributesClassName")),
        age(obj),
        json!(unset("/spec/volumeMode")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_counts() {
        let cm = json!({"data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(config_map(&cm)[1], 3);
        let s = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(secret(&s)[1..3], [json!("kubernetes.io/tls"), json!(2)]);
        let merged = json!({"data": {"a": "", "b": ""}, "stringData": {"b": "x", "c": "y"}});
        assert_eq!(secret(&merged)[2], 3);
        assert_eq!(service_account(&json!({}))[1], 0);
    }

    #[test]
    fn a_bound_and_a_pending_claim() {
        let bound = json!({"spec": {"volumeName": "pv-1", "storageClassName": "standard",
                                    "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
                       "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}});
        let c = persistent_volume_claim(&bound);
        assert_eq!(
            c[1..7],
            [
                json!("Bound"),
                json!("pv-1"),
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("standard"),
                json!("<unset>")
            ]
        );
        assert_eq!(c[8], "Filesystem");
        let pending = json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}},
                             "status": {"phase": "Pending"}});
        assert_eq!(
            persistent_volume_claim(&pending)[1..6],
            [json!("Pending"), json!(""), json!(""), json!(""), json!("")]
        );
    }
}
