//! The calibration child: `microbench calibrate --json`, started for one run and read as it
//! streams one record per line (issue 10).
//!
//! The agent never loads CUDA, cuBLAS or NCCL itself: a kernel that hangs, a library that
//! panics or a driver that wedges costs one child, never the daemon or a GPU. The child is
//! stopped with SIGTERM, then SIGKILL after a grace period, and everything it printed before
//! is still delivered, so a stopped run keeps what it measured. The kernel kills it when the
//! agent dies, `kill -9` included ([`die_with_parent`]).

use crate::error::{Error, Result};
use record::Record;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The variable that marks a process as this agent's calibration run; its value is a token
/// new for every run, read back from `/proc/<pid>/environ` (see [`crate::identity`]).
pub const RUN_TOKEN_ENV: &str = "MESHFIT_CALIBRATION_RUN";

/// How long output may still arrive after the child has exited (its pipes drain).
const DRAIN: Duration = Duration::from_secs(1);

/// The line microbench prints on stderr for a point that failed while the run went on.
const SKIPPED: &str = "microbench: skipped ";

/// What the child says, in the order it said it; [`Event::Exited`] comes last.
#[derive(Debug)]
pub enum Event {
    /// A measurement record from stdout.
    Record(Box<Record>),
    /// A point that could not be measured, and why (the run went on).
    Skipped(String),
    /// A stderr line meant for a debug log ([`microbench::kernels::DEBUG_LINE`]), such as
    /// the SM clock a GEMM ran at.
    Debug(String),
    /// Any other line: stderr, or stdout that is not a record.
    Line(String),
    /// The process ended; `None` when its status could not be read.
    Exited(Option<ExitStatus>),
}

/// A started child.
pub struct Child {
    pid: u32,
    events: mpsc::UnboundedReceiver<Event>,
    stop: Option<oneshot::Sender<()>>,
}

/// Finds the microbench binary: the configured path, else `microbench` next to the agent's
/// executable (the image ships both in one directory), else the first on `PATH`.
pub fn find_microbench(configured: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = configured {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(Error::BadValue {
                field: "microbench_bin",
                value: path.display().to_string(),
                expected: "an existing microbench executable".into(),
            })
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("microbench")));
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("microbench"))
                .collect()
        })
        .unwrap_or_default();
    beside
        .into_iter()
        .chain(on_path)
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| Error::BadValue {
            field: "microbench_bin",
            value: "(none)".into(),
            expected: "a microbench executable: none next to the agent or on PATH; set \
                       --microbench-bin"
                .into(),
        })
}

impl Child {
    /// Starts `program` with `args`, marked with `token`, its output read as it comes. The
    /// child is stopped (SIGTERM, then SIGKILL after `grace`) when [`Child::stop`] is called
    /// or the `Child` is dropped.
    pub fn spawn(program: &Path, args: &[String], token: &str, grace: Duration) -> Result<Child> {
        let mut command = tokio::process::Command::new(program);
        let parent = std::process::id();
        // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe
        // calls are sound: it makes two system calls and allocates nothing.
        unsafe { command.pre_exec(move || die_with_parent(parent)) };
        let mut process = command
            .args(args)
            .env(RUN_TOKEN_ENV, token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Child {
                program: program.to_path_buf(),
                source,
            })?;
        let pid = process.id().unwrap_or_default();
        let (tx, events) = mpsc::unbounded_channel();
        let (stop, stop_rx) = oneshot::channel();
        let readers =
            [
                process.stdout.take().map(|out| {
                    tokio::spawn(read_lines(BufReader::new(out), tx.clone(), stdout_event))
                }),
                process.stderr.take().map(|err| {
                    tokio::spawn(read_lines(BufReader::new(err), tx.clone(), stderr_event))
                }),
            ];
        tokio::spawn(async move {
            let status = tokio::select! {
                status = process.wait() => status.ok(),
                // Asked to stop, or the `Child` was dropped.
                _ = stop_rx => terminate(&mut process, grace).await,
            };
            for reader in readers.into_iter().flatten() {
                // A grandchild holding the pipes open must not hold the run.
                let _ = tokio::time::timeout(DRAIN, reader).await;
            }
            let _ = tx.send(Event::Exited(status));
        });
        Ok(Child {
            pid,
            events,
            stop: Some(stop),
        })
    }

