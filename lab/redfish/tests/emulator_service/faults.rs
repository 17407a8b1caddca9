//! Fault effects and vendor profiles: statuses, latency, task monitors, ignored actions, expired
//! sessions, and configurations the emulator refuses.

use crate::support::*;

#[tokio::test]
async fn status_faults_apply_a_bounded_number_of_times() {
    let (_, emulator) = setup(PowerState::On);
    emulator
        .add_fault(FaultRule::status("GET", "/redfish/v1/Systems/*", 503).times(2))
        .unwrap();
    for _ in 0..2 {
        let answer = get(&emulator, "/redfish/v1/Systems/1").await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            message_id(&answer),
            "Base.1.16.ServiceTemporarilyUnavailable"
        );
        assert_eq!(answer.headers["retry-after"], "1");
    }
    assert_eq!(
        get(&emulator, "/redfish/v1/Systems/1").await.status,
        StatusCode::OK
    );
    assert!(emulator.faults().is_empty());
    let id = emulator
        .add_fault(FaultRule::status("POST", RESET, 500))
        .unwrap();
    assert_eq!(
        reset(&emulator, "On").await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert!(emulator.remove_fault(id));
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    let statuses: Vec<u16> = emulator.journal().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![503, 503, 200, 500, 204]);
}

#[tokio::test(start_paused = true)]
async fn latency_delays_answers_in_virtual_time() {
    let machine = TestMachine::new(PowerState::On);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine, clock.clone());
    emulator
        .add_fault(
            FaultRule::latency(
                Some("GET"),
                "/redfish/v1/Chassis/*",
                Duration::from_secs(3600),
            )
            .times(1),
        )
        .unwrap();
    let start = clock.instant();
    assert_eq!(
        get(&emulator, "/redfish/v1/Chassis/1").await.status,
        StatusCode::OK
    );
    assert!(clock.since(start) >= Duration::from_secs(3600));
    let again = clock.instant();
    assert_eq!(
        get(&emulator, "/redfish/v1/Chassis/1").await.status,
        StatusCode::OK
    );
    assert!(
        clock.since(again) < Duration::from_secs(1),
        "the rule applied once only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reset_under_latency_completes_through_a_task_monitor() {
    let machine = TestMachine::new(PowerState::Off);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine.clone(), clock.clone());
    emulator
        .add_fault(FaultRule::latency(
            Some("POST"),
            RESET,
            Duration::from_secs(30),
        ))
        .unwrap();
    let accepted = reset(&emulator, "On").await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let monitor = accepted.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(monitor, "/redfish/v1/TaskService/TaskMonitors/1");
    assert_eq!(accepted.body["TaskState"], "Running");
    assert_eq!(
        machine.snapshot().power,
        PowerState::Off,
        "nothing happens before the delay"
    );
    assert_eq!(get(&emulator, &monitor).await.status, StatusCode::ACCEPTED);
    clock.sleep(Duration::from_secs(31)).await;
    assert_eq!(
        get(&emulator, &monitor).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(machine.snapshot().power, PowerState::On);
    let task = get(&emulator, "/redfish/v1/TaskService/Tasks/1").await;
    assert_eq!(task.body["TaskState"], "Completed");
    assert_eq!(task.body["EndTime"], "1970-01-01T00:00:30+00:00");
    // A reset the machine refuses ends the task in Exception, and the monitor reports the error.
    assert_eq!(
        reset(&emulator, "ForceOff").await.status,
        StatusCode::ACCEPTED
    );
    clock.sleep(Duration::from_secs(31)).await;
    assert_eq!(reset(&emulator, "Nmi").await.status, StatusCode::ACCEPTED);
    clock.sleep(Duration::from_secs(31)).await;
    let failed = get(&emulator, "/redfish/v1/TaskService/TaskMonitors/3").await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        get(&emulator, "/redfish/v1/TaskService/Tasks/3").await.body["TaskState"],
        "Exception"
    );
}

#[tokio::test]
async fn ignored_actions_are_accepted_and_do_nothing() {
    let (machine, emulator) = setup(PowerState::Off);
    emulator
        .add_fault(
            FaultRule::ignore_action("POST", RESET)
                .for_reset_type(ResetAction::On)
                .times(1),
        )
        .unwrap();
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::Off);
    assert!(machine.snapshot().resets.is_empty());
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::On);
    emulator
        .add_fault(FaultRule::ignore_action("PATCH", "/redfish/v1/Systems/1").times(1))
        .unwrap();
    let patch = json!({"Boot": {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "Cd"}});
    assert_eq!(
        call(
            &emulator,
            "PATCH",
            "/redfish/v1/Systems/1",
            Some(&basic()),
            Some(patch),
            &[]
        )
        .await
        .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(machine.snapshot().boot.mode, BootOverrideMode::Disabled);
}

