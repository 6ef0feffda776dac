//! The agent's log as a log shipper reads it: with `MESHFIT_LOG_FORMAT=json`, every line it
//! writes, from the start through a calibration to the stop, is one JSON object.

use meshfit_e2e::{agent_bin, sim_args, wait_calibrated, Agent};
use std::process::Command;
use std::time::Duration;

#[test]
fn with_json_format_every_log_line_is_a_json_event() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let log = dir.path().join("agent.log");
    let args = sim_args("dgx-h100", &state, "json-node", &[]);
    let mut agent = Agent::start(&args, &[("MESHFIT_LOG_FORMAT", "json")], &log);
    wait_calibrated(&agent);
    let (status, _) = agent.terminate(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "agent exit {status:?}");
    let text = agent.log_text();
    let mut messages = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
        for key in ["timestamp", "level", "target"] {
            assert!(event[key].is_string(), "no {key} in {line}");
        }
        let message = event["fields"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no fields.message in {line}"));
        messages.push(message.to_string());
    }
    for want in ["listening on http://", "calibration started", "stopping"] {
        assert!(
            messages.iter().any(|m| m.contains(want)),
            "no {want:?} among the JSON log's messages: {messages:?}"
        );
    }
}

#[test]
fn text_stays_the_default_and_a_bad_format_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let log = dir.path().join("agent.log");
    let args = sim_args("dgx-h100", &state, "text-node", &[]);
    let mut agent = Agent::start(&args, &[], &log);
    agent.terminate(Duration::from_secs(10));
    let first = agent.log_text();
    let first = first.lines().next().unwrap_or_default();
    assert!(
        serde_json::from_str::<serde_json::Value>(first).is_err() && first.contains("INFO"),
        "the default log is not text: {first}"
    );

    let out = Command::new(agent_bin())
        .args(&args)
        .env("MESHFIT_LOG_FORMAT", "logfmt")
        .output()
        .expect("running agent");
    assert_eq!(
        out.status.code(),
        Some(2),
        "exit of a bad MESHFIT_LOG_FORMAT"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MESHFIT_LOG_FORMAT=\"logfmt\": expected text or json"),
        "{err}"
    );
}
