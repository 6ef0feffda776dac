//! Live sampling every `sample_interval`: the GPUs' counters (off the async threads, bounded
//! by the interval), the agent's own process from /proc, and the fabric results
//! file when it changed. While discovery has not found GPUs it is retried here, and a change
//! is logged once.

use crate::cache::{Cache, Discovery, DownReason, Process};
use crate::fabric::{Change, Watcher};
use crate::idle::now_s;
use crate::input;
use crate::node::Node;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Discovery is retried this often while it finds no GPUs (a driver may be installed later).
const REDISCOVER: Duration = Duration::from_secs(60);

/// Linux reports process CPU time in clock ticks of USER_HZ, 100 on every architecture
/// Linux supports (`sysconf(_SC_CLK_TCK)`).
const TICKS_PER_S: f64 = 100.0;

/// Runs discovery once and stores the outcome; logs only when it changed.
pub async fn discover(node: &Arc<dyn Node>, cache: &Cache) {
    let n = node.clone();
    let found = tokio::task::spawn_blocking(move || n.topology()).await;
    let discovery = match found {
        Ok(Ok(t)) if t.gpus.is_empty() => Discovery::Down {
            reason: DownReason::NoGpus,
            message: "discovery found no GPU".into(),
        },
        Ok(Ok(t)) => Discovery::Found(Arc::new(t)),
        Ok(Err(e @ microbench::Error::NoDriver(_))) => Discovery::Down {
            reason: DownReason::NoDriver,
            message: e.to_string(),
        },
        Ok(Err(e)) => Discovery::Down {
            reason: DownReason::DiscoveryFailed,
            message: e.to_string(),
        },
        Err(e) => Discovery::Down {
            reason: DownReason::DiscoveryFailed,
            message: e.to_string(),
        },
    };
    let before = cache.snapshot().discovery;
    match (&before, &discovery) {
        (Discovery::Down { message: old, .. }, Discovery::Down { message, .. }) if old == message => {}
        (_, Discovery::Down { message, .. }) => tracing::warn!(
            "no GPUs to calibrate: {message}; serving host metrics and meshfit_up 0, retrying every {} s",
            REDISCOVER.as_secs()
        ),
        (_, Discovery::Found(t)) => {
            tracing::info!(
                "discovered {} GPU(s) ({}), {} NIC(s)",
                t.gpus.len(),
                t.gpus.first().map(|g| g.name.as_str()).unwrap_or_default(),
                t.nics.len()
            );
            for note in &t.notes {
                tracing::warn!("discovery: {note}");
            }
        }
        (_, Discovery::Pending) => {}
    }
    cache.update(|s| s.discovery = discovery);
}

/// Samples until `shutdown` turns true; `fabric` watches the fabric results file.
pub async fn run(
    node: Arc<dyn Node>,
    cache: Arc<Cache>,
    every: Duration,
    mut fabric: Watcher,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_discovery = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        fabric = pass(&node, &cache, every, fabric, &mut last_discovery).await;
        // A pass that hangs shows as this time standing still while /metrics answers
        // (issue 31: a FIFO at the fabric results file hung it, and nothing told).
        cache.update(|s| s.sampler_last_pass = Some(now_s()));
    }
}

/// One pass: the agent's process figures, the fabric results file, then the GPUs' counters,
/// or discovery again while it has found none.
async fn pass(
    node: &Arc<dyn Node>,
    cache: &Cache,
    every: Duration,
    fabric: Watcher,
    last_discovery: &mut tokio::time::Instant,
) -> Watcher {
    let process = tokio::task::spawn_blocking(read_process)
        .await
        .unwrap_or_default();
    cache.update(|s| s.process = process);
    let fabric = poll_fabric(fabric, cache).await;
    if !matches!(cache.snapshot().discovery, Discovery::Found(_)) {
        if last_discovery.elapsed() >= REDISCOVER {
            *last_discovery = tokio::time::Instant::now();
            discover(node, cache).await;
        }
        return fabric;
    }
    let n = node.clone();
    let read = tokio::time::timeout(every, tokio::task::spawn_blocking(move || n.counters()));
    match read.await {
        Ok(Ok(Ok(counters))) => cache.update(|s| {
            s.counters = Arc::new(counters);
            s.counters_at = Some(now_s());
        }),
        Ok(Ok(Err(e))) => tracing::debug!("counters: {e}"),
        Ok(Err(e)) => tracing::debug!("counters: {e}"),
        // Still stuck in NVML: the next tick tries again; the cache keeps the last reading.
        Err(_) => tracing::debug!("counters took longer than {every:?}"),
    }
    fabric
}

