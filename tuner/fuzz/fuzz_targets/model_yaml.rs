//! The custom model reader (`--model my.yaml`) on arbitrary text: a shape or an error, never a
//! panic; a shape it returns has passed validation, so its counts compute without one too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match tuner::catalog::model_from_yaml(text, "fuzz") {
        Ok(shape) => {
            // What every layout's cost starts from; a validated shape must not panic here.
            let _ = shape.params().total();
            let _ = shape.model_flops_per_token();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
