//! Services as kube-apiserver keeps them: defaults, a cluster IP from the service range and node
//! ports from the node-port range (kept across updates, freed with the Service), the validation
//! clients meet, and the `kubernetes` Service every cluster has in `default`.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use crate::pointer::At;

use super::defaults::set_default;

/// kube-apiserver's default `--service-cluster-ip-range`; its first address is the `kubernetes`
/// Service's.
pub(crate) const SERVICE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 0, 0, 0), 24);

/// kube-apiserver's default `--service-node-port-range`.
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

const TYPES: &[&str] = &["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

/// The `kubernetes` Service in `default`: the API server's own address, port 443 to `port`.
pub(crate) fn kubernetes(uid: &str, created: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "uid": uid,
            "creationTimestamp": created,
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}],
            "clusterIP": first_address().to_string(),
            "clusterIPs": [first_address().to_string()],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
        "status": {"loadBalancer": {}},
    })
}

fn first_address() -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SERVICE_RANGE.0) + 1)
}

/// The addresses of the range a Service may get (not the network's or the broadcast address).
fn assignable() -> std::ops::Range<u32> {
    let base = u32::from(SERVICE_RANGE.0);
    let size = 1u32 << (32 - SERVICE_RANGE.1);
    base + 1..base + size - 1
}

