//! The GPU processes the sim reports, as NVML's running-compute-process list does (issue 10).
//!
//! A sim run that holds GPUs (the agent's `microbench calibrate` child) registers itself in a
//! directory shared with whoever reads the node's counters (the agent's sim node), and is
//! seen there while it lives. A process that exits, even by SIGKILL, holds nothing: the
//! driver frees a dead process's memory, so entries of dead processes are dropped on read.
//!
//! `pid_offset` models a driver that reports PIDs of another PID namespace (an agent in a
//! container without `hostPID`): the PID reported is the process's own plus the offset, and
//! the process's environment is published under `proc/<reported pid>/environ` in the
//! directory, as the host's `/proc` looks through a hostPath mount.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// GPU memory a process holds per GPU it works on: a CUDA context with cuBLAS and NCCL
/// loaded takes about half a GiB on an H100 before any buffer.
pub const CONTEXT_BYTES: u64 = 512 << 20;

/// One process on the GPUs, as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// The PID the driver reports (in its PID namespace).
    pub pid: u32,
    /// GPUs it holds a context on.
    pub gpus: Vec<u32>,
    /// Memory it holds on each of them, in bytes.
    pub memory_bytes: u64,
}

/// The shared directory of sim GPU processes.
#[derive(Debug, Clone)]
pub struct ProcessTable {
    dir: PathBuf,
    pid_offset: u32,
}

/// This process's entry; removed when dropped (a killed process leaves it behind, and
/// readers ignore it).
#[derive(Debug)]
pub struct Registration {
    files: Vec<PathBuf>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        for f in &self.files {
            // Gone already or not removable: readers skip dead processes anyway.
            let _ = std::fs::remove_file(f);
        }
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::BadValue {
        field: "--sim-processes",
        value: path.display().to_string(),
        expected: format!("a writable directory ({e})"),
    }
}

impl ProcessTable {
    /// The table in `dir`, reporting PIDs shifted by `pid_offset`.
    pub fn new(dir: impl Into<PathBuf>, pid_offset: u32) -> ProcessTable {
        ProcessTable {
            dir: dir.into(),
            pid_offset,
        }
    }

    /// Where the modelled host `/proc` is: the directory an agent reads environments from
    /// when the driver's PIDs are not its own.
    pub fn host_proc(&self) -> PathBuf {
        self.dir.join("proc")
    }

    /// Registers this process on `gpus`, holding [`CONTEXT_BYTES`] on each.
    pub fn register(&self, gpus: &[u32]) -> Result<Registration> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io_error(&self.dir, e))?;
        let own = std::process::id();
        let reported = own.saturating_add(self.pid_offset);
        let entry = GpuProcess {
            pid: reported,
            gpus: gpus.to_vec(),
            memory_bytes: CONTEXT_BYTES,
        };
        let mut files = Vec::new();
        if self.pid_offset > 0 {
            let proc_dir = self.host_proc().join(reported.to_string());
            std::fs::create_dir_all(&proc_dir).map_err(|e| io_error(&proc_dir, e))?;
            let environ = proc_dir.join("environ");
            let own_environ = std::fs::read("/proc/self/environ").unwrap_or_default();
            std::fs::write(&environ, own_environ).map_err(|e| io_error(&environ, e))?;
            files.push(environ);
        }
        let path = self.dir.join(format!("{own}.json"));
        let text = serde_json::to_string(&entry).map_err(|e| Error::BadValue {
            field: "--sim-processes",
            value: format!("{entry:?}"),
            expected: format!("an entry serde_json can write ({e})"),
        })?;
        std::fs::write(&path, text).map_err(|e| io_error(&path, e))?;
        files.push(path);
        Ok(Registration { files })
    }

    /// The processes alive now; entries of exited processes are removed.
    pub fn read(&self) -> Vec<GpuProcess> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(own) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|_| path.extension().is_some_and(|e| e == "json"))
            else {
                continue;
            };
            if !alive(own) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            // An entry being written reads short; it shows at the next reading.
            if let Some(p) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<GpuProcess>(&t).ok())
            {
                found.push(p);
            }
        }
        found
    }
}

/// True while `pid` runs: it exists and is not a zombie waiting to be reaped (a killed child
/// holds no GPU memory, even before its parent reaps it).
fn alive(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(|pid| procfs::process::Process::new(pid).ok()?.stat().ok())
        .and_then(|stat| stat.state().ok())
        .is_some_and(|state| {
            !matches!(
                state,
                procfs::process::ProcState::Zombie | procfs::process::ProcState::Dead
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_alive_and_an_unreaped_one_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(alive(child.id()));
        child.kill().unwrap();
        // Killed but not yet reaped: a zombie, which holds no GPU.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(child.id()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!alive(child.id()));
        child.wait().unwrap();
        assert!(!alive(u32::MAX));
    }

    #[test]
    fn a_registered_process_shows_until_its_entry_drops() {
        let dir = tempfile::tempdir().unwrap();
        let table = ProcessTable::new(dir.path(), 0);
        assert!(table.read().is_empty());
        let held = table.register(&[0, 1]).unwrap();
        assert_eq!(
            table.read(),
            vec![GpuProcess {
                pid: std::process::id(),
                gpus: vec![0, 1],
                memory_bytes: CONTEXT_BYTES
            }]
        );
        drop(held);
        assert!(table.read().is_empty());
    }

    #[test]
    fn another_pid_namespace_reports_shifted_pids_and_publishes_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let table = ProcessTable::new(dir.path(), 1000);
        let _held = table.register(&[3]).unwrap();
        let reported = std::process::id() + 1000;
        assert_eq!(table.read()[0].pid, reported);
        let environ = table.host_proc().join(reported.to_string()).join("environ");
        assert_eq!(
            std::fs::read(environ).unwrap(),
            std::fs::read("/proc/self/environ").unwrap()
        );
    }

    #[test]
    fn entries_of_dead_processes_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        // PIDs above Linux's largest pid_max (2^22) never run.
        std::fs::write(
            dir.path().join("4194305.json"),
            r#"{"pid":4194305,"gpus":[0],"memory_bytes":1}"#,
        )
        .unwrap();
        assert!(ProcessTable::new(dir.path(), 0).read().is_empty());
        assert!(!dir.path().join("4194305.json").exists());
    }
}
