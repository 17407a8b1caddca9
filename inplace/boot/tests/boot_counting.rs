//! End-to-end rules of boot counting on an ESP: the loader's renames, fallback, the `default`
//! pitfall, blessing, installing under power cuts at every step, and making room.

use std::collections::BTreeMap;

use inplace_boot::update::{
    decode_efivarfs_string, encode_efivarfs_string, install_size, payload_paths, resolve_booted,
};
use inplace_boot::{
    Bump, DirEsp, EntryConf, EntryName, Esp, LoaderConf, LoaderVars, MemEsp, NewEntry, UpdateError,
    bless, boot, booted_entry, collect_garbage, install_entry, make_room, mark_bad,
    write_loader_conf,
};

fn conf(version: &str) -> EntryConf {
    EntryConf {
        title: Some(format!("Rackproof OS {version}")),
        version: Some(version.to_owned()),
        options: vec!["console=ttyS0".to_owned()],
        ..EntryConf::default()
    }
}

fn kernel(version: &str) -> Vec<u8> {
    format!("kernel of {version}").repeat(8).into_bytes()
}

fn initrd(version: &str) -> Vec<u8> {
    format!("initrd of {version}").repeat(8).into_bytes()
}

fn install(
    esp: &dyn Esp,
    stem: &str,
    version: &str,
    booted: Option<&EntryName>,
) -> Result<EntryName, UpdateError> {
    let (k, i) = (kernel(version), initrd(version));
    let new = NewEntry {
        stem,
        conf: conf(version),
        kernel: &k,
        initrd: Some(&i),
        tries: 3,
    };
    make_room(esp, install_size(&new), booted)?;
    install_entry(esp, &new, booted)
}

/// An ESP with `os-1` installed and blessed, and an empty `loader.conf`.
fn base(esp: &dyn Esp) {
    write_loader_conf(esp, &LoaderConf::default()).unwrap();
    let name = install(esp, "os-1", "1", None).unwrap();
    bless(esp, &name).unwrap();
}

fn entry_names(esp: &dyn Esp) -> Vec<String> {
    esp.list("loader/entries")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

fn boot_name(esp: &dyn Esp) -> (String, String) {
    let record = boot(esp, &mut LoaderVars::default())
        .unwrap()
        .expect("an entry to boot");
    (
        record.entry.name.file_name().to_owned(),
        record.current_name().file_name().to_owned(),
    )
}

#[test]
fn a_good_update_is_tried_then_blessed_and_wins() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    assert_eq!(boot_name(&esp), ("os-1.conf".into(), "os-1.conf".into()));

    let booted = EntryName::parse("os-1.conf").unwrap();
    install(&esp, "os-2", "2", Some(&booted)).unwrap();
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2+3.conf"]);

    let record = boot(&esp, &mut LoaderVars::default()).unwrap().unwrap();
    assert_eq!(record.entry.name.file_name(), "os-2+3.conf");
    assert_eq!(record.loader_entry_selected, "os-2+3.conf");
    assert_eq!(
        record.loader_boot_count_path.as_deref(),
        Some("\\loader\\entries\\os-2+2-1.conf")
    );
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2+2-1.conf"]);

    let booted = booted_entry(
        &esp,
        record.loader_boot_count_path.as_deref(),
        Some(&record.loader_entry_selected),
    )
    .unwrap()
    .unwrap();
    assert_eq!(booted.file_name(), "os-2+2-1.conf");
    bless(&esp, &booted).unwrap();
    bless(&esp, &booted).unwrap();
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2.conf"]);
    assert_eq!(boot_name(&esp), ("os-2.conf".into(), "os-2.conf".into()));
}

#[test]
fn a_failing_update_is_tried_three_times_then_the_old_entry_boots() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    install(
        &esp,
        "os-2",
        "2",
        Some(&EntryName::parse("os-1.conf").unwrap()),
    )
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(boot_name(&esp));
    }
    let s = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        seen,
        [
            s("os-2+3.conf", "os-2+2-1.conf"),
            s("os-2+2-1.conf", "os-2+1-2.conf"),
            s("os-2+1-2.conf", "os-2+0-3.conf"),
            s("os-1.conf", "os-1.conf"),
            s("os-1.conf", "os-1.conf"),
        ]
    );
    // Exactly the files the rules predict, with their contents.
    let (k1, i1) = payload_paths("os-1");
    let (k2, i2) = payload_paths("os-2");
    let snap = esp.snapshot();
    let paths: Vec<&str> = snap.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "loader/entries/os-1.conf",
            "loader/entries/os-2+0-3.conf",
            "loader/loader.conf",
            &i1,
            &k1,
            &i2,
            &k2
        ]
    );
    let entry =
        EntryConf::parse(std::str::from_utf8(&snap["loader/entries/os-2+0-3.conf"]).unwrap());
    assert_eq!(entry.linux.as_deref(), Some("/rackproof/os-2.linux"));
    assert_eq!(entry.initrd, ["/rackproof/os-2.initrd"]);
    assert_eq!(snap[&k2], kernel("2"));
}

