//! The calibration kept across restarts: one JSON file in the state directory, written
//! atomically (temp file, fsync, rename, fsync of the directory) with a format version. A
//! corrupt file or one of another version is set aside with a warning, never trusted and
//! never fatal.

use crate::error::{Error, Result};
use record::Record;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the state file's format; a file of another version is set aside.
pub const FORMAT_VERSION: u32 = 1;

/// The state file's name inside the state directory.
pub const FILE_NAME: &str = "calibration.json";

/// Largest state file read: a record is about 500 bytes, so a node's 5,120 points are
/// 2.5 MB and 64 MiB holds 25 times that. A state file linked to `/dev/zero` was read until
/// the machine ran out of memory (issue 31); past the limit the file is set aside.
pub const MAX_BYTES: u64 = 64 << 20;

/// How a calibration run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunResult {
    /// Every point was attempted.
    Success,
    /// A job appeared on a GPU; the points measured before are kept.
    AbortedBusy,
    /// The agent was stopped; the points measured before are kept.
    AbortedShutdown,
    /// A point hung or the run passed its time limit.
    Watchdog,
    /// The backend failed (no driver, no libraries).
    Failed,
    /// The GPUs were busy at the start: nothing ran.
    SkippedBusy,
}

impl RunResult {
    /// Every result, in the order metrics list them.
    pub const ALL: [RunResult; 6] = [
        RunResult::Success,
        RunResult::AbortedBusy,
        RunResult::AbortedShutdown,
        RunResult::Watchdog,
        RunResult::Failed,
        RunResult::SkippedBusy,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RunResult::Success => "success",
            RunResult::AbortedBusy => "aborted_busy",
            RunResult::AbortedShutdown => "aborted_shutdown",
            RunResult::Watchdog => "watchdog",
            RunResult::Failed => "failed",
            RunResult::SkippedBusy => "skipped_busy",
        }
    }
}

/// One run, as `/v1/results` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Start, seconds since the Unix epoch.
    pub started_at: f64,
    /// Wall time in seconds.
    pub duration_s: f64,
    /// How it ended.
    pub result: RunResult,
    /// Points attempted.
    pub points_done: usize,
    /// Points planned.
    pub points_total: usize,
    /// True when the run ended early or failed but kept records: what the calibration
    /// child measured before it was stopped (issue 10).
    #[serde(default)]
    pub partial: bool,
    /// Points that failed, and why; the run went on without them.
    pub failures: Vec<String>,
    /// Why it stopped early, when it did.
    pub reason: Option<String>,
}

/// The node's calibration: the latest record of every point, and the latest run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Node name.
    pub node: String,
    /// End of the last run that finished every point, seconds since the Unix epoch.
    pub last_success_timestamp: Option<f64>,
    /// The latest run.
    pub last_run: Option<Run>,
    /// The latest record of each point, each with its own timestamp.
    pub records: Vec<Record>,
}

impl Calibration {
    /// Adds a run: its records replace older ones of the same point, so an aborted run keeps
    /// what it measured and the rest stays as last measured. Returns how many of the run's
    /// records were lost to a later record of the same run at the same point: none, unless
    /// the child measured a point twice or two points are not told apart (issue 31, item 1,
    /// where 96 records of each run collapsed unseen); the caller logs them.
    pub fn absorb(&mut self, run: Run, records: Vec<Record>) -> usize {
        if run.result == RunResult::Success {
            self.last_success_timestamp = Some(run.started_at + run.duration_s);
        }
        let mut this_run = vec![false; self.records.len()];
        let mut collapsed = 0;
        for r in records {
            match self.records.iter().position(|old| same_point(old, &r)) {
                Some(i) => {
                    collapsed += usize::from(this_run[i]);
                    this_run[i] = true;
                    self.records[i] = r;
                }
                None => {
                    self.records.push(r);
                    this_run.push(true);
                }
            }
        }
        self.last_run = Some(run);
        collapsed
    }
}