    /// The child's PID, as the agent sees it.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The next thing the child said; `None` once [`Event::Exited`] has been given.
    pub async fn next(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Asks the child to stop: SIGTERM now, SIGKILL after the grace period. What it printed
    /// before still arrives through [`Child::next`], then [`Event::Exited`].
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Runs in the child between fork and exec: asks the kernel for SIGKILL when the agent dies,
/// so that a child never outlives it holding the GPUs (issue 31: after `kill -9` of the
/// agent the child was reparented and kept them). Fails, and the child exits, when the agent
/// `parent` died before the request was made, as the signal would then never come.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not when the
/// process does. The agent forks on the thread of its runtime: `main.rs` builds a
/// current-thread runtime, whose one thread is the main thread, and [`Child::spawn`] is
/// called from async code on it, so the forking thread lives as long as the agent. A
/// multi-threaded runtime keeps its workers for its lifetime too, but a blocking-pool thread
/// exits after idling 10 s: never call [`Child::spawn`] from `spawn_blocking`.
fn die_with_parent(parent: u32) -> std::io::Result<()> {
    // SAFETY: prctl(2) with an option and a signal number: it touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: getppid(2) takes nothing and cannot fail.
    let reparented = u32::try_from(unsafe { libc::getppid() }).ok() != Some(parent);
    if reparented {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// SIGTERM, then SIGKILL when the child outlives `grace`; the exit status, if it came.
async fn terminate(process: &mut tokio::process::Child, grace: Duration) -> Option<ExitStatus> {
    if let Some(pid) = process.id().and_then(|p| libc::pid_t::try_from(p).ok()) {
        // SAFETY: kill(2) with a PID of our own unreaped child: it cannot name another process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    if let Ok(status) = tokio::time::timeout(grace, process.wait()).await {
        return status.ok();
    }
    tracing::warn!("the calibration child outlived SIGTERM by {grace:?}; sending SIGKILL");
    let _ = process.start_kill();
    // A process stuck in the driver (uninterruptible sleep) may not die at once; tokio reaps
    // it later, and the run is not held for it.
    tokio::time::timeout(DRAIN, process.wait())
        .await
        .ok()
        .and_then(Result::ok)
}

async fn read_lines(
    reader: impl AsyncBufRead + Unpin,
    tx: mpsc::UnboundedSender<Event>,
    event: fn(String) -> Event,
) {
    let mut lines = reader.lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if !line.trim().is_empty() && tx.send(event(line)).is_err() {
            return;
        }
    }
}

fn stdout_event(line: String) -> Event {
    match serde_json::from_str::<Record>(&line) {
        Ok(record) => Event::Record(Box::new(record)),
        Err(e) => Event::Line(format!("stdout line that is not a record ({e}): {line}")),
    }
}

fn stderr_event(line: String) -> Event {
    if let Some(point) = line.strip_prefix(SKIPPED) {
        Event::Skipped(point.to_string())
    } else if let Some(note) = line.strip_prefix(microbench::kernels::DEBUG_LINE) {
        Event::Debug(note.to_string())
    } else {
        Event::Line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::time::Instant;

    fn sh(script: &str) -> Child {
        Child::spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            "t0k3n",
            Duration::from_millis(300),
        )
        .unwrap()
    }

    async fn all(child: &mut Child) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(e) = child.next().await {
            events.push(e);
        }
        events
    }

    const RECORD: &str = r#"{"kind":"hbm_copy","backend":"sim","gpus":[0],"scope":"intra_node","ranks":1,"bytes":1024,"dtype":"uint8","time_s":1e-6,"clock":"model"}"#;

    #[tokio::test]
    async fn records_skips_and_lines_arrive_in_order_then_the_exit() {
        let mut child = sh(&format!(
            "echo '{RECORD}'; echo 'microbench: skipped gemm on GPU 0: no' >&2; \
             echo 'microbench: debug: gemm on GPU 0: SM clock 1755 MHz' >&2; \
             echo \"token=${RUN_TOKEN_ENV}\" >&2; exit 3"
        ));
        let events = all(&mut child).await;
        assert!(
            matches!(&events[0], Event::Record(r) if r.bytes == 1024),
            "{events:?}"
        );
        let texts: Vec<String> = events[1..].iter().map(|e| format!("{e:?}")).collect();
        assert!(
            texts.contains(&r#"Skipped("gemm on GPU 0: no")"#.to_string()),
            "{texts:?}"
        );
        assert!(
            texts.contains(&r#"Debug("gemm on GPU 0: SM clock 1755 MHz")"#.to_string()),
            "{texts:?}"
        );
        assert!(
            texts.contains(&r#"Line("token=t0k3n")"#.to_string()),
            "{texts:?}"
        );
        match events.last() {
            Some(Event::Exited(Some(status))) => assert_eq!(status.code(), Some(3)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn stop_ends_a_child_that_ignores_sigterm_and_keeps_its_output() {
        let mut child = sh(&format!(
            "trap '' TERM; echo '{RECORD}'; while :; do sleep 1; done"
        ));
        assert!(matches!(child.next().await, Some(Event::Record(_))));
        let start = Instant::now();
        child.stop();
        let events = all(&mut child).await;
        // SIGTERM is ignored: SIGKILL follows the 300 ms grace.
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        match events.last() {
            Some(Event::Exited(Some(status))) => assert_eq!(status.signal(), Some(libc::SIGKILL)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn sigterm_alone_ends_a_child_that_heeds_it() {
        let mut child = sh("sleep 30");
        child.stop();
        match all(&mut child).await.last() {
            Some(Event::Exited(Some(status))) => assert_eq!(status.signal(), Some(libc::SIGTERM)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_binary_is_named() {
        let err = find_microbench(Some(Path::new("/nonexistent/microbench"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "microbench_bin `/nonexistent/microbench`: an existing microbench executable"
        );
    }
}
