//! A Service's allocated values, as the real server's allocators give them:
//! a cluster IP from the service CIDR 10.0.0.0/24 (the recorded server's
//! `--service-cluster-ip-range`; 10.0.0.1 is the `kubernetes` service's),
//! node ports from 30000-32767, single-stack IPv4 families, and an update
//! keeping them when its body leaves them out. Pure: the caller passes what
//! is in use; it never reads the store and never validates (requested node
//! ports are checked by `spec_rules` first).

use std::collections::HashSet;

use serde_json::{json, Value};

use super::spec_rules::NODE_PORTS;

/// The first three octets of the service CIDR.
const CIDR_PREFIX: &str = "10.0.0.";

/// A range is full.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    /// No cluster IP is free.
    #[error("failed to allocate a serviceIP: range is full")]
    ClusterIps,
    /// No node port is free.
    #[error("failed to allocate a nodePort: range is full")]
    NodePorts,
}

/// A random start in `0..n` (uuid v4 is the crate's randomness).
fn random_below(n: u64) -> u64 {
    let r = uuid::Uuid::new_v4().as_u128() as u64;
    r % n.max(1)
}

/// The first free value of `lo..=hi` from a random start, wrapping.
fn pick(lo: i64, hi: i64, free: impl Fn(i64) -> bool) -> Option<i64> {
    let n = u64::try_from(hi - lo + 1).unwrap_or(1);
    let start = random_below(n);
    (0..n)
        .map(|i| lo + i64::try_from((start + i) % n).unwrap_or(0))
        .find(|v| free(*v))
}

/// What a stored Service holds of the allocators' ranges: decoded from its
/// JSON without building the whole object, since every create scans every
/// Service.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Held {
    metadata: HeldKey,
    spec: HeldSpec,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeldKey {
    namespace: String,
    name: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeldSpec {
    #[serde(rename = "clusterIP")]
    cluster_ip: Option<String>,
    ports: Vec<HeldPort>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeldPort {
    #[serde(rename = "nodePort")]
    node_port: Option<i64>,
}

/// The cluster IPs and node ports of the stored Services `services` (their
/// JSON), leaving out the one named `except` (namespace, name).
pub fn in_use<'a>(
    services: impl IntoIterator<Item = &'a [u8]>,
    except: Option<(&str, &str)>,
) -> (HashSet<String>, HashSet<i64>) {
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for json in services {
        let Ok(s) = serde_json::from_slice::<Held>(json) else {
            continue;
        };
        if except == Some((s.metadata.namespace.as_str(), s.metadata.name.as_str())) {
            continue;
        }
        ips.extend(s.spec.cluster_ip);
        ports.extend(s.spec.ports.into_iter().filter_map(|p| p.node_port));
    }
    (ips, ports)
}

/// Gives a new Service (`svc`) its cluster IP, families and node ports.
///
/// # Errors
///
/// [`AllocError`] when a range is full.
pub fn allocate(
    svc: &mut Value,
    ips: &HashSet<String>,
    ports: &HashSet<i64>,
) -> Result<(), AllocError> {
    let Some(spec) = svc.get_mut("spec").filter(|s| s.is_object()) else {
        return Ok(());
    };
    let ty = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if ty == "ExternalName" {
        return Ok(());
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_string(),
        _ => {
            let last = pick(2, 254, |n| !ips.contains(&format!("{CIDR_PREFIX}{n}")))
                .ok_or(AllocError::ClusterIps)?;
            format!("{CIDR_PREFIX}{last}")
        }
    };
    spec["clusterIP"] = json!(ip);
    if spec.get("clusterIPs").is_none() {
        spec["clusterIPs"] = json!([ip]);
    }
    if spec.get("ipFamilies").is_none() {
        spec["ipFamilies"] = json!(["IPv4"]);
    }
    if spec.get("ipFamilyPolicy").is_none() {
        spec["ipFamilyPolicy"] = json!("SingleStack");
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        let mut taken = ports.clone();
        for p in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if p.get("nodePort").is_none() {
                let n = pick(NODE_PORTS.0, NODE_PORTS.1, |n| !taken.contains(&n))
                    .ok_or(AllocError::NodePorts)?;
                taken.insert(n);
                p["nodePort"] = json!(n);
            }
        }
    }
    Ok(())
}

/// An update of a Service keeps the allocated values its body leaves out
/// (`patchAllocatedValues`): cluster IPs, families and node ports (by port
/// and protocol).
pub fn keep_allocated(old: &Value, new: &mut Value) {
    let Some(old_spec) = old.get("spec") else {
        return;
    };
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if let Some(v) = old_spec.get(k) {
            spec.entry(k).or_insert_with(|| v.clone());
        }
    }
    let old_ports = old_spec.get("ports").and_then(Value::as_array);
    let key = |p: &Value| (p.get("port").cloned(), p.get("protocol").cloned());
    if let (Some(old_ports), Some(ports)) = (
        old_ports,
        spec.get_mut("ports").and_then(Value::as_array_mut),
    ) {
        for p in ports.iter_mut().filter(|p| p.get("nodePort").is_none()) {
            if let Some(n) = old_ports
                .iter()
                .find(|o| key(o) == key(p))
                .and_then(|o| o.get("nodePort"))
            {
                p["nodePort"] = n.clone();
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ips_come_from_the_cidr_and_avoid_used_ones() {
        let used: HashSet<String> = (2..254).map(|n| format!("10.0.0.{n}")).collect();
        let mut s = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        allocate(&mut s, &used, &HashSet::new()).unwrap();
        assert_eq!(s["spec"]["clusterIP"], "10.0.0.254");
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.0.0.254"]));
        let np = s["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!((30000..=32767).contains(&np));
        let full: HashSet<String> = (2..=254).map(|n| format!("10.0.0.{n}")).collect();
        let mut s = json!({"spec": {}});
        assert_eq!(
            allocate(&mut s, &full, &HashSet::new()),
            Err(AllocError::ClusterIps)
        );
    }

    #[test]
    fn in_use_reads_ips_and_node_ports_and_leaves_out_the_excepted_service() {
        let a = json!({"metadata": {"namespace": "d", "name": "a"},
            "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 80, "nodePort": 30001}, {"port": 81}]}});
        let b = json!({"metadata": {"namespace": "d", "name": "b"}, "spec": {"clusterIP": "None"}});
        let (a, b) = (a.to_string(), b.to_string());
        let all = [a.as_bytes(), b.as_bytes()];
        let (ips, ports) = in_use(all, None);
        assert_eq!(
            ips,
            HashSet::from(["10.0.0.5".to_string(), "None".to_string()])
        );
        assert_eq!(ports, HashSet::from([30001]));
        let (ips, ports) = in_use(all, Some(("d", "a")));
        assert_eq!(ips, HashSet::from(["None".to_string()]));
        assert!(ports.is_empty());
    }

    #[test]
    fn updates_keep_what_was_allocated() {
        let old = json!({"spec": {"clusterIP": "10.0.0.9", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001}]}});
        let mut new = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}]}});
        keep_allocated(&old, &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.9");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30001);
    }
}
