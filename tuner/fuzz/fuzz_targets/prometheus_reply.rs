//! The reader of one Prometheus `/api/v1/query` reply on arbitrary bytes (the body is not
//! trusted to be UTF-8 or JSON): a count of samples or a message, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(message) = tuner::ingest::prometheus::read_reply(data) {
        assert!(!message.is_empty(), "a refused reply says why");
    }
});
