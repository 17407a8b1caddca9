//! Tables as kubectl reads them.

use super::cells::*;

use super::*;

#[test]
fn durations_read_as_kubectl_prints_them() {
    let cases = [
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (20 * 86400, "20d"),
        (3 * 365 * 86400 + 86400, "3y1d"),
        (-5, "<invalid>"),
    ];
    for (seconds, text) in cases {
        assert_eq!(human_duration(seconds), text, "{seconds}s");
    }
}

#[test]
fn the_first_table_media_type_is_taken() {
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    assert_eq!(requested(kubectl), Some(TableVersion::V1));
    assert_eq!(
        requested("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
        Some(TableVersion::V1beta1)
    );
    assert_eq!(requested("application/json"), None);
}

#[test]
fn printer_column_paths_reach_nested_and_indexed_members() {
    let object =
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready"}]}, "a.b": 1});
    assert_eq!(json_path(&object, ".status.phase"), Some(&json!("Running")));
    assert_eq!(
        json_path(&object, ".status.conditions[0].type"),
        Some(&json!("Ready"))
    );
    assert_eq!(json_path(&object, "['a.b']"), Some(&json!(1)));
    assert_eq!(json_path(&object, ".status.missing"), None);
}