/// Whether two records measured the same point, so that the newer replaces the older: every
/// field that tells points apart is compared, the GEMM operand layout, the pair's other end,
/// the ranks per node, the NVLink domains spanned and the attention shape among them (a shape's tn, nn and nt records
/// are three points).
fn same_point(a: &Record, b: &Record) -> bool {
    let (x, y) = (&a.detail, &b.detail);
    a.kind == b.kind
        && a.group.gpus == b.group.gpus
        && a.group.ranks == b.group.ranks
        && a.group.scope == b.group.scope
        && a.bytes == b.bytes
        && a.dtype == b.dtype
        && a.in_place == b.in_place
        && a.gemm == b.gemm
        && x.layout == y.layout
        && x.peer_node == y.peer_node
        && x.ranks_per_node == y.ranks_per_node
        && x.nvlink_domains == y.nvlink_domains
        && x.attention == y.attention
}

#[derive(Serialize, Deserialize)]
struct File1 {
    format_version: u32,
    calibration: Calibration,
}

#[derive(Deserialize)]
struct Version {
    format_version: Option<u32>,
}

/// How far ahead of this host's clock a stored time may be before it is distrusted: NTP
/// steps and clock skew between restarts stay well under it.
const FUTURE_SLACK_S: f64 = 300.0;

/// Checks a loaded calibration against this node and clock (issue 13) and drops what cannot be
/// trusted, returning one reason per distrusted part (empty when all of it holds):
/// - a file written by another node (a copied state directory) is not served at all;
/// - a last success in the future would never look due again: it is forgotten, so the node
///   recalibrates;
/// - records and runs with negative or non-finite times are dropped.
pub fn distrust(calibration: &mut Calibration, node: &str, now: f64) -> Vec<String> {
    let mut reasons = Vec::new();
    if !calibration.node.is_empty() && calibration.node != node {
        reasons.push(format!(
            "written by node `{}`, this is `{node}` (a copied state directory?): not served",
            calibration.node
        ));
        *calibration = Calibration::default();
        return reasons;
    }
    let valid_time = |t: f64| t.is_finite() && t >= 0.0 && t <= now + FUTURE_SLACK_S;
    if let Some(t) = calibration.last_success_timestamp {
        if !valid_time(t) {
            reasons.push(format!(
                "last success at {t} against a clock at {now:.0}: forgotten, so the node recalibrates"
            ));
            calibration.last_success_timestamp = None;
        }
    }
    if let Some(run) = &calibration.last_run {
        if !(valid_time(run.started_at) && run.duration_s.is_finite() && run.duration_s >= 0.0) {
            reasons.push(format!(
                "last run started at {} and took {} s: dropped",
                run.started_at, run.duration_s
            ));
            calibration.last_run = None;
        }
    }
    let before = calibration.records.len();
    calibration.records.retain(|r| {
        r.timing.time_s.is_finite()
            && r.timing.time_s > 0.0
            && r.group.ranks > 0
            && r.timestamp.is_none_or(valid_time)
    });
    let dropped = before - calibration.records.len();
    if dropped > 0 {
        reasons.push(format!(
            "{dropped} of {before} records had a time that is not positive, a timestamp that is \
             negative or in the future, or no ranks: dropped"
        ));
    }
    reasons
}

/// Creates the state directory, removes the temp file of a save that did not finish, and
/// proves the directory writable, so a bad one stops the start. Returns the temp file when
/// one was removed, for the log: on a full disk it held the space the proof needs, and the
/// agent refused to start until someone deleted it (issue 31).
pub fn check_dir(dir: &Path) -> Result<Option<PathBuf>> {
    let fail = |source| Error::StateDir {
        path: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(fail)?;
    let tmp = tmp_path(dir);
    let removed = remove_if_present(&tmp).map_err(fail)?.then_some(tmp);
    let probe = dir.join(".write-test");
    if let Err(e) = fs::write(&probe, b"ok") {
        let _ = fs::remove_file(&probe);
        return Err(fail(e));
    }
    fs::remove_file(&probe).map_err(fail)?;
    Ok(removed)
}

/// The temp file a save writes before renaming it over the state file.
fn tmp_path(dir: &Path) -> PathBuf {
    dir.join(format!(".{FILE_NAME}.tmp"))
}

/// Removes `path`; true when there was something to remove.
fn remove_if_present(path: &Path) -> std::io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// What loading found.
#[derive(Debug)]
pub enum Loaded {
    /// No state file.
    Empty,
    /// A calibration to serve.
    Found(Calibration),
    /// The file was unreadable, corrupt or of another version, and was moved to `moved_to`.
    SetAside {
        /// Why it was not trusted.
        reason: String,
        /// Where it is now.
        moved_to: PathBuf,
    },
}

/// Loads the state file from `dir`, setting aside one that cannot be trusted.
pub fn load(dir: &Path) -> Result<Loaded> {
    let path = dir.join(FILE_NAME);
    let text = match crate::input::read_text(&path, MAX_BYTES) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(Loaded::Empty),
        Err(e) => return set_aside(&path, format!("unreadable: {e}")),
    };
    match parse(&text) {
        Ok(c) => Ok(Loaded::Found(c)),
        Err(reason) => set_aside(&path, reason),
    }
}

