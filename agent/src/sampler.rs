//! Live sampling every `sample_interval`: the GPUs' counters (off the async threads, bounded
//! by the interval), the agent's own process from /proc, and the fabric results
//! file when it changed. While discovery has not found GPUs it is retried here, and a change
//! is logged once.

use crate::cache::{Cache, Discovery, DownReason, Process};
use crate::fabric::{Change, Watcher};
use crate::idle::now_s;
use crate::node::Node;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Discovery is retried this often while it finds no GPUs (a driver may be installed later).
const REDISCOVER: Duration = Duration::from_secs(60);

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

/// Reads the agent's figures from /proc with procfs, as client_golang's process collector
/// does; a figure that cannot be read stays 0.
fn read_process() -> Process {
    use procfs::process::LimitValue;
    let me = procfs::process::Process::myself().ok();
    let stat = me.as_ref().and_then(|p| p.stat().ok());
    let ticks = procfs::ticks_per_second() as f64;
    let boot = procfs::boot_time_secs().map_or(0.0, |b| b as f64);
    Process {
        resident_bytes: me
            .as_ref()
            .and_then(|p| p.status().ok()?.vmrss)
            .map_or(0, |kib| kib * 1024),
        cpu_seconds: stat
            .as_ref()
            .map_or(0.0, |s| (s.utime + s.stime) as f64 / ticks),
        start_time_seconds: stat
            .as_ref()
            .map_or(0.0, |s| boot + s.starttime as f64 / ticks),
        open_fds: me
            .as_ref()
            .and_then(|p| p.fd_count().ok())
            .map_or(0, |n| n as u64),
        max_fds: me.as_ref().and_then(|p| p.limits().ok()).map_or(0, |l| {
            match l.max_open_files.soft_limit {
                LimitValue::Value(n) => n,
                LimitValue::Unlimited => 0,
            }
        }),
    }
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
            Watcher::new(dir.path(), 4),
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
    fn the_agents_own_process_is_read_from_proc() {
        let p = read_process();
        assert!(p.resident_bytes > 1 << 20, "{}", p.resident_bytes);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started since boot, and not after now (one clock tick and the boot time's rounding
        // to a second either way).
        assert!(
            p.start_time_seconds > 1.7e9 && p.start_time_seconds <= now + 2.0,
            "{p:?}"
        );
        assert!(p.cpu_seconds >= 0.0 && p.cpu_seconds < 3600.0, "{p:?}");
        // stdin, stdout and stderr at least; and the soft limit getrlimit gives.
        assert!(p.open_fds >= 3, "{p:?}");
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit through a valid pointer.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        let expected = if limit.rlim_cur == libc::RLIM_INFINITY {
            0
        } else {
            limit.rlim_cur
        };
        assert_eq!(p.max_fds, expected);
    }
}
