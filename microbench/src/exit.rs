//! Exit status: 2 when the command line cannot be acted on, 1 when acting on it failed, 3 when
//! it ran but some points (or some `import` files) failed and the rest were printed.

use std::process::ExitCode;

/// The exit codes, as `--help` shows them.
pub const EXIT_STATUS: &str = "\
Exit status:
  0  success: every point measured, every file imported
  1  runtime failure: no driver or library, a GPU or file missing, a rendezvous that failed,
     nothing imported
  2  usage error: an unknown flag or subcommand, a flag value out of range (sizes, sim
     profile, faults), flags that do not go together or do not fit the launcher's job
  3  partial: some points (or import files) failed, named on stderr; the rest were printed";

/// Some points or files failed; the others were measured and printed.
pub const PARTIAL: u8 = 3;

pub use record::manual::{exit_code as code, usage};

/// A library error about values that came from flags: a bad value is the command line's
/// fault; a driver, GPU or I/O failure is not.
pub fn from_flags(err: microbench::Error) -> anyhow::Error {
    match err {
        microbench::Error::BadValue { .. } => usage(err),
        other => other.into(),
    }
}

/// 0 when nothing failed, [`PARTIAL`] otherwise.
pub fn partial(failed: bool) -> ExitCode {
    if failed {
        ExitCode::from(PARTIAL)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_through_context_and_others_1() {
        let bad = microbench::Error::BadValue {
            field: "-b/-e",
            value: "9..8".into(),
            expected: "0 < minBytes <= maxBytes".into(),
        };
        assert_eq!(code(&from_flags(bad).context("rank 0 of 2")), 2);
        assert_eq!(code(&usage("-g 0: expected 1 to 8 GPUs")), 2);
        let driver = microbench::Error::NoDriver("libnvidia-ml.so.1 not found".into());
        assert_eq!(code(&from_flags(driver)), 1);
    }
}