/// Parses a state file's text; the error says why it cannot be trusted.
pub fn parse(text: &str) -> std::result::Result<Calibration, String> {
    let version: Version = serde_json::from_str(text).map_err(|e| format!("corrupt: {e}"))?;
    match version.format_version {
        Some(FORMAT_VERSION) => serde_json::from_str::<File1>(text)
            .map(|f| f.calibration)
            .map_err(|e| format!("corrupt: {e}")),
        Some(v) => Err(format!(
            "format version {v}, this agent reads version {FORMAT_VERSION}"
        )),
        None => Err("corrupt: no format_version".into()),
    }
}

fn set_aside(path: &Path, reason: String) -> Result<Loaded> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let moved_to = path.with_extension(format!("json.bad-{stamp}"));
    fs::rename(path, &moved_to).map_err(|source| Error::StateWrite {
        path: moved_to.clone(),
        source,
    })?;
    Ok(Loaded::SetAside { reason, moved_to })
}

/// Writes `calibration` to `dir` atomically: a reader sees the old file or the new one,
/// never half of one, even after a power cut. A write that fails (a full disk) removes its
/// temp file, so it does not keep the space or stop the next start (issue 31).
pub fn save(dir: &Path, calibration: &Calibration) -> Result<()> {
    let path = dir.join(FILE_NAME);
    let tmp = tmp_path(dir);
    let body = encode(calibration)?;
    replace(dir, &tmp, &path, &body).map_err(|source| {
        let _ = fs::remove_file(&tmp);
        Error::StateWrite { path, source }
    })
}

/// The state file's text for `calibration`, as [`save`] writes it and [`parse`] reads it.
pub fn encode(calibration: &Calibration) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&File1 {
        format_version: FORMAT_VERSION,
        calibration: calibration.clone(),
    })
}

