//! The agent's configuration file reader (`--config`) on arbitrary text: a checked
//! configuration or an error, never a panic; one it takes is then printed (`--print-config`)
//! as the agent does, which may not panic either.
#![no_main]

use agent::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_yaml(text) {
        Ok(config) => {
            let _ = config.to_yaml();
        }
        Err(message) => assert!(!message.is_empty(), "a refused file says why"),
    }
});
