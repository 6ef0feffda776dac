//! The seeds of agent/fuzz are configurations and state files the agent takes, so fuzzing
//! starts from valid files and a change to a reader that breaks one shows here, on stable,
//! rather than in a fuzz run.

use agent::config::Config;
use agent::state::{self, RunResult};

#[test]
fn config_seeds_read_and_check() {
    for name in ["defaults.yaml", "sim.yaml", "nccl.yaml"] {
        let path = format!(
            "{}/fuzz/seeds/config_yaml/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        Config::from_yaml(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let defaults = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/config_yaml/defaults.yaml"
    ))
    .unwrap();
    assert_eq!(Config::from_yaml(&defaults).unwrap(), Config::default());
}

/// Issue 31: the state file has a fuzz target of its own; its seeds are the state a sim node
/// saved (one record of each kind, GEMMs in each layout) and an aborted run's, and each reads
/// back the same after the agent writes it again, as the target checks of every input.
#[test]
fn state_seeds_read_and_read_back() {
    let read = |name: &str| {
        let path = format!(
            "{}/fuzz/seeds/state_json/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let calibration = state::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let saved = state::encode(&calibration).unwrap();
        assert_eq!(
            state::parse(std::str::from_utf8(&saved).unwrap()).as_ref(),
            Ok(&calibration),
            "{name}"
        );
        calibration
    };
    let whole = read("calibration.json");
    assert_eq!(whole.records.len(), 12);
    assert_eq!(whole.last_run.map(|r| r.result), Some(RunResult::Success));
    let aborted = read("aborted.json");
    let run = aborted.last_run.unwrap();
    assert!(run.partial && run.result == RunResult::AbortedBusy && aborted.records.len() == 3);
}
