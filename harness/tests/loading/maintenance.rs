//! Loading maintenance settings: windows, the clock's start, the catalog fields they use.

use rackproof_harness::load::load;
use rackproof_harness::scenario::Step;

use super::{BODY, errors, located_in, validate_with_the_binary, write};

#[test]
fn a_bad_maintenance_window_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let window =
        |w: &str| format!("lab: {{ nodes: 2 }}\n{BODY}  maintenance:\n    timeWindow: {w}\n");
    let cases = [
        (
            "short.yaml",
            window(r#"{ begin: "220000+0000", end: "221000+0000" }"#),
            11,
            26,
            "lasts 10 minutes, not 30 minutes to 6 hours",
        ),
        (
            "malformed.yaml",
            window(r#"{ begin: "220000+0000", end: "2500+0000" }"#),
            11,
            46,
            "end \"2500+0000\" is not a time of day written HHMMSS+ZZZZ",
        ),
    ];
    for (name, text, line, column, message) in cases {
        let file = write(dir.path(), name, &text);
        let (code, stderr) = validate_with_the_binary(&file);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(located_in(&stderr, &file, line, column), "{name}: {stderr}");
        assert!(stderr.contains(message), "{name}: {stderr}");
    }
}

#[test]
fn a_bad_clock_start_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!("clock: {{ start: \"2026-03-02 25:00\" }}\nlab: {{ nodes: 2 }}\n{BODY}"),
    );
    let (code, stderr) = validate_with_the_binary(&file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(located_in(&stderr, &file, 1, 17), "{stderr}");
    assert!(stderr.contains("RFC 3339"), "{stderr}");
}

#[test]
fn maintenance_settings_load_with_their_catalog_fields() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.yaml",
        &format!(
            "clock: {{ start: \"2026-03-02T21:00:00Z\" }}\nlab: {{ nodes: 2 }}\ncatalog:\n  updateStrategy: patch\n  kubernetes: [ {{ version: \"1.34.3\", expirationDate: \"2026-04-01T00:00:00Z\" }} ]\n{BODY}  maintenance:\n    timeWindow: {{ begin: \"220000+0000\", end: \"230000+0000\" }}\n    autoUpdate: {{ kubernetesVersion: false }}\nsteps:\n  - maintenanceOperation: rotate-ca-start\n"
        ),
    );
    let loaded = load(&file).unwrap();
    let scenario = &loaded.scenario;
    assert_eq!(
        scenario.clock.start.unwrap().to_string(),
        "2026-03-02T21:00:00Z"
    );
    let maintenance = scenario.first_pool().maintenance.as_ref().unwrap();
    assert_eq!(
        maintenance.time_window.end.as_ref().unwrap().value,
        "230000+0000"
    );
    assert_eq!(maintenance.auto_update.kubernetes_version, Some(false));
    assert_eq!(scenario.catalog.kubernetes[0].version.value, "1.34.3");
    assert!(
        matches!(&scenario.steps[0], Step::MaintenanceOperation(op) if op.operation.value == "rotate-ca-start")
    );
}

#[test]
fn a_window_needs_one_whole_form_and_a_relative_one_lasts_30_minutes_to_6_hours() {
    let dir = tempfile::tempdir().unwrap();
    let window =
        |w: &str| format!("lab: {{ nodes: 2 }}\n{BODY}  maintenance:\n    timeWindow: {w}\n");
    for (name, text, message) in [
        (
            "mixed.yaml",
            window(r#"{ begin: "220000+0000", lasts: 30m }"#),
            "give `begin` and `end`, or `opensAfter` and `lasts`",
        ),
        (
            "short.yaml",
            window("{ opensAfter: 1m, lasts: 10m }"),
            "`lasts: 10m` is not 30 minutes to 6 hours",
        ),
    ] {
        let file = write(dir.path(), name, &text);
        let text = errors(load(&file));
        assert!(text.contains(message), "{name}: {text}");
    }
    let file = write(
        dir.path(),
        "relative.yaml",
        &window("{ opensAfter: 2m, lasts: 30m }"),
    );
    load(&file).expect("a relative window loads");
}