#[test]
fn a_default_pattern_matching_only_the_new_entry_pins_it_at_zero_tries() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    write_loader_conf(
        &esp,
        &LoaderConf {
            default: Some("os-2*".into()),
            ..LoaderConf::default()
        },
    )
    .unwrap();
    install(&esp, "os-2", "2", None).unwrap();
    let booted: Vec<String> = (0..5).map(|_| boot_name(&esp).1).collect();
    assert_eq!(
        booted,
        [
            "os-2+2-1.conf",
            "os-2+1-2.conf",
            "os-2+0-3.conf",
            "os-2+0-4.conf",
            "os-2+0-5.conf"
        ]
    );
}

#[test]
fn an_entry_marked_bad_is_skipped_and_a_blessed_entry_is_never_counted() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    let new = install(&esp, "os-2", "2", None).unwrap();
    let bad = mark_bad(&esp, &new).unwrap();
    assert_eq!(bad.file_name(), "os-2+0-0.conf");
    assert_eq!(mark_bad(&esp, &bad).unwrap(), bad);
    assert_eq!(boot_name(&esp).1, "os-1.conf");
    let err = mark_bad(&esp, &EntryName::parse("os-1.conf").unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "mark entry os-1.conf bad: it has no boot counter"
    );
    let err = bless(&esp, &EntryName::parse("os-9.conf").unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "change entry os-9.conf: no such entry on the ESP"
    );
}

#[test]
fn every_entry_failing_keeps_booting_the_first_one() {
    let esp = MemEsp::new(1 << 20);
    write_loader_conf(&esp, &LoaderConf::default()).unwrap();
    install(&esp, "os-1", "1", None).unwrap();
    install(&esp, "os-2", "2", None).unwrap();
    let booted: Vec<String> = (0..8).map(|_| boot_name(&esp).0).collect();
    assert_eq!(
        booted,
        [
            "os-2+3.conf",
            "os-2+2-1.conf",
            "os-2+1-2.conf",
            "os-1+3.conf",
            "os-1+2-1.conf",
            "os-1+1-2.conf",
            "os-2+0-3.conf",
            "os-2+0-4.conf"
        ]
    );
}

#[test]
fn an_entry_whose_kernel_is_missing_is_not_listed() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    install(&esp, "os-2", "2", None).unwrap();
    esp.remove(&payload_paths("os-2").0).unwrap();
    assert_eq!(boot_name(&esp).0, "os-1.conf");
    assert!(
        boot(&MemEsp::new(1024), &mut LoaderVars::default())
            .unwrap()
            .is_none()
    );
}

/// The uninterrupted install's result, to compare interrupted-then-repeated runs with.
fn installed_reference() -> BTreeMap<String, Vec<u8>> {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    install(
        &esp,
        "os-2",
        "2",
        Some(&EntryName::parse("os-1.conf").unwrap()),
    )
    .unwrap();
    esp.snapshot()
}

#[test]
fn a_power_cut_at_every_step_of_an_install_leaves_a_bootable_esp() {
    let reference = installed_reference();
    let booted = EntryName::parse("os-1.conf").unwrap();
    // Count the steps of one install (with a stale entry of the same stem to replace).
    let probe = MemEsp::new(1 << 20);
    base(&probe);
    install(&probe, "os-2", "2", None).unwrap();
    let stale = mark_bad(&probe, &EntryName::parse("os-2+3.conf").unwrap()).unwrap();
    assert_eq!(stale.file_name(), "os-2+0-0.conf");
    let before = probe.snapshot();
    let start = probe.mutations();
    install(&probe, "os-2", "2", Some(&booted)).unwrap();
    let steps = probe.mutations() - start;
    assert!(
        steps >= 3,
        "an install takes several durable steps, saw {steps}"
    );

    for cut_at in 0..steps {
        let esp = MemEsp::new(1 << 20);
        esp.restore(before.clone());
        esp.cut_power_after(cut_at);
        let err = install(&esp, "os-2", "2", Some(&booted)).unwrap_err();
        assert!(err.is_power_lost(), "step {cut_at}: {err}");
        esp.restore_power();

        // The loader boots a complete entry: its kernel and initrd are intact.
        let record = boot(&esp, &mut LoaderVars::default())
            .unwrap()
            .expect("bootable");
        let version = record.entry.conf.version.clone().unwrap();
        let (k, i) = payload_paths(record.entry.name.stem());
        assert_eq!(esp.read(&k).unwrap(), kernel(&version), "step {cut_at}");
        assert_eq!(esp.read(&i).unwrap(), initrd(&version), "step {cut_at}");
        assert!(
            ["os-1.conf", "os-2+3.conf", "os-2+0-0.conf"].contains(&record.entry.name.file_name()),
            "step {cut_at}"
        );

        // Repeating the install (after undoing that boot's rename) converges on the reference.
        esp.restore(
            esp.snapshot()
                .into_iter()
                .map(|(p, d)| (unbump(&p), d))
                .collect(),
        );
        install(&esp, "os-2", "2", Some(&booted)).unwrap();
        collect_garbage(&esp).unwrap();
        assert_eq!(esp.snapshot(), reference, "step {cut_at}");
    }
}