/// SetDefaults_Service: type, session affinity, each port's protocol and target port, traffic
/// policies.
pub(super) fn default(service: &mut Value) {
    if !service.get("spec").is_none_or(Value::is_object) {
        return;
    }
    set_default(service, "/spec/type", json!("ClusterIP"));
    set_default(service, "/spec/sessionAffinity", json!("None"));
    let kind = service
        .at("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if let Some(ports) = service
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
    {
        for port in ports.iter_mut().filter(|p| p.is_object()) {
            set_default(port, "/protocol", json!("TCP"));
            let unset = port
                .get("targetPort")
                .is_none_or(|t| t.as_i64() == Some(0) || t.as_str() == Some(""));
            if unset && let Some(number) = port.get("port").cloned() {
                port["targetPort"] = number;
            }
        }
    }
    if kind != "ExternalName" {
        set_default(service, "/spec/internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        set_default(service, "/spec/externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        set_default(service, "/spec/allocateLoadBalancerNodePorts", json!(true));
    }
}

/// Gives `service` its cluster IP and node ports: what `old` had when the update leaves them out,
/// else what it asks for if free, else the lowest free. `others` are every other Service.
pub(crate) fn allocate<'a>(
    service: &mut Value,
    old: Option<&Value>,
    others: impl Iterator<Item = &'a Value>,
) -> Result<(), Vec<(String, String)>> {
    let kind = service
        .at("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !service.get("spec").is_some_and(Value::is_object) || kind == "ExternalName" {
        return Ok(());
    }
    let mut used_ips = BTreeSet::new();
    let mut used_ports = BTreeSet::new();
    for other in others {
        if let Some(ip) = other.at("/spec/clusterIP").and_then(Value::as_str)
            && let Ok(ip) = ip.parse::<Ipv4Addr>()
        {
            used_ips.insert(u32::from(ip));
        }
        used_ports.extend(node_ports(other));
    }
    used_ips.insert(u32::from(first_address()));
    let mut problems = Vec::new();
    if let Some(old) = old
        && service
            .at("/spec/clusterIP")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if let Some(value) = old.at(&format!("/spec/{field}")) {
                service["spec"][field] = value.clone();
            }
        }
    }
    let asked = service
        .at("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kept = old
        .and_then(|o| o.at("/spec/clusterIP"))
        .and_then(Value::as_str)
        .is_some_and(|ip| ip == asked);
    let ip = match asked.as_str() {
        "None" => Some("None".to_owned()),
        "" => match assignable().find(|ip| !used_ips.contains(ip)) {
            Some(ip) => Some(Ipv4Addr::from(ip).to_string()),
            None => {
                problems.push((
                    "spec.clusterIP".to_owned(),
                    format!(
                        "Internal error: failed to allocate a serviceIP: range {}/{} is full",
                        SERVICE_RANGE.0, SERVICE_RANGE.1
                    ),
                ));
                None
            }
        },
        _ if kept => Some(asked.clone()),
        text => match text.parse::<Ipv4Addr>() {
            Ok(ip) if !assignable().contains(&u32::from(ip)) => {
                problems.push(("spec.clusterIP".to_owned(), format!(
                    "Invalid value: {text:?}: provided IP is not in the valid range. The range of valid IPs is {}/{}",
                    SERVICE_RANGE.0, SERVICE_RANGE.1
                )));
                None
            }
            Ok(ip) if used_ips.contains(&u32::from(ip)) => {
                problems.push((
                    "spec.clusterIP".to_owned(),
                    format!("Invalid value: {text:?}: provided IP is already allocated"),
                ));
                None
            }
            Ok(_) => Some(text.to_owned()),
            Err(_) => {
                problems.push((
                    "spec.clusterIP".to_owned(),
                    format!("Invalid value: {text:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
                ));
                None
            }
        },
    };
    if let Some(ip) = ip {
        service["spec"]["clusterIP"] = json!(ip);
        service["spec"]["clusterIPs"] = json!([ip]);
        set_default(service, "/spec/ipFamilies", json!(["IPv4"]));
        set_default(service, "/spec/ipFamilyPolicy", json!("SingleStack"));
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        let old_ports: Vec<Value> = old
            .and_then(|o| o.at("/spec/ports"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut taken = used_ports;
        if let Some(ports) = service
            .pointer_mut("/spec/ports")
            .and_then(Value::as_array_mut)
        {
            for (index, port) in ports.iter_mut().enumerate() {
                let asked = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
                let previous = old_ports
                    .iter()
                    .find(|o| {
                        o.get("port") == port.get("port") && o.get("name") == port.get("name")
                    })
                    .and_then(|o| o.get("nodePort"))
                    .and_then(Value::as_i64);
                let chosen = if asked == 0 {
                    previous.or_else(|| NODE_PORTS.clone().find(|p| !taken.contains(p)))
                } else if Some(asked) == previous {
                    Some(asked)
                } else if !NODE_PORTS.contains(&asked) {
                    problems.push((format!("spec.ports[{index}].nodePort"), format!(
                        "Invalid value: {asked}: provided port is not in the valid range. The range of valid ports is {}-{}",
                        NODE_PORTS.start(), NODE_PORTS.end()
                    )));
                    None
                } else if taken.contains(&asked) {
                    problems.push((
                        format!("spec.ports[{index}].nodePort"),
                        format!("Invalid value: {asked}: provided port is already allocated"),
                    ));
                    None
                } else {
                    Some(asked)
                };
                if let Some(chosen) = chosen {
                    taken.insert(chosen);
                    port["nodePort"] = json!(chosen);
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn node_ports(service: &Value) -> impl Iterator<Item = i64> + '_ {
    service
        .at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|p| *p != 0)
}

/// ValidateService (the parts clients meet) and, on update, the immutable cluster IP.
pub(super) fn validate(service: &Value, old: Option<&Value>, causes: &mut Vec<(String, String)>) {
    let kind = service
        .at("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !TYPES.contains(&kind) {
        causes.push((
            "spec.type".into(),
            format!("Unsupported value: {kind:?}: supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""),
        ));
    }
    let cluster_ip = service
        .at("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind == "ExternalName" {
        let external = service
            .at("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if external.is_empty() {
            causes.push(("spec.externalName".into(), "Required value".into()));
        }
        if !cluster_ip.is_empty() {
            causes.push((
                "spec.clusterIP".into(),
                "Invalid value: must be empty for ExternalName services".into(),
            ));
        }
    }
    let ports = service
        .at("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() && kind != "ExternalName" && cluster_ip != "None" {
        causes.push(("spec.ports".into(), "Required value".into()));
    }
    let mut names = BTreeSet::new();
    for (index, port) in ports.iter().enumerate() {
        let at = |field: &str| format!("spec.ports[{index}].{field}");
        let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            causes.push((at("name"), "Required value".into()));
        }
        if !name.is_empty() && !names.insert(name) {
            causes.push((at("name"), format!("Duplicate value: {name:?}")));
        }
        match port.get("port").and_then(Value::as_i64) {
            Some(number) if (1..=65535).contains(&number) => {}
            Some(number) => causes.push((
                at("port"),
                format!("Invalid value: {number}: must be between 1 and 65535, inclusive"),
            )),
            None => causes.push((at("port"), "Required value".into())),
        }
        let protocol = port
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !PROTOCOLS.contains(&protocol) {
            causes.push((
                at("protocol"),
                format!(
                    "Unsupported value: {protocol:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
                ),
            ));
        }
    }
    if let Some(old) = old {
        let before = old
            .at("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let was_external = old.at("/spec/type").and_then(Value::as_str) == Some("ExternalName");
        if !before.is_empty() && before != cluster_ip && !was_external && kind != "ExternalName" {
            causes.push((
                "spec.clusterIPs[0]".into(),
                format!("Invalid value: {cluster_ip:?}: may not change once set"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(spec: Value) -> Value {
        let mut service =
            json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec});
        default(&mut service);
        service
    }

    #[test]
    fn a_new_service_gets_the_lowest_free_address_and_its_defaults() {
        let existing = service(json!({"ports": [{"port": 80}], "clusterIP": "10.0.0.2"}));
        let mut new = service(json!({"ports": [{"port": 80}]}));
        allocate(&mut new, None, [&existing].into_iter()).unwrap();
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.3");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.0.0.3"]));
        assert_eq!(new["spec"]["type"], "ClusterIP");
        assert_eq!(new["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(new["spec"]["ports"][0]["targetPort"], 80);
    }

    #[test]
    fn an_update_keeps_the_address_and_node_ports_it_leaves_out() {
        let mut old = service(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        allocate(&mut old, None, std::iter::empty()).unwrap();
        assert_eq!(old["spec"]["ports"][0]["nodePort"], 30000);
        let mut new = service(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        allocate(&mut new, Some(&old), std::iter::empty()).unwrap();
        assert_eq!(new["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30000);
    }

    #[test]
    fn taken_or_foreign_addresses_and_ports_are_refused() {
        let existing = service(json!({"ports": [{"port": 80}], "clusterIP": "10.0.0.7"}));
        for (ip, why) in [
            ("10.0.0.7", "already allocated"),
            ("10.0.0.1", "already allocated"),
            ("10.1.0.7", "not in the valid range"),
            ("ten", "must be a valid IP address"),
        ] {
            let mut new = service(json!({"ports": [{"port": 80}], "clusterIP": ip}));
            let problems = allocate(&mut new, None, [&existing].into_iter()).unwrap_err();
            assert!(problems[0].1.contains(why), "{ip}: {problems:?}");
        }
        let mut new = service(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}));
        let problems = allocate(&mut new, None, std::iter::empty()).unwrap_err();
        assert_eq!(problems[0].0, "spec.ports[0].nodePort");
    }

    #[test]
    fn validation_names_each_bad_field() {
        let bad = service(
            json!({"type": "Magic", "ports": [{"port": 0, "protocol": "ICMP"}, {"port": 81}]}),
        );
        let mut causes = Vec::new();
        validate(&bad, None, &mut causes);
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.type",
                "spec.ports[0].name",
                "spec.ports[0].port",
                "spec.ports[0].protocol",
                "spec.ports[1].name"
            ]
        );
        let old = service(json!({"ports": [{"port": 80}], "clusterIP": "10.0.0.2"}));
        let moved = service(json!({"ports": [{"port": 80}], "clusterIP": "10.0.0.3"}));
        let mut causes = Vec::new();
        validate(&moved, Some(&old), &mut causes);
        assert_eq!(causes[0].0, "spec.clusterIPs[0]");
    }
}
