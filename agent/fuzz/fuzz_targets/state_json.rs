//! The agent's state file reader (`calibration.json`, read at every start) on arbitrary
//! bytes: a calibration or the reason the file is set aside, never a panic; one it takes is
//! written back as the agent saves it and reads back the same.
#![no_main]

use agent::state;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The agent reads the file as UTF-8 text; other bytes are refused before the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match state::parse(text) {
        Ok(calibration) => {
            let saved = state::encode(&calibration).expect("a calibration always encodes");
            let text = std::str::from_utf8(&saved).expect("JSON is UTF-8");
            assert_eq!(state::parse(text).as_ref(), Ok(&calibration), "a saved state reads back");
        }
        Err(reason) => assert!(!reason.is_empty(), "a set-aside file says why"),
    }
});