/// Re-reads the fabric results file when it changed (off the async threads: it may be tens
/// of megabytes) and logs what happened; a refused file keeps the results read before.
async fn poll_fabric(watcher: Watcher, cache: &Cache) -> Watcher {
    let node = cache.snapshot().node_name;
    let mut moved = watcher.clone();
    let polled = tokio::task::spawn_blocking(move || {
        let change = moved.poll(&node);
        (moved, change)
    })
    .await;
    let (watcher, change) = match polled {
        Ok(polled) => polled,
        // Only a runtime shutting down cancels the task: keep the watcher as it was.
        Err(e) => {
            tracing::debug!("fabric results poll: {e}");
            return watcher;
        }
    };
    match change {
        None => {}
        Some(Change::Read { fabric, notes }) => {
            tracing::info!(
                "read fabric results: {} inter-node collective records, {} pairs, run at {}",
                fabric.collectives.len(),
                fabric.pairs.len(),
                fabric
                    .last_run_timestamp
                    .map_or_else(|| "an unknown time".into(), |t| format!("{t:.0}"))
            );
            for note in notes {
                tracing::warn!("fabric results: {note}");
            }
            cache.update(|s| s.fabric = Arc::new(fabric));
        }
        Some(Change::Removed) => {
            tracing::info!("fabric results file removed; no fabric metrics until the next run");
            cache.update(|s| s.fabric = Arc::default());
        }
        Some(Change::Refused(why)) => {
            tracing::warn!("fabric results refused: {why}; serving the results read before");
        }
    }
    watcher
}

/// Reads the agent's figures from /proc as client_golang's process collector does (procfs);
/// a file that cannot be read leaves its figures at 0. Hand-read: five numbers do not justify
/// sysinfo's build on two-core machines.
fn read_process() -> Process {
    let read = |p: &str| input::read_text(Path::new(p), input::MAX_PROC_BYTES).unwrap_or_default();
    let stat = read("/proc/self/stat");
    let boot = parse_boot_time(&read("/proc/stat"));
    Process {
        resident_bytes: parse_rss(&read("/proc/self/status")),
        cpu_seconds: (stat_field(&stat, UTIME) + stat_field(&stat, STIME)) / TICKS_PER_S,
        start_time_seconds: boot + stat_field(&stat, STARTTIME) / TICKS_PER_S,
        open_fds: std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64),
        max_fds: parse_max_open_files(&read("/proc/self/limits")),
    }
}

/// VmRSS from /proc/self/status, in bytes.
fn parse_rss(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Positions in /proc/self/stat after the command name's closing parenthesis (the name may
/// hold spaces): stat(5) numbers state 3, utime 14, stime 15 and starttime 22.
const UTIME: usize = 11;
const STIME: usize = 12;
const STARTTIME: usize = 19;

/// One numeric field of /proc/self/stat, counted as [`UTIME`] is; 0 when absent.
fn stat_field(text: &str, i: usize) -> f64 {
    text.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(i)?.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// `btime` of /proc/stat: boot time, seconds since the Unix epoch.
fn parse_boot_time(text: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The soft "Max open files" limit of /proc/self/limits; 0 when unlimited or absent.
fn parse_max_open_files(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31, item 7: with a FIFO at the fabric results file the sampler hung in its
    /// first pass. Passes go on, and `sampler_last_pass` shows each.
    #[tokio::test]
    async fn r31_passes_go_on_with_a_fifo_results_file_and_are_timed() {
        let dir = tempfile::tempdir().unwrap();
        crate::input::tests::mkfifo(&dir.path().join(crate::fabric::FILE_NAME));
        let mut config = crate::Config::from_yaml("backend: sim\nprofile: dgx-h100\n").unwrap();
        config.state_dir = dir.path().to_path_buf();
        let node: Arc<dyn Node> = crate::node::build(&config).unwrap().into();
        let cache = Arc::new(Cache::new(
            "n1".into(),
            node.source(),
            crate::state::Calibration::default(),
        ));
        let (stop, stopped) = watch::channel(false);
        let sampler = tokio::spawn(run(
            node,
            cache.clone(),
            Duration::from_millis(100),
            Watcher::new(dir.path()),
            stopped,
        ));
        let first = async {
            loop {
                if let Some(at) = cache.snapshot().sampler_last_pass {
                    return at;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let first = tokio::time::timeout(Duration::from_secs(5), first)
            .await
            .expect("no sampler pass completed in 5 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let later = cache.snapshot().sampler_last_pass.unwrap();
        assert!(later > first, "last pass at {later}, first at {first}");
        let text = crate::metrics::text(&cache.snapshot());
        let gauge = "meshfit_sampler_last_pass_timestamp_seconds{hostname=\"n1\",backend=\"sim\"} ";
        assert!(text.contains(gauge), "{text}");
        stop.send(true).unwrap();
        sampler.await.unwrap();
    }

    #[test]
    fn proc_files_parse() {
        assert_eq!(
            parse_rss("Name:\tagent\nVmRSS:\t    8192 kB\n"),
            8192 * 1024
        );
        let stat = "4242 (my agent) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 3 0 \
                    12345 1000000 200";
        assert_eq!(
            (stat_field(stat, UTIME) + stat_field(stat, STIME)) / TICKS_PER_S,
            3.0
        );
        assert_eq!(stat_field(stat, STARTTIME), 12345.0);
        assert_eq!(parse_boot_time("cpu 1 2 3\nbtime 1700000000\n"), 1.7e9);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1048576              1048576              files\n";
        assert_eq!(parse_max_open_files(limits), 1_048_576);
        assert_eq!(
            parse_max_open_files("Max open files unlimited unlimited files"),
            0
        );
    }
}
