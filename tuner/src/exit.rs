//! Exit status: 2 when the command line cannot be acted on, 1 when acting on it failed.
//! Scripts tell "fix the invocation" from "retry or look at the cluster" by the code alone.

use tuner::error::bad_input;
use tuner::TunerError;

/// The exit codes, as `--help` shows them.
pub const EXIT_STATUS: &str = "\
Exit status:
  0  success
  1  runtime failure: a file missing or unreadable, Prometheus unreachable, no layout fits
  2  usage error: an unknown flag or subcommand, a flag value out of range, an unknown model
     or cluster name, pinned knobs that cannot hold at the GPU count";

pub use record::manual::exit_code as code;
use record::manual::Usage;

/// A flag value out of range, named by flag, value and what is allowed: a usage error (a name
/// the catalog lacks and pinned knobs that cannot hold are too, through [`from_flags`]).
pub fn bad_flag(flag: &str, value: impl ToString, allowed: &str) -> Usage {
    Usage(Box::new(bad_input(flag, value, allowed)))
}

/// A library error about values that came from flags: unknown names and out-of-range values
/// are the command line's fault; a file that does not read or parse is not.
pub fn from_flags(err: TunerError) -> anyhow::Error {
    match err {
        TunerError::Unknown { .. } | TunerError::BadInput { .. } => Usage(Box::new(err)).into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_through_context_and_others_1() {
        let usage = anyhow::Error::from(bad_flag("--gpus", 0, "a positive GPU count"));
        assert_eq!(code(&usage), 2);
        assert_eq!(code(&usage.context("--a tp=8")), 2);
        let missing = TunerError::Io {
            path: "runs.yaml".into(),
            message: "No such file or directory".into(),
        };
        assert_eq!(code(&from_flags(missing)), 1);
        let unknown = TunerError::Unknown {
            what: "model",
            name: "llama9".into(),
            similar: vec![],
        };
        assert_eq!(code(&from_flags(unknown)), 2);
        assert_eq!(code(&anyhow::anyhow!("prometheus down")), 1);
    }
}
