//! The cluster IPs and node ports Services hold, as the real server's
//! allocators keep them (`pkg/registry/core/service/ipallocator`,
//! `portallocator`, `storage/alloc.go`): cluster IPs from the service CIDR
//! 10.0.0.0/24 (the recorded server's `--service-cluster-ip-range`),
//! node ports from 30000-32767, single-stack IPv4 families, and an update
//! keeping them when its body leaves them out.
//!
//! [`Allocator`] owns which Service holds which value: it follows the
//! store's committed Services (a store observer, so a delete by any path
//! — the API, a namespace's deletion, the garbage collector — frees what
//! the Service held, and a restart rebuilds it from what is stored) and
//! the values in-flight writes have reserved but not yet stored, so two
//! concurrent creates never get one value. A create costs a few map
//! lookups, not a scan of every Service. It never writes to the store,
//! never validates anything but the values it hands out, and never
//! decides the HTTP error (the caller maps [`AllocError`]).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use crate::rules::go_words::go_quote;
use crate::storage::store::{ObjKey, Store};

/// The first three octets of the service CIDR.
const CIDR_PREFIX: [u8; 3] = [10, 0, 0];

/// Host numbers (last octet) a requested cluster IP may have: the CIDR
/// without its network and broadcast addresses, as the bitmap allocator's
/// range.
const IP_HOSTS: (u8, u8) = (1, 254);

/// Host numbers handed out when a Service names no cluster IP (10.0.0.1
/// is what a real cluster's `kubernetes` Service holds).
const DYNAMIC_IP_HOSTS: (u8, u8) = (2, 254);

/// Node ports, inclusive (`--service-node-port-range`'s default).
pub(crate) const NODE_PORTS: (i64, i64) = (30000, 32767);

/// Why a Service's values could not be allocated.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum AllocError {
    /// No cluster IP is free (the real server's 500).
    #[error("failed to allocate a serviceIP: range is full")]
    ClusterIps,
    /// No node port is free (the real server's 500).
    #[error("failed to allocate a nodePort: range is full")]
    NodePorts,
    /// A requested value is out of range or held by another Service: the
    /// field and its `field.Invalid` message (the real server's 422).
    #[error("{0}: {1}")]
    Refused(String, String),
}

/// A random start in `0..n` (uuid v4 is the crate's randomness).
fn random_below(n: u64) -> u64 {
    let r = uuid::Uuid::new_v4().as_u128() as u64;
    r % n.max(1)
}

/// The first value of `lo..=hi` that `free` accepts, from a random start,
/// wrapping: at most the range's size in lookups, whatever the number of
/// Services.
fn pick(lo: i64, hi: i64, free: impl Fn(i64) -> bool) -> Option<i64> {
    let n = u64::try_from(hi - lo + 1).unwrap_or(1);
    let start = random_below(n);
    (0..n)
        .map(|i| lo + i64::try_from((start + i) % n).unwrap_or(0))
        .find(|v| free(*v))
}

/// The host number of `ip` when it is in the service CIDR's range.
fn ip_host(ip: &str) -> Option<u8> {
    let ip: Ipv4Addr = ip.parse().ok()?;
    let [a, b, c, d] = ip.octets();
    ([a, b, c] == CIDR_PREFIX && (IP_HOSTS.0..=IP_HOSTS.1).contains(&d)).then_some(d)
}

fn ip_string(host: u8) -> String {
    let [a, b, c] = CIDR_PREFIX;
    Ipv4Addr::new(a, b, c, host).to_string()
}

/// Who holds one value: a stored Service, an in-flight write, or both for
/// the moment between a write's commit and the end of its request.
#[derive(Debug, Default)]
struct Holder {
    stored: Option<ObjKey>,
    reserved: Option<u64>,
}

/// The values one Service or one in-flight write holds.
#[derive(Debug, Default, PartialEq, Eq)]
struct Holding {
    ips: Vec<u8>,
    ports: Vec<i64>,
}

