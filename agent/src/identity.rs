//! Which GPU processes are the agent's own calibration child, so that during a run only
//! other processes count as a job (issue 10).
//!
//! A process is the child when the driver reports the child's PID, or when its environment
//! carries this run's token (`MESHFIT_CALIBRATION_RUN=<token>`). The first holds when the
//! agent shares the driver's PID namespace (`hostPID: true`, or no container). The second
//! survives namespaces: NVML reports host PIDs, so the agent reads
//! `<host_proc>/<pid>/environ`, where `host_proc` is `/proc` under `hostPID: true` or the
//! host's `/proc` mounted read-only. Without either, the agent's child looks like a job.

use std::path::{Path, PathBuf};

/// The running child, as the agent knows it.
#[derive(Debug, Clone)]
pub struct Identity {
    child_pid: u32,
    marker: Vec<u8>,
    host_proc: PathBuf,
}

impl Identity {
    /// The child `child_pid`, started with `env=token`; other processes' environments are
    /// read under `host_proc`.
    pub fn new(child_pid: u32, env: &str, token: &str, host_proc: &Path) -> Identity {
        Identity {
            child_pid,
            marker: format!("{env}={token}").into_bytes(),
            host_proc: host_proc.to_path_buf(),
        }
    }

    /// True when `pid`, as the driver reports it, is the child.
    pub fn is_own(&self, pid: u32) -> bool {
        pid == self.child_pid || self.environ_has_token(pid)
    }

    fn environ_has_token(&self, pid: u32) -> bool {
        // Unreadable (another user's process without CAP_SYS_PTRACE, or gone): not ours. Read
        // through the bounded reader, not procfs's `environ()`, which takes the whole file.
        let environ = self.host_proc.join(pid.to_string()).join("environ");
        crate::input::read(&environ, crate::input::MAX_ENVIRON_BYTES)
            .is_ok_and(|environ| environ.split(|&b| b == 0).any(|v| v == self.marker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_pid_is_own_and_others_are_not() {
        let id = Identity::new(4242, "MESHFIT_CALIBRATION_RUN", "abc", Path::new("/proc"));
        assert!(id.is_own(4242));
        assert!(!id.is_own(1));
        assert!(!id.is_own(std::process::id()));
    }

    #[test]
    fn the_token_in_a_host_proc_environment_is_own() {
        let host = tempfile::tempdir().unwrap();
        let write = |pid: u32, environ: &[u8]| {
            let dir = host.path().join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("environ"), environ).unwrap();
        };
        write(900_001, b"PATH=/bin\0MESHFIT_CALIBRATION_RUN=abc\0HOME=/");
        // Another run's token, and a prefix of this one, are not this run.
        write(900_002, b"MESHFIT_CALIBRATION_RUN=abcd\0");
        write(900_003, b"MESHFIT_CALIBRATION_RUN=old\0");
        let id = Identity::new(17, "MESHFIT_CALIBRATION_RUN", "abc", host.path());
        assert!(id.is_own(900_001));
        assert!(!id.is_own(900_002));
        assert!(!id.is_own(900_003));
        assert!(!id.is_own(900_004));
    }
}