/// Undoes one loader rename in a path, so the repeated install starts from the interrupted state.
fn unbump(path: &str) -> String {
    match path {
        "loader/entries/os-2+2-1.conf" => "loader/entries/os-2+3.conf".into(),
        "loader/entries/os-2+0-1.conf" => "loader/entries/os-2+0-0.conf".into(),
        other => other.into(),
    }
}

#[test]
fn a_power_cut_during_blessing_leaves_one_entry_either_way() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    install(&esp, "os-2", "2", None).unwrap();
    let record = boot(&esp, &mut LoaderVars::default()).unwrap().unwrap();
    esp.cut_power_after(0);
    assert!(
        bless(&esp, record.current_name())
            .unwrap_err()
            .is_power_lost()
    );
    esp.restore_power();
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2+2-1.conf"]);
    bless(&esp, record.current_name()).unwrap();
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2.conf"]);
}

#[test]
fn a_power_cut_during_the_loader_rename_boots_nothing_and_changes_nothing() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    install(&esp, "os-2", "2", None).unwrap();
    esp.cut_power_after(0);
    assert!(
        boot(&esp, &mut LoaderVars::default())
            .unwrap_err()
            .is_power_lost()
    );
    esp.restore_power();
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2+3.conf"]);
}

#[test]
fn installing_refuses_to_replace_the_booted_entry_and_checks_space_first() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    let booted = EntryName::parse("os-1.conf").unwrap();
    let err = install(&esp, "os-1", "1", Some(&booted)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "install entry os-1: it is the booted entry"
    );

    let measure = MemEsp::new(1 << 20);
    base(&measure);
    let used = (1 << 20) - measure.free_space().unwrap();
    let small = MemEsp::new(used + 50);
    base(&small);
    let before = small.snapshot();
    let (k, i) = (kernel("2"), initrd("2"));
    let new = NewEntry {
        stem: "os-2",
        conf: conf("2"),
        kernel: &k,
        initrd: Some(&i),
        tries: 3,
    };
    let err = install_entry(&small, &new, Some(&booted)).unwrap_err();
    assert!(matches!(err, UpdateError::NoSpace { .. }), "{err}");
    assert_eq!(small.snapshot(), before, "nothing written");
    let err = make_room(&small, install_size(&new), Some(&booted)).unwrap_err();
    assert!(err.to_string().starts_with("make room for "), "{err}");
    assert_eq!(
        small.snapshot(),
        before,
        "the booted, last good entry stays"
    );
}

#[test]
fn making_room_removes_bad_then_trial_then_old_good_entries_but_never_booted_or_last_good() {
    let esp = MemEsp::new(1 << 20);
    write_loader_conf(&esp, &LoaderConf::default()).unwrap();
    for v in ["1", "2", "3", "4"] {
        let n = install(&esp, &format!("os-{v}"), v, None).unwrap();
        if v != "4" {
            bless(&esp, &n).unwrap();
        }
    }
    mark_bad(&esp, &EntryName::parse("os-4+3.conf").unwrap()).unwrap();
    install(&esp, "os-5", "5", None).unwrap();
    // Booted: os-2 (an older good entry); last good in order: os-3.
    let booted = EntryName::parse("os-2.conf").unwrap();
    let all = esp.free_space().unwrap() + 1_000_000;
    let err = make_room(&esp, all, Some(&booted)).unwrap_err();
    assert!(matches!(err, UpdateError::NoSpace { .. }));
    assert_eq!(entry_names(&esp), ["os-2.conf", "os-3.conf"]);
    let paths = esp.paths();
    assert!(
        paths
            .iter()
            .all(|p| !p.contains("os-1.") && !p.contains("os-4.") && !p.contains("os-5.")),
        "{paths:?}"
    );
}