#[derive(Debug, Default)]
struct State {
    ips: HashMap<u8, Holder>,
    ports: HashMap<i64, Holder>,
    stored: HashMap<ObjKey, Holding>,
    reserved: HashMap<u64, Holding>,
    next_token: u64,
}

/// Whether `v` is held by anyone but the Service `key` and the write `token`.
fn taken<T: std::hash::Hash + Eq>(
    holders: &HashMap<T, Holder>,
    v: &T,
    key: &ObjKey,
    token: u64,
) -> bool {
    holders.get(v).is_some_and(|h| {
        h.reserved.is_some_and(|t| t != token) || h.stored.as_ref().is_some_and(|k| k != key)
    })
}

fn reserve<T: std::hash::Hash + Eq + Copy>(
    holders: &mut HashMap<T, Holder>,
    v: T,
    token: u64,
    held: &mut Vec<T>,
) {
    holders.entry(v).or_default().reserved = Some(token);
    held.push(v);
}

/// Takes `who`'s mark off each value of `held`, forgetting values nobody holds.
fn release<T: std::hash::Hash + Eq>(
    holders: &mut HashMap<T, Holder>,
    held: &[T],
    mut unmark: impl FnMut(&mut Holder),
) {
    for v in held {
        if let Some(h) = holders.get_mut(v) {
            unmark(h);
            if h.stored.is_none() && h.reserved.is_none() {
                holders.remove(v);
            }
        }
    }
}

/// What a stored Service holds of the allocators' ranges, decoded from its
/// JSON without building the whole object.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeldView {
    spec: HeldSpec,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeldSpec {
    #[serde(rename = "clusterIP")]
    cluster_ip: Option<String>,
    #[serde(rename = "clusterIPs")]
    cluster_ips: Vec<String>,
    ports: Vec<HeldPort>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeldPort {
    #[serde(rename = "nodePort")]
    node_port: Option<i64>,
}

fn holding_of(json: &[u8]) -> Holding {
    let Ok(view) = serde_json::from_slice::<HeldView>(json) else {
        return Holding::default();
    };
    let mut ips: Vec<u8> = view
        .spec
        .cluster_ips
        .iter()
        .chain(view.spec.cluster_ip.as_ref())
        .filter_map(|ip| ip_host(ip))
        .collect();
    ips.sort_unstable();
    ips.dedup();
    let mut ports: Vec<i64> = view.spec.ports.iter().filter_map(|p| p.node_port).collect();
    ports.sort_unstable();
    ports.dedup();
    Holding { ips, ports }
}

/// A `[]string` as Go's `%#v` prints it.
fn go_strings(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The cluster IPs and node ports held by stored Services and reserved by
/// in-flight writes (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Allocator {
    state: Mutex<State>,
}

/// The values one write reserved; they stay reserved until this is
/// dropped, by which time a committed write's Service holds them itself.
#[derive(Debug)]
pub(crate) struct Reservation {
    allocator: Arc<Allocator>,
    token: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut st = self.allocator.lock();
        if let Some(held) = st.reserved.remove(&self.token) {
            let token = self.token;
            let unmark = |h: &mut Holder| {
                if h.reserved == Some(token) {
                    h.reserved = None;
                }
            };
            release(&mut st.ips, &held.ips, unmark);
            release(&mut st.ports, &held.ports, unmark);
        }
    }
}

