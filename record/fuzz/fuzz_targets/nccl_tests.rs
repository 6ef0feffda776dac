//! The nccl-tests parser on arbitrary text: it must return records or an error, never
//! panic, and every record it returns must pass the same validation as a JSON line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use record::nccl_tests::{parse, parse_with, ImportOptions};
use record::{Kind, Scope};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // With nothing given, and with every hint given, so both paths are reached.
    let hinted = ImportOptions {
        collective: Some(Kind::AllReduce),
        ranks: None,
        scope: Some(Scope::IntraNode),
        node: None,
    };
    for parsed in [parse(text), parse_with(text, &hinted)]
        .into_iter()
        .flatten()
    {
        for r in &parsed.records {
            if let Err(e) = r.validate() {
                panic!("parsed an invalid record ({e}): {r:?}");
            }
        }
        for w in &parsed.warnings {
            let _ = w.to_string();
        }
    }
});
