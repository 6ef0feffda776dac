//! The agent's configuration file reader (`--config`) on arbitrary text: a configuration or an
//! error, never a panic; one it reads is then checked and printed (`--print-config`) as the
//! agent does, neither of which may panic either.
#![no_main]

use agent::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_yaml(text) {
        Ok(config) => {
            if let Err(e) = config.check() {
                let _ = e.to_string();
            }
            let _ = config.to_yaml();
        }
        Err(message) => assert!(!message.is_empty(), "a refused file says why"),
    }
});
