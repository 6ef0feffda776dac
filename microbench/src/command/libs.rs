//! `microbench libs`: the GPU libraries this machine has, as the GPU paths would load them.

use super::output::emit;
use anyhow::Result;
use microbench::kernels::survey::{render, survey};
use std::process::ExitCode;

/// Prints the survey; exits 0 only when every library is usable.
pub(super) fn libs(json: bool) -> Result<ExitCode> {
    let found = survey();
    if json {
        /// The document, led by its schema version (raised when a field is removed, renamed
        /// or changes meaning), as `topo --json`'s.
        #[derive(serde::Serialize)]
        struct Document<'a> {
            schema_version: u32,
            usable: bool,
            libraries: &'a [microbench::kernels::survey::Found],
        }
        let doc = Document {
            schema_version: 1,
            usable: found.iter().all(|f| f.usable()),
            libraries: &found,
        };
        emit(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    } else {
        emit(&render(&found))?;
    }
    Ok(if found.iter().all(|f| f.usable()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
