//! The runs-file reader (`tuner validate --runs`) on arbitrary text: a runs file or an error,
//! never a panic, whatever the YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match tuner::validate::parse_runs(text, "fuzz") {
        Ok(file) => assert_eq!(file.format, 1, "only format 1 is read"),
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
