//! The seeds of agent/fuzz are configurations the agent takes, so fuzzing starts from valid
//! files and a change to the reader that breaks one shows here, on stable, rather than in a
//! fuzz run.

use agent::config::Config;

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
