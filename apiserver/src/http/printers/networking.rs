//! The Service printer (TYPE, CLUSTER-IP from `clusterIPs[0]`, EXTERNAL-IP
//! by type, PORT(S) as `80/TCP` or `80:30080/TCP`, SELECTOR when wide) and
//! the Endpoints printer (the first three `ip:port`s and `+ N more...`) and
//! the Ingress printer (CLASS, HOSTS, ADDRESS, PORTS).

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::column::{col, wide, Printer, AGE, NAME};
use super::descriptions as d;
use super::format::{age, format_labels, int, items, name, or, text};

pub(super) static SERVICE: Printer = Printer::new(
    &[
        NAME,
        col("Type", "string", d::SVC_TYPE),
        col("Cluster-IP", "string", d::SVC_CLUSTER_IP),
        col("External-IP", "string", d::SVC_EXTERNAL_IPS),
        col("Port(s)", "string", d::SVC_PORTS),
        AGE,
        wide("Selector", "string", d::SVC_SELECTOR),
    ],
    service,
);

/// `loadBalancerStatusStringer` (and the Ingress one) for the wide output
/// the server generates: the ingress points' IPs (else hostnames), sorted
/// and deduplicated.
fn load_balancer(obj: &Value) -> String {
    items(obj, "/status/loadBalancer/ingress")
        .iter()
        .filter_map(|i| {
            [text(i, "/ip"), text(i, "/hostname")]
                .into_iter()
                .find(|s| !s.is_empty())
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(",")
}

/// `getServiceExternalIP`.
fn external_ip(obj: &Value) -> String {
    let external: Vec<&str> = items(obj, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match text(obj, "/spec/type") {
        "ClusterIP" | "NodePort" => or(&external.join(","), "<none>"),
        "LoadBalancer" => {
            let lb = load_balancer(obj);
            if !external.is_empty() {
                let mut all: Vec<&str> = lb.split(',').filter(|s| !s.is_empty()).collect();
                all.extend(external);
                all.join(",")
            } else {
                or(&lb, "<pending>")
            }
        }
        "ExternalName" => text(obj, "/spec/externalName").to_string(),
        _ => "<unknown>".into(),
    }
}

/// `makePortString`.
fn ports(obj: &Value) -> String {
    let ports: Vec<String> = items(obj, "/spec/ports")
        .iter()
        .map(|p| {
            let (port, protocol) = (int(p, "/port"), text(p, "/protocol"));
            match int(p, "/nodePort") {
                n if n > 0 => format!("{port}:{n}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    or(&ports.join(","), "<none>")
}

fn service(obj: &Value) -> Vec<Value> {
    vec![
        name(obj),
        json!(text(obj, "/spec/type")),
        json!(or(text(obj, "/spec/clusterIPs/0"), "<none>")),
        json!(external_ip(obj)),
        json!(ports(obj)),
        age(obj),
        json!(format_labels(obj.pointer("/spec/selector"))),
    ]
}

pub(super) static ENDPOINTS: Printer = Printer::new(
    &[NAME, col("Endpoints", "string", d::ENDPOINTS_SUBSETS), AGE],
    endpoints,
);

/// `net.JoinHostPort`.
fn host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// `formatEndpoints(endpoints, nil)`.
fn format_endpoints(obj: &Value) -> String {
    let subsets = items(obj, "/subsets");
    if subsets.is_empty() {
        return "<none>".into();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses = items(ss, "/addresses");
        let ports = items(ss, "/ports");
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(text(a, "/ip").to_string());
            }
            continue;
        }
        for p in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(host_port(text(a, "/ip"), int(p, "/port")));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

fn endpoints(obj: &Value) -> Vec<Value> {
    vec![name(obj), json!(format_endpoints(obj)), age(obj)]
}

pub(super) static INGRESS: Printer = Printer::new(
    &[
        NAME,
        col(
            "Class",
            "string",
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ],
    ingress,
);

/// `formatHosts`: the first three rules' hosts and `+ N more...`, `*`
/// when none has one.
fn hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = text(rule, "/host");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".into();
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - MAX)
    } else {
        joined
    }
}

fn ingress(obj: &Value) -> Vec<Value> {
    let class = obj
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let ports = if items(obj, "/spec/tls").is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name(obj),
        json!(class),
        json!(hosts(items(obj, "/spec/rules"))),
        json!(load_balancer(obj)),
        json!(ports),
        age(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_port_service_and_a_cluster_ip_one() {
        let np = json!({"metadata": {"name": "np"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080},
                          {"port": 443, "protocol": "TCP", "nodePort": 30443}],
                "selector": {"app": "web", "a": "b"}}});
        let c = service(&np);
        assert_eq!(
            c[1..5],
            [
                json!("NodePort"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,443:30443/TCP")
            ]
        );
        assert_eq!(c[6], "a=b,app=web");
        let headless = json!({"spec": {"type": "ClusterIP", "clusterIPs": ["None"],
            "externalIPs": ["1.2.3.4"], "ports": [{"port": 53, "protocol": "UDP"}]}});
        assert_eq!(
            service(&headless)[2..5],
            [json!("None"), json!("1.2.3.4"), json!("53/UDP")]
        );
        assert_eq!(service(&headless)[6], "<none>");
    }

    #[test]
    fn load_balancers_and_external_names() {
        let pending = json!({"spec": {"type": "LoadBalancer", "ports": []}});
        assert_eq!(
            service(&pending)[3..5],
            [json!("<pending>"), json!("<none>")]
        );
        let lb = json!({"spec": {"type": "LoadBalancer", "externalIPs": ["9.9.9.9"]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "5.5.5.5"}]}}});
        assert_eq!(service(&lb)[3], "5.5.5.5,lb.example,9.9.9.9");
        let ext = json!({"spec": {"type": "ExternalName", "externalName": "db.example"}});
        assert_eq!(service(&ext)[2..4], [json!("<none>"), json!("db.example")]);
    }

    #[test]
    fn endpoints_show_three_and_count_the_rest() {
        let e = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                                    "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(
            endpoints(&e)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        assert_eq!(endpoints(&json!({}))[1], "<none>");
    }

    #[test]
    fn ingress_hosts_address_and_ports() {
        let i = json!({"spec": {"ingressClassName": "nginx",
                "rules": [{"host": "a.example"}, {}, {"host": "b.example"}, {"host": "c.example"},
                          {"host": "d.example"}],
                "tls": [{"hosts": ["a.example"]}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}});
        assert_eq!(
            ingress(&i)[1..5],
            [
                json!("nginx"),
                json!("a.example,b.example,c.example + 2 more..."),
                json!("1.1.1.1"),
                json!("80, 443")
            ]
        );
        let bare = ingress(&json!({}));
        assert_eq!(
            bare[1..5],
            [json!("<none>"), json!("*"), json!(""), json!("80")]
        );
    }
}