/// Writes `body` to `tmp`, then renames it over `path` and syncs `dir`.
fn replace(dir: &Path, tmp: &Path, path: &Path, body: &[u8]) -> std::io::Result<()> {
    // What a crash left at the temp path goes; `create_new` then refuses whatever appears
    // there meanwhile, a symlink among them, rather than write through it.
    remove_if_present(tmp)?;
    let mut file = OpenOptions::new().write(true).create_new(true).open(tmp)?;
    file.write_all(body)?;
    file.sync_all()?;
    drop(file);
    fs::rename(tmp, path)?;
    // The rename is durable only once the directory entry is on disk.
    File::open(dir).and_then(|d| d.sync_all())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(result: RunResult) -> Run {
        Run {
            started_at: 100.0,
            duration_s: 5.0,
            result,
            points_done: 1,
            points_total: 2,
            partial: false,
            failures: vec![],
            reason: None,
        }
    }

    #[test]
    fn each_gemm_layout_is_its_own_point() {
        use record::{Backend, Dtype, Gemm, GemmLayout, Group, Scope, Timing};
        let gemm = |layout, time_s| {
            let group = Group {
                node: Some("n1".into()),
                gpus: vec![0],
                scope: Scope::IntraNode,
                ranks: 1,
            };
            let shape = Gemm {
                m: 8192,
                n: 8192,
                k: 8192,
            };
            let timing = Timing::without_spread(time_s, Some(20), record::Clock::Host);
            let mut r = Record::gemm(Backend::Sim, group, shape, Dtype::Bf16, timing);
            r.detail.layout = Some(layout);
            r
        };
        let layouts = [GemmLayout::Tn, GemmLayout::Nn, GemmLayout::Nt];
        let mut c = Calibration::default();
        let collapsed = c.absorb(
            run(RunResult::Success),
            layouts.iter().map(|&l| gemm(l, 1e-3)).collect(),
        );
        // One shape in three layouts is three points: none overwrites another.
        assert_eq!((c.records.len(), collapsed), (3, 0));
        // A later run's tn replaces the stored tn only, and that is no loss.
        let collapsed = c.absorb(run(RunResult::Success), vec![gemm(GemmLayout::Tn, 2e-3)]);
        assert_eq!((c.records.len(), collapsed), (3, 0));
        let time = |l| {
            let r = c.records.iter().find(|r| r.detail.layout == Some(l));
            r.map(|r| r.timing.time_s)
        };
        assert_eq!(layouts.map(time), [Some(2e-3), Some(1e-3), Some(1e-3)]);
        // One run measuring a point twice keeps the later and counts the one lost.
        let collapsed = c.absorb(
            run(RunResult::Success),
            vec![gemm(GemmLayout::Nn, 3e-3), gemm(GemmLayout::Nn, 4e-3)],
        );
        assert_eq!((c.records.len(), collapsed), (3, 1));
        let nn = c
            .records
            .iter()
            .find(|r| r.detail.layout == Some(GemmLayout::Nn));
        assert_eq!(nn.map(|r| r.timing.time_s), Some(4e-3));
    }

    #[test]
    fn saves_and_loads_the_same_calibration() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Calibration {
            node: "n1".into(),
            ..Calibration::default()
        };
        c.absorb(run(RunResult::Success), vec![]);
        save(dir.path(), &c).unwrap();
        match load(dir.path()).unwrap() {
            Loaded::Found(back) => assert_eq!(back, c),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.last_success_timestamp, Some(105.0));
        assert!(!dir.path().join(format!(".{FILE_NAME}.tmp")).exists());
        // A time serde_json's default float parsing reads back one ulp off (seen in CI): a
        // restart must serve the very same value.
        c.last_success_timestamp = Some(1795954509.7091475);
        save(dir.path(), &c).unwrap();
        match load(dir.path()).unwrap() {
            Loaded::Found(back) => {
                assert_eq!(back.last_success_timestamp, c.last_success_timestamp)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn corrupt_and_future_files_are_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        for (text, why) in [
            ("{\"format_version\": 1, \"calib", "corrupt"),
            (
                "{\"format_version\": 9, \"calibration\": {}}",
                "format version 9",
            ),
        ] {
            std::fs::write(dir.path().join(FILE_NAME), text).unwrap();
            match load(dir.path()).unwrap() {
                Loaded::SetAside { reason, moved_to } => {
                    assert!(reason.starts_with(why), "{reason}");
                    assert_eq!(std::fs::read_to_string(moved_to).unwrap(), text);
                }
                other => panic!("{other:?}"),
            }
            assert!(matches!(load(dir.path()).unwrap(), Loaded::Empty));
        }
    }

    /// Issue 31, item 4: a state file linked to `/dev/zero` was read until the machine ran
    /// out of memory. It is set aside, and so is a regular file past the limit, by its
    /// length, with the file, its size and the limit named.
    #[test]
    fn r31_an_endless_or_oversized_state_file_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        match load(dir.path()).unwrap() {
            Loaded::SetAside { reason, .. } => assert!(reason.contains(FILE_NAME), "{reason}"),
            other => panic!("{other:?}"),
        }
        File::create(&path).unwrap().set_len(MAX_BYTES + 1).unwrap();
        match load(dir.path()).unwrap() {
            Loaded::SetAside { reason, .. } => assert_eq!(
                reason,
                format!(
                    "unreadable: {}: 67108865 bytes, more than 67108864 bytes (64 MiB), the \
                     most this reader takes",
                    path.display()
                )
            ),
            other => panic!("{other:?}"),
        }
    }

    /// Issue 31, item 7: a FIFO at the state file held the agent in `open()` for ever, deaf
    /// to SIGTERM. It is set aside at once.
    #[test]
    fn r31_a_fifo_state_file_is_set_aside_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        crate::input::tests::mkfifo(&dir.path().join(FILE_NAME));
        let state_dir = dir.path().to_path_buf();
        match crate::input::tests::within_5s(move || load(&state_dir)).unwrap() {
            Loaded::SetAside { reason, moved_to } => {
                assert!(
                    reason.ends_with(
                        "a FIFO, not a regular file; the agent reads regular files only"
                    ),
                    "{reason}"
                );
                assert!(moved_to.exists());
            }
            other => panic!("{other:?}"),
        }
    }

    /// Issue 31, item 6: a save that failed (a full disk) left its temp file behind, and the
    /// agent then refused to start. A failed save removes it, and the start removes one a
    /// crash left.
    #[test]
    fn r31_a_failed_save_leaves_no_temp_file_and_the_start_removes_one() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = tmp_path(dir.path());
        // The rename fails: the state file's name is taken by a directory that is not empty.
        fs::create_dir_all(dir.path().join(FILE_NAME).join("in-the-way")).unwrap();
        let err = save(dir.path(), &Calibration::default()).unwrap_err();
        assert!(err.to_string().starts_with("writing state file "), "{err}");
        assert!(!tmp.exists(), "a failed save left {}", tmp.display());
        fs::remove_dir_all(dir.path().join(FILE_NAME)).unwrap();

        fs::write(&tmp, "half a calibration").unwrap();
        assert_eq!(check_dir(dir.path()).unwrap(), Some(tmp.clone()));
        assert!(!tmp.exists());
        assert_eq!(check_dir(dir.path()).unwrap(), None);
        fs::write(&tmp, "half a calibration").unwrap();
        save(dir.path(), &Calibration::default()).unwrap();
        assert!(!tmp.exists());
        assert!(matches!(load(dir.path()).unwrap(), Loaded::Found(_)));
    }

    #[test]
    fn copied_future_and_negative_state_is_distrusted() {
        let now = 1.7e9;
        let mut copied = Calibration {
            node: "other".into(),
            last_success_timestamp: Some(now - 10.0),
            last_run: Some(run(RunResult::Success)),
            records: vec![],
        };
        let why = distrust(&mut copied, "this", now);
        assert!(
            why[0].contains("written by node `other`, this is `this`"),
            "{why:?}"
        );
        assert_eq!(copied, Calibration::default());

        let mut future = Calibration {
            node: "this".into(),
            last_success_timestamp: Some(now + 86_400.0),
            ..Calibration::default()
        };
        let why = distrust(&mut future, "this", now);
        assert!(
            why[0].contains("forgotten, so the node recalibrates"),
            "{why:?}"
        );
        assert_eq!(future.last_success_timestamp, None);

        let mut negative = Calibration {
            node: "this".into(),
            last_success_timestamp: Some(now - 60.0),
            last_run: Some(Run {
                started_at: -1.0,
                ..run(RunResult::Success)
            }),
            records: vec![],
        };
        let why = distrust(&mut negative, "this", now);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(negative.last_run.is_none());
        assert_eq!(negative.last_success_timestamp, Some(now - 60.0));

        let mut sound = Calibration {
            node: "this".into(),
            last_success_timestamp: Some(now - 60.0),
            last_run: Some(run(RunResult::Success)),
            records: vec![],
        };
        let kept = sound.clone();
        assert!(distrust(&mut sound, "this", now).is_empty());
        assert_eq!(sound, kept);
    }

    #[test]
    fn aborted_runs_keep_the_last_success_time() {
        let mut c = Calibration::default();
        c.absorb(run(RunResult::Success), vec![]);
        c.absorb(run(RunResult::AbortedBusy), vec![]);
        assert_eq!(c.last_success_timestamp, Some(105.0));
        assert_eq!(c.last_run.unwrap().result, RunResult::AbortedBusy);
    }
}