impl Allocator {
    /// An allocator following `store`'s Services, starting from those it
    /// holds now.
    pub(crate) fn attach(store: &Store) -> Arc<Self> {
        let allocator = Arc::new(Allocator::default());
        let observer = allocator.clone();
        store.observe(
            "services",
            Arc::new(move |key: &ObjKey, json: Option<&[u8]>| observer.observed(key, json)),
        );
        allocator
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Service `key` is now stored as `json` (`None`: deleted): it
    /// holds exactly the values that JSON names.
    fn observed(&self, key: &ObjKey, json: Option<&[u8]>) {
        let now = json.map(holding_of).unwrap_or_default();
        let mut st = self.lock();
        let st = &mut *st;
        if let Some(before) = st.stored.remove(key) {
            let unmark = |h: &mut Holder| {
                if h.stored.as_ref() == Some(key) {
                    h.stored = None;
                }
            };
            release(&mut st.ips, &before.ips, unmark);
            release(&mut st.ports, &before.ports, unmark);
        }
        for ip in &now.ips {
            st.ips.entry(*ip).or_default().stored = Some(key.clone());
        }
        for port in &now.ports {
            st.ports.entry(*port).or_default().stored = Some(key.clone());
        }
        if now != Holding::default() {
            st.stored.insert(key.clone(), now);
        }
    }

    /// Gives the Service `svc`, about to be stored under `key` (a create,
    /// or an update whose body [`keep_allocated`] has filled in), its
    /// cluster IP, families and node ports, checking the ones it requests
    /// against every other Service's and every in-flight write's. What it
    /// takes is reserved until the returned [`Reservation`] is dropped:
    /// keep it until the write is stored or has failed.
    ///
    /// # Errors
    ///
    /// [`AllocError`] when a range is full or a requested value is out of
    /// range or held by another Service; nothing stays reserved then.
    pub(crate) fn allocate(
        self: &Arc<Self>,
        key: &ObjKey,
        svc: &mut Value,
    ) -> Result<Reservation, AllocError> {
        let mut st = self.lock();
        let token = st.next_token;
        st.next_token += 1;
        let mut held = Holding::default();
        let result = allocate_in(&mut st, key, token, svc, &mut held);
        st.reserved.insert(token, held);
        drop(st);
        let reservation = Reservation {
            allocator: self.clone(),
            token,
        };
        result.map(|()| reservation)
    }
}

fn allocate_in(
    st: &mut State,
    key: &ObjKey,
    token: u64,
    svc: &mut Value,
    held: &mut Holding,
) -> Result<(), AllocError> {
    let Some(spec) = svc.get_mut("spec").filter(|s| s.is_object()) else {
        return Ok(());
    };
    let ty = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if ty == "ExternalName" {
        return Ok(());
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some("None") => "None".to_string(),
        Some(ip) if !ip.is_empty() => {
            let ip = ip.to_string();
            let refuse = |why: String| {
                let ips: Vec<&str> = spec
                    .get("clusterIPs")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_else(|| vec![ip.as_str()]);
                AllocError::Refused(
                    "spec.clusterIPs".into(),
                    format!(
                        "Invalid value: {}: failed to allocate IP {ip}: {why}",
                        go_strings(&ips)
                    ),
                )
            };
            let Some(host) = ip_host(&ip) else {
                return Err(refuse(format!(
                    "provided IP {ip} is not in the valid range"
                )));
            };
            if taken(&st.ips, &host, key, token) {
                return Err(refuse("provided IP is already allocated".into()));
            }
            reserve(&mut st.ips, host, token, &mut held.ips);
            ip
        }
        _ => {
            let host = pick(
                i64::from(DYNAMIC_IP_HOSTS.0),
                i64::from(DYNAMIC_IP_HOSTS.1),
                |h| !taken(&st.ips, &(h as u8), key, token),
            )
            .ok_or(AllocError::ClusterIps)? as u8;
            reserve(&mut st.ips, host, token, &mut held.ips);
            ip_string(host)
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
    if ty != "NodePort" && ty != "LoadBalancer" {
        return Ok(());
    }
    // One node port per service port number, whatever its protocols
    // (`initNodePorts`' svcPortToNodePort).
    let mut by_port: HashMap<i64, i64> = HashMap::new();
    let ports = spec.get_mut("ports").and_then(Value::as_array_mut);
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        let requested = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if requested != 0 {
            let refuse = |why: String| {
                AllocError::Refused(
                    format!("spec.ports[{i}].nodePort"),
                    format!("Invalid value: {requested}: {why}"),
                )
            };
            if !(NODE_PORTS.0..=NODE_PORTS.1).contains(&requested) {
                return Err(refuse(format!(
                    "provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORTS.0, NODE_PORTS.1
                )));
            }
            if taken(&st.ports, &requested, key, token) {
                return Err(refuse("provided port is already allocated".into()));
            }
            if !held.ports.contains(&requested) {
                reserve(&mut st.ports, requested, token, &mut held.ports);
            }
            by_port.entry(port).or_insert(requested);
        } else if let Some(n) = by_port.get(&port) {
            p["nodePort"] = json!(n);
        } else {
            let n = pick(NODE_PORTS.0, NODE_PORTS.1, |n| {
                !taken(&st.ports, &n, key, token) && !held.ports.contains(&n)
            })
            .ok_or(AllocError::NodePorts)?;
            reserve(&mut st.ports, n, token, &mut held.ports);
            by_port.insert(port, n);
            p["nodePort"] = json!(n);
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

    fn key(name: &str) -> ObjKey {
        ("d".to_string(), name.to_string())
    }

    fn node_port_svc(ip: Option<&str>, node_port: Option<i64>) -> Value {
        let mut s = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        if let Some(ip) = ip {
            s["spec"]["clusterIP"] = json!(ip);
        }
        if let Some(n) = node_port {
            s["spec"]["ports"][0]["nodePort"] = json!(n);
        }
        s
    }

    /// Creates `svc` as `name` in `store`, holding the reservation until
    /// it is stored, as the handlers do.
    fn create(store: &Store, a: &Arc<Allocator>, name: &str, mut svc: Value) -> Value {
        let _held = a.allocate(&key(name), &mut svc).unwrap();
        store.create("services", key(name), svc.clone()).unwrap();
        svc
    }

    #[test]
    fn cluster_ips_come_from_the_cidr_and_a_full_range_is_an_error() {
        let store = Store::new(100);
        let a = Allocator::attach(&store);
        let mut held = Vec::new();
        for i in 2..=254 {
            let mut s = json!({"spec": {}});
            held.push(a.allocate(&key(&format!("s{i}")), &mut s).unwrap());
            let host = ip_host(s["spec"]["clusterIP"].as_str().unwrap()).unwrap();
            assert!((2..=254).contains(&host));
            assert_eq!(s["spec"]["clusterIPs"], json!([s["spec"]["clusterIP"]]));
        }
        let mut s = json!({"spec": {}});
        assert_eq!(
            a.allocate(&key("last"), &mut s).unwrap_err(),
            AllocError::ClusterIps
        );
        // Dropped reservations of writes that never stored free the range.
        drop(held);
        assert!(a.allocate(&key("last"), &mut json!({"spec": {}})).is_ok());
    }

    #[test]
    fn reservations_in_flight_are_never_handed_out_twice_across_threads() {
        let store = Arc::new(Store::new(100));
        let a = Allocator::attach(&store);
        let values: Vec<(String, i64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|t| {
                    let (a, store) = (a.clone(), store.clone());
                    s.spawn(move || {
                        (0..25)
                            .map(|i| {
                                let svc = create(
                                    &store,
                                    &a,
                                    &format!("t{t}-{i}"),
                                    node_port_svc(None, None),
                                );
                                (
                                    svc["spec"]["clusterIP"].as_str().unwrap().to_string(),
                                    svc["spec"]["ports"][0]["nodePort"].as_i64().unwrap(),
                                )
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let ips: std::collections::HashSet<_> = values.iter().map(|v| &v.0).collect();
        let ports: std::collections::HashSet<_> = values.iter().map(|v| v.1).collect();
        assert_eq!((ips.len(), ports.len()), (200, 200));
    }

    #[test]
    fn a_deleted_services_values_are_free_again_and_a_restart_rebuilds_what_is_held() {
        let store = Store::new(100);
        let a = Allocator::attach(&store);
        create(
            &store,
            &a,
            "old",
            node_port_svc(Some("10.0.0.9"), Some(30009)),
        );
        let mut again = node_port_svc(Some("10.0.0.9"), Some(30009));
        assert_eq!(
            a.allocate(&key("new"), &mut again).unwrap_err(),
            AllocError::Refused(
                "spec.clusterIPs".into(),
                r#"Invalid value: []string{"10.0.0.9"}: failed to allocate IP 10.0.0.9: provided IP is already allocated"#.into()
            )
        );
        // A fresh allocator over the same store sees what is stored.
        let rebuilt = Allocator::attach(&store);
        let mut port_only = node_port_svc(None, Some(30009));
        assert_eq!(
            rebuilt.allocate(&key("new"), &mut port_only).unwrap_err(),
            AllocError::Refused(
                "spec.ports[0].nodePort".into(),
                "Invalid value: 30009: provided port is already allocated".into()
            )
        );
        store.delete("services", &key("old"), None, None).unwrap();
        for a in [&a, &rebuilt] {
            let mut s = node_port_svc(Some("10.0.0.9"), Some(30009));
            assert!(a.allocate(&key("new"), &mut s).is_ok());
        }
    }

    #[test]
    fn an_update_keeps_its_own_values_and_releases_what_it_gives_up() {
        let store = Store::new(100);
        let a = Allocator::attach(&store);
        create(
            &store,
            &a,
            "s",
            node_port_svc(Some("10.0.0.9"), Some(30009)),
        );
        // Its own values are not "taken".
        let mut moved = node_port_svc(Some("10.0.0.9"), Some(30010));
        let held = a.allocate(&key("s"), &mut moved).unwrap();
        store.update("services", &key("s"), None, moved).unwrap();
        drop(held);
        let mut other = node_port_svc(None, Some(30009));
        assert!(a.allocate(&key("other"), &mut other).is_ok());
        let mut other = node_port_svc(None, Some(30010));
        assert!(a.allocate(&key("other"), &mut other).is_err());
        // Turned ExternalName, it holds no cluster IP.
        store
            .update(
                "services",
                &key("s"),
                None,
                json!({"spec": {"type": "ExternalName"}}),
            )
            .unwrap();
        let mut s = node_port_svc(Some("10.0.0.9"), Some(30010));
        assert!(a.allocate(&key("other"), &mut s).is_ok());
    }

    #[test]
    fn requested_values_out_of_range_are_refused_in_the_real_servers_words() {
        let a = Allocator::attach(&Store::new(10));
        let mut s = node_port_svc(Some("10.0.1.3"), None);
        assert_eq!(
            a.allocate(&key("s"), &mut s).unwrap_err().to_string(),
            r#"spec.clusterIPs: Invalid value: []string{"10.0.1.3"}: failed to allocate IP 10.0.1.3: provided IP 10.0.1.3 is not in the valid range"#
        );
        let mut s = node_port_svc(None, Some(80));
        assert_eq!(
            a.allocate(&key("s"), &mut s).unwrap_err().to_string(),
            "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
    }

    #[test]
    fn ports_sharing_a_number_share_one_node_port_and_headless_services_hold_no_ip() {
        let a = Allocator::attach(&Store::new(10));
        let mut s = json!({"spec": {"type": "NodePort", "clusterIP": "None", "ports": [
            {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}, {"port": 54}]}});
        let _held = a.allocate(&key("dns"), &mut s).unwrap();
        let ports = &s["spec"]["ports"];
        assert_eq!(ports[0]["nodePort"], ports[1]["nodePort"]);
        assert_ne!(ports[0]["nodePort"], ports[2]["nodePort"]);
        assert_eq!(s["spec"]["clusterIPs"], json!(["None"]));
        assert!(a.lock().ips.is_empty());
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