#[test]
fn making_room_stops_as_soon_as_there_is_enough() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    let n = install(&esp, "os-2", "2", None).unwrap();
    mark_bad(&esp, &n).unwrap();
    install(&esp, "os-3", "3", None).unwrap();
    let free = esp.free_space().unwrap();
    let removed = make_room(
        &esp,
        free + 10,
        Some(&EntryName::parse("os-1.conf").unwrap()),
    )
    .unwrap();
    let removed: Vec<&str> = removed.iter().map(EntryName::file_name).collect();
    assert_eq!(removed, ["os-2+0-0.conf"]);
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-3+3.conf"]);
}

#[test]
fn garbage_is_temporary_files_and_unreferenced_payloads() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    esp.write_file("loader/entries/.os-2+3.conf.tmp", b"half")
        .unwrap();
    esp.write_file("rackproof/os-2.linux", b"orphan").unwrap();
    let removed = collect_garbage(&esp).unwrap();
    assert_eq!(
        removed,
        ["loader/entries/.os-2+3.conf.tmp", "rackproof/os-2.linux"]
    );
    assert!(collect_garbage(&esp).unwrap().is_empty());
}

#[test]
fn the_booted_entry_is_found_from_loader_variables() {
    let names: Vec<EntryName> = ["os-1.conf", "os-2+2-1.conf"]
        .iter()
        .map(|n| EntryName::parse(n).unwrap())
        .collect();
    let found = |p: Option<&str>, s: Option<&str>| {
        resolve_booted(&names, p, s).map(|n| n.file_name().to_owned())
    };
    assert_eq!(
        found(
            Some("\\loader\\entries\\os-2+2-1.conf"),
            Some("os-2+3.conf")
        )
        .as_deref(),
        Some("os-2+2-1.conf")
    );
    assert_eq!(
        found(None, Some("os-2+3.conf")).as_deref(),
        Some("os-2+2-1.conf"),
        "by stem"
    );
    assert_eq!(found(None, Some("OS-1.CONF")).as_deref(), Some("os-1.conf"));
    assert_eq!(
        found(Some("\\loader\\entries\\os-2+1-2.conf"), None).as_deref(),
        Some("os-2+2-1.conf")
    );
    assert_eq!(found(None, Some("os-9.conf")), None);
    assert_eq!(found(None, None), None);
}

#[test]
fn efivarfs_strings_round_trip() {
    let bytes = encode_efivarfs_string("os-2+3.conf");
    assert_eq!(
        decode_efivarfs_string("LoaderEntrySelected", &bytes).unwrap(),
        "os-2+3.conf"
    );
    let err = decode_efivarfs_string("LoaderEntrySelected", &[7, 0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "decode EFI variable LoaderEntrySelected: shorter than its 4-byte attribute header"
    );
    assert!(decode_efivarfs_string("X", &[7, 0, 0, 0, 1]).is_err());
}

#[test]
fn a_directory_esp_follows_the_same_rules() {
    let dir = tempfile::tempdir().unwrap();
    let esp = DirEsp::new(dir.path()).unwrap();
    base(&esp);
    install(
        &esp,
        "os-2",
        "2",
        Some(&EntryName::parse("os-1.conf").unwrap()),
    )
    .unwrap();
    let booted: Vec<String> = (0..4).map(|_| boot_name(&esp).1).collect();
    assert_eq!(
        booted,
        [
            "os-2+2-1.conf",
            "os-2+1-2.conf",
            "os-2+0-3.conf",
            "os-1.conf"
        ]
    );
    assert_eq!(entry_names(&esp), ["os-1.conf", "os-2+0-3.conf"]);
    assert!(dir.path().join("rackproof/os-2.linux").is_file());
}

#[test]
fn the_loader_records_bumps_and_oneshot_and_saved_variables() {
    let esp = MemEsp::new(1 << 20);
    base(&esp);
    install(&esp, "os-2", "2", None).unwrap();
    let mut vars = LoaderVars {
        entry_oneshot: Some("os-1.conf".into()),
        ..LoaderVars::default()
    };
    let record = boot(&esp, &mut vars).unwrap().unwrap();
    assert_eq!(
        (record.entry.name.file_name(), &record.bump),
        ("os-1.conf", &Bump::NoCounter)
    );
    assert_eq!(vars.entry_oneshot, None, "one shot is consumed");
    assert_eq!(record.loader_boot_count_path, None);

    write_loader_conf(
        &esp,
        &LoaderConf {
            default: Some("@saved".into()),
            ..LoaderConf::default()
        },
    )
    .unwrap();
    let mut vars = LoaderVars {
        entry_last_booted: Some("os-1.conf".into()),
        ..LoaderVars::default()
    };
    let record = boot(&esp, &mut vars).unwrap().unwrap();
    assert_eq!(record.entry.name.file_name(), "os-1.conf");
    assert_eq!(vars.entry_last_booted.as_deref(), Some("os-1.conf"));
}