#[tokio::test]
async fn expired_sessions_fail_with_401() {
    let (_, emulator) = setup(PowerState::On);
    let login = call(
        &emulator,
        "POST",
        "/redfish/v1/SessionService/Sessions",
        None,
        Some(json!({"UserName": USER, "Password": PASSWORD})),
        &[],
    )
    .await;
    let token = login.headers["x-auth-token"].to_str().unwrap().to_owned();
    emulator
        .add_fault(FaultRule::expire_session("/redfish/v1/Systems").times(1))
        .unwrap();
    assert_eq!(
        call(
            &emulator,
            "GET",
            "/redfish/v1/Systems",
            Some(&token),
            None,
            &[]
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(emulator.session_count(), 0);
}

#[tokio::test]
async fn reset_refused_until_off_profile_answers_409_while_on() {
    let (machine, emulator) = setup(PowerState::On);
    emulator.apply_profile(VendorProfile::ResetRefusedUntilOff);
    let refused = reset(&emulator, "PowerCycle").await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(
        message_id(&refused),
        "Base.1.16.ChassisPowerStateOffRequired"
    );
    assert_eq!(
        reset(&emulator, "ForceOff").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        reset(&emulator, "PowerCycle").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        machine.snapshot().resets,
        vec![ResetAction::ForceOff, ResetAction::PowerCycle]
    );
    assert_eq!(
        emulator.faults().len(),
        1,
        "the profile's rule is unbounded"
    );
}

#[tokio::test(start_paused = true)]
async fn slow_profile_delays_every_request_and_defers_resets() {
    let machine = TestMachine::new(PowerState::On);
    let clock = Clock::simulated(jiff::Timestamp::UNIX_EPOCH);
    let emulator = common::emulator(machine, clock.clone());
    emulator.apply_profile(VendorProfile::Slow);
    let start = clock.instant();
    assert_eq!(
        get(&emulator, "/redfish/v1/Systems/1").await.status,
        StatusCode::OK
    );
    assert!(clock.since(start) >= Duration::from_secs(2));
    assert_eq!(
        reset(&emulator, "ForceRestart").await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        emulator.faults()[0].1.effect,
        FaultEffect::Latency {
            delay: Duration::from_secs(2)
        }
    );
}

#[tokio::test]
async fn ignores_first_power_on_profile_ignores_exactly_one_on() {
    let (machine, emulator) = setup(PowerState::Off);
    emulator.apply_profile(VendorProfile::IgnoresFirstPowerOn);
    assert_eq!(
        reset(&emulator, "ForceOff").await.status,
        StatusCode::NO_CONTENT,
        "other resets are unaffected"
    );
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::Off);
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    assert_eq!(machine.snapshot().power, PowerState::On);
    let journal = emulator.journal();
    assert_eq!(
        journal
            .iter()
            .filter(|r| r.reset_type == Some(ResetAction::On))
            .count(),
        2
    );
}

#[tokio::test]
async fn emulator_refuses_bad_configurations() {
    let machine = TestMachine::new(PowerState::On);
    let mut config =
        rackproof_redfish::EmulatorConfig::single(machine.clone(), USER, PASSWORD, Clock::wall());
    config.systems.push(("1".into(), machine.clone()));
    assert!(
        Emulator::new(config.clone())
            .unwrap_err()
            .to_string()
            .contains("appears twice")
    );
    config.systems = vec![("a/b".into(), machine)];
    assert!(
        Emulator::new(config.clone())
            .unwrap_err()
            .to_string()
            .contains("must be non-empty")
    );
    config.systems.clear();
    assert!(Emulator::new(config.clone()).is_err());
    assert!(!format!("{config:?}").contains(PASSWORD));
}

/// Every line logged while answering a request names the BMC and the request: the ignored
/// reset's line is in `bmc_request{bmc=node-1 method=POST path=…}`.
#[tokio::test]
async fn log_lines_of_a_request_name_the_bmc_and_the_request() {
    let (logs, _capturing) = rackproof_test_support::logs::capture();
    let machine = TestMachine::new(PowerState::Off);
    let emulator = Emulator::new(rackproof_redfish::EmulatorConfig {
        name: "node-1".to_owned(),
        ..rackproof_redfish::EmulatorConfig::single(machine, USER, PASSWORD, Clock::wall())
    })
    .unwrap();
    emulator
        .add_fault(FaultRule::ignore_action("POST", RESET).times(1))
        .unwrap();
    assert_eq!(reset(&emulator, "On").await.status, StatusCode::NO_CONTENT);
    let ignored = logs.line_with("reset accepted and ignored");
    assert!(
        ignored.contains(&format!(
            "bmc_request{{bmc=node-1 method=POST path={RESET}}}"
        )),
        "{ignored}"
    );
}
