//! The JSON-lines reader on arbitrary text: records or an error, never a panic, and what it
//! accepts survives a write and a read back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match record::read_json_lines(text) {
        Ok(records) => {
            let mut back = String::new();
            for r in &records {
                back.push_str(&serde_json::to_string(r).expect("a read record serialises"));
                back.push('\n');
            }
            let again = record::read_json_lines(&back).expect("a written record reads back");
            assert_eq!(again.len(), records.len());
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
