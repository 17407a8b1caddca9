//! The fast path against the full bookkeeping: fixed writes, and random writes whose results must be the same on both paths.

use super::*;

/// The fast path gives what the full bookkeeping gives, for writes it takes and writes it
/// leaves to the full path alike.
#[test]
fn a_heartbeat_keeps_ownership_and_moves_only_the_writers_time() {
    let shape = Shape {
        schema: None,
        scope: Scope::All,
    };
    let kubelet = |time| Writer {
        manager: "kubelet",
        api_version: "coordination.k8s.io/v1",
        time,
        subresource: None,
    };
    let admin = Writer {
        manager: "admin",
        api_version: "coordination.k8s.io/v1",
        time: "t1",
        subresource: None,
    };
    let lease = |renew: &str, holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "n", "resourceVersion": "7", "labels": {"a": "1"}},
        "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 40}})
    };
    let mut created = lease("r0", "n");
    record_update(Some(&json!({})), &mut created, &kubelet("t0"), shape);
    let full = |old: &Value, new: &Value, writer: &Writer<'_>| {
        let mut expected = new.clone();
        let mut list = entries(old);
        let changed: BTreeSet<Path> = field_set(new, shape)
            .into_iter()
            .filter(|p| lookup(old, p) != lookup(new, p))
            .collect();
        for entry in &mut list {
            entry.fields.retain(|p| !changed.contains(p));
        }
        if let Some(entry) = list.iter_mut().find(|e| e.manager == writer.manager) {
            entry.fields.extend(changed);
            entry.time = writer.time.to_owned();
        }
        store_entries(&mut expected, &list);
        expected
    };
    // The kubelet renews: it owns renewTime, so the fast path applies.
    let mut renewed = lease("r1", "n");
    renewed["metadata"]["managedFields"] = created["metadata"]["managedFields"].clone();
    let expected = full(&created, &renewed, &kubelet("t2"));
    assert!(matches!(
        same_owners(&created, &renewed, &kubelet("t2"), shape),
        FastPath::Edited(_)
    ));
    record_update(Some(&created), &mut renewed, &kubelet("t2"), shape);
    assert_eq!(
        renewed["metadata"]["managedFields"],
        expected["metadata"]["managedFields"]
    );
    assert_eq!(renewed["metadata"]["managedFields"][0]["time"], "t2");
    // Someone else changes the holder: ownership moves, the full path runs.
    let mut taken = lease("r1", "other");
    assert!(same_owners(&renewed, &taken, &admin, shape) == FastPath::NeedsFullBookkeeping);
    record_update(Some(&renewed), &mut taken, &admin, shape);
    let owners: Vec<&str> = taken["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["kubelet", "admin"]);
    assert!(
        taken["metadata"]["managedFields"][1]["fieldsV1"]["f:spec"]
            .get("f:holderIdentity")
            .is_some()
    );
    assert!(
        taken["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
            .get("f:holderIdentity")
            .is_none()
    );
    // A new scalar no one owns: the fast path adds it to the kubelet's fields.
    let mut grown = taken.clone();
    grown["spec"]["leaseTransitions"] = json!(1);
    assert!(matches!(
        same_owners(&taken, &grown, &kubelet("t3"), shape),
        FastPath::Edited(_)
    ));
    let mut full_grown = grown.clone();
    record_every_field(Some(&taken), &mut full_grown, &kubelet("t3"), shape);
    record_update(Some(&taken), &mut grown, &kubelet("t3"), shape);
    assert_eq!(
        grown["metadata"]["managedFields"].to_string(),
        full_grown["metadata"]["managedFields"].to_string()
    );
    assert!(
        grown["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
            .get("f:leaseTransitions")
            .is_some()
    );
    // Nothing changed: managedFields stay exactly as they were.
    let mut same = taken.clone();
    record_update(Some(&taken), &mut same, &kubelet("t4"), shape);
    assert_eq!(
        same["metadata"]["managedFields"],
        taken["metadata"]["managedFields"]
    );
}

/// Status writes that change members of keyed list items (a Node's conditions) take the
/// fast path when the writer alone owns what changed, and give exactly what the full
/// bookkeeping gives; every other change falls back to it.
#[test]
fn keyed_list_members_take_the_fast_path_only_when_the_writer_owns_them() {
    let shape = Shape {
        schema: None,
        scope: Scope::StatusOnly,
    };
    let writer = |manager, time| Writer {
        manager,
        api_version: "v1",
        time,
        subresource: Some("status"),
    };
    let node = |ready_beat: &str, update_status: &str, images: Value| {
        json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n", "labels": {"a": "1"}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": ready_beat},
                {"type": "InPlaceUpdate", "status": update_status, "reason": "r"},
            ],
            "images": images,
            "nodeInfo": {"osImage": "os 1"},
        }})
    };
    // The agent writes the Ready condition and the rest; the orchestrator its own condition.
    let mut base = node("t0", "False", json!([{"names": ["a"]}]));
    record_update(
        Some(&json!({"metadata": {}})),
        &mut base,
        &writer("agent", "t0"),
        shape,
    );
    let mut next = node("t0", "True", json!([{"names": ["a"]}]));
    next["metadata"]["managedFields"] = base["metadata"]["managedFields"].clone();
    record_update(Some(&base), &mut next, &writer("orchestrator", "t1"), shape);
    let base = next;
    let fast_and_full = |new: Value, manager: &'static str| {
        let (mut fast, mut full) = (new.clone(), new);
        let taken = matches!(
            same_owners(&base, &fast, &writer(manager, "t9"), shape),
            FastPath::Edited(_)
        );
        record_update(Some(&base), &mut fast, &writer(manager, "t9"), shape);
        record_every_field(Some(&base), &mut full, &writer(manager, "t9"), shape);
        assert_eq!(
            fast["metadata"]["managedFields"], full["metadata"]["managedFields"],
            "{manager} writing {fast:#}"
        );
        taken
    };
    // The agent's heartbeat moves its own condition's time: fast.
    assert!(fast_and_full(
        node("t2", "True", json!([{"names": ["a"]}])),
        "agent"
    ));
    // The orchestrator's condition changes again, by the orchestrator: fast.
    assert!(fast_and_full(
        node("t0", "False", json!([{"names": ["a"]}])),
        "orchestrator"
    ));
    // The agent writes the orchestrator's condition: ownership moves, full path.
    assert!(!fast_and_full(
        node("t0", "False", json!([{"names": ["a"]}])),
        "agent"
    ));
    // The agent changes a member it owns (reason) of the item the orchestrator took over:
    // the item moves to the agent, full path.
    let mut reason = base.clone();
    reason["status"]["conditions"][1]["reason"] = json!("r2");
    assert!(!fast_and_full(reason, "agent"));
    // An atomic list (images) changed by its owner: fast; by someone else: full.
    assert!(fast_and_full(
        node("t0", "True", json!([{"names": ["b"]}])),
        "agent"
    ));
    assert!(!fast_and_full(
        node("t0", "True", json!([{"names": ["b"]}])),
        "orchestrator"
    ));
    // A condition of scalars added, or one removed, or the conditions reordered: fast.
    let mut added = base.clone();
    added["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "DiskPressure", "status": "False"}));
    assert!(fast_and_full(added, "orchestrator"));
    let mut removed = base.clone();
    removed["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .remove(1);
    assert!(fast_and_full(removed, "agent"));
    let mut reordered = base.clone();
    reordered["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .reverse();
    assert!(fast_and_full(reordered, "agent"));
    // A condition with a map member added, or the last one removed: full path.
    let mut nested = base.clone();
    nested["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "X", "details": {"a": "b"}}));
    assert!(!fast_and_full(nested, "agent"));
    let mut emptied = base.clone();
    emptied["status"]["conditions"] = json!([]);
    assert!(!fast_and_full(emptied, "agent"));
    // A member added to a condition by the item's owner: fast; by someone else: full.
    let mut grown = base.clone();
    grown["status"]["conditions"][0]["message"] = json!("m");
    assert!(fast_and_full(grown.clone(), "agent"));
    assert!(!fast_and_full(grown, "orchestrator"));
    // An empty map that gains members: full path.
    let mut empty = base.clone();
    empty["status"]["nodeInfo"] = json!({});
    let mut filled = empty.clone();
    filled["status"]["nodeInfo"] = json!({"osImage": "os 2"});
    assert!(
        same_owners(&empty, &filled, &writer("agent", "t9"), shape)
            == FastPath::NeedsFullBookkeeping
    );
}

/// Random writes by three managers (labels and annotations set and removed, condition
/// members changed, added and removed, conditions added and removed, spec fields) give the
/// same `managedFields`, member order included, on the fast path as on the full one, for a
/// built-in kind (whole object and status writes) and a custom resource; and so does the
/// one-walk path of writes over objects no one owned anything of (creates).
#[test]
fn the_fast_path_gives_what_the_full_bookkeeping_gives_for_random_writes() {
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    // As a custom resource: maps of strings and a keyed list of conditions.
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "additionalProperties": {"type": "string"}},
        "status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "additionalProperties": {"type": "string"}}},
            "nodeInfo": {"type": "object", "properties": {"osImage": {"type": "string"}}},
        }},
    }});
    for (scope, schema) in [
        (Scope::All, None),
        (Scope::StatusOnly, None),
        (Scope::All, Some(&schema)),
    ] {
        let shape = Shape { schema, scope };
        let subresource = (scope == Scope::StatusOnly).then_some("status");
        let mut current = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"l0": "x"}, "annotations": {"a0": "x"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"osImage": "os"}}});
        let (mut fast_taken, mut shape_changes) = (0, 0);
        for round in 0..3000 {
            let mut new = current.clone();
            new["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
            let key = format!("{}", next(4));
            let value = json!(format!("v{}", next(3)));
            match next(9) {
                0 => new["metadata"]["labels"][format!("l{key}")] = value,
                1 => {
                    _ = new["metadata"]["labels"]
                        .as_object_mut()
                        .unwrap()
                        .remove(&format!("l{key}"))
                }
                2 => new["metadata"]["annotations"][format!("a{key}")] = value,
                3 => {
                    _ = new["metadata"]["annotations"]
                        .as_object_mut()
                        .unwrap()
                        .remove(&format!("a{key}"))
                }
                4 => new["spec"][format!("s{key}")] = value,
                5 => {
                    _ = new["spec"]
                        .as_object_mut()
                        .unwrap()
                        .remove(&format!("s{key}"))
                }
                6 | 7 => {
                    let conditions = new["status"]["conditions"].as_array_mut().unwrap();
                    let i = next(conditions.len() as u64) as usize;
                    match next(3) {
                        0 => {
                            conditions[i]["status"] =
                                json!(if next(2) == 0 { "True" } else { "False" })
                        }
                        1 => conditions[i][format!("m{key}")] = value,
                        _ => {
                            _ = conditions[i]
                                .as_object_mut()
                                .unwrap()
                                .remove(&format!("m{key}"))
                        }
                    }
                }
                _ => {
                    let conditions = new["status"]["conditions"].as_array_mut().unwrap();
                    let kind = format!("C{key}");
                    match conditions.iter().position(|c| c["type"] == kind.as_str()) {
                        Some(i) if conditions.len() > 1 => _ = conditions.remove(i),
                        Some(_) => {}
                        None => conditions.push(json!({"type": kind, "status": "Unknown"})),
                    }
                }
            }
            let manager = ["agent", "orchestrator", "admin"][next(3) as usize];
            let time = format!("t{round}");
            let writer = Writer {
                manager,
                api_version: "v1",
                time: &time,
                subresource,
            };
            if let FastPath::Edited(managed) = same_owners(&current, &new, &writer, shape) {
                fast_taken += 1;
                let mut fast = new.clone();
                fast["metadata"]["managedFields"] = managed.unwrap_or(Value::Null);
                let mut full = new.clone();
                record_every_field(Some(&current), &mut full, &writer, shape);
                let shown = |object: &Value| {
                    object["metadata"]
                        .get("managedFields")
                        .filter(|m| !m.is_null())
                        .map(Value::to_string)
                };
                assert_eq!(
                    shown(&fast),
                    shown(&full),
                    "round {round}: {manager} writing {new:#}\nover {current:#}"
                );
            } else {
                shape_changes += 1;
            }
            // With no one owning anything before (as a create against the zero value), the
            // one-walk path gives what the full bookkeeping gives.
            let mut unowned = current.clone();
            unowned["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
            let (mut walked, mut full) = (new.clone(), new.clone());
            record_update(Some(&unowned), &mut walked, &writer, shape);
            record_every_field(Some(&unowned), &mut full, &writer, shape);
            assert_eq!(
                walked["metadata"]
                    .get("managedFields")
                    .map(Value::to_string),
                full["metadata"].get("managedFields").map(Value::to_string),
                "round {round}: over {unowned:#}"
            );
            record_update(Some(&current), &mut new, &writer, shape);
            current = new;
        }
        assert!(
            fast_taken > 1000 && shape_changes > 100,
            "{scope:?}: fast {fast_taken}, full {shape_changes}"
        );
    }
}
