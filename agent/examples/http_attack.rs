//! The two attacks of issue 13 against a real agent on loopback, with the figures the issue
//! asks for: the agent's RSS before, during and after each attack, and `/metrics` latency
//! (p50, p99, max) on a scraper's keep-alive connection while under attack.
//!
//! 1. Idle connections: as many as the file-descriptor limit allows, up to 20,000, opened and
//!    held without sending a byte.
//! 2. Non-reading clients: 1,500 connections that each ask for `/v1/results` and never read.
//!
//! It starts the agent itself (sim backend, a saved calibration whose `/v1/results` body is
//! about `--results-mib` MiB, the agent's default limits), stops it at the end, and talks to
//! 127.0.0.1 only. Run it through scripts/http-attack.sh.
//!
//! Usage: http_attack AGENT_BIN [--idle N] [--readers N] [--hold-s S] [--results-mib M]

use agent::state::{self, Calibration, Run, RunResult};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time between two scrapes of the watching scraper.
const SCRAPE_EVERY: Duration = Duration::from_millis(50);

struct Options {
    agent_bin: String,
    idle: usize,
    readers: usize,
    hold: Duration,
    results_mib: usize,
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1).collect()).and_then(|o| attack(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http_attack: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: Vec<String>) -> Result<Options, String> {
    let usage = "usage: http_attack AGENT_BIN [--idle N] [--readers N] [--hold-s S] \
                 [--results-mib M]";
    let mut args = args.into_iter();
    let agent_bin = args.next().ok_or(usage)?;
    let mut o = Options {
        agent_bin,
        idle: 20_000,
        readers: 1_500,
        hold: Duration::from_secs(40),
        results_mib: 1,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag}: a value is missing"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag} {value}: expected a whole number"))?;
        match flag.as_str() {
            "--idle" => o.idle = n as usize,
            "--readers" => o.readers = n as usize,
            "--hold-s" => o.hold = Duration::from_secs(n),
            "--results-mib" => o.results_mib = n as usize,
            _ => return Err(format!("unknown flag {flag}; {usage}")),
        }
    }
    Ok(o)
}

fn attack(o: &Options) -> Result<(), String> {
    let fd_limit = raise_fd_limit()?;
    let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    state::save(dir.path(), &calibration(o.results_mib << 20))
        .map_err(|e| format!("writing the state file: {e}"))?;
    let mut agent = Agent::start(&o.agent_bin, dir.path())?;
    let result = run_attacks(o, &agent, fd_limit);
    agent.stop();
    result
}

fn run_attacks(o: &Options, agent: &Agent, fd_limit: u64) -> Result<(), String> {
    let mut scraper = Scraper::connect(agent.addr)?;
    let results_len = get_once(agent.addr, "/v1/results")?;
    println!(
        "agent pid {} on {}; /v1/results is {:.2} MiB; default limits \
         (max_connections 512, header 10s, idle 120s, write 30s)",
        agent.pid(),
        agent.addr,
        results_len as f64 / f64::from(1 << 20)
    );
    let ((), quiet) = scraper.during(|| std::thread::sleep(Duration::from_secs(3)))?;
    println!(
        "baseline: RSS {}; /metrics {}",
        mib(agent.rss()?),
        quiet.summary()
    );

    // The attacker's own descriptors: keep a margin for the scraper and the process.
    let idle = o.idle.min(fd_limit.saturating_sub(64) as usize);
    if idle < o.idle {
        println!(
            "ulimit -n is {fd_limit}: {idle} idle connections, not {}",
            o.idle
        );
    }
    let before = agent.rss()?;
    let (report, under) = scraper.during(|| {
        let mut seen = Seen::default();
        let started = Instant::now();
        let mut held = Vec::with_capacity(idle);
        let mut failed = 0;
        for i in 0..idle {
            match TcpStream::connect(agent.addr) {
                Ok(s) => held.push(s),
                Err(_) => failed += 1,
            }
            if i % 500 == 0 {
                seen.sample(agent);
            }
        }
        let opened = started.elapsed();
        let fresh = fresh_scrape(agent.addr);
        seen.hold(agent, o.hold.min(Duration::from_secs(15)));
        format!(
            "{} idle connections opened in {:.1} s ({failed} connects failed), held 15 s \
             more; RSS max {}, agent fds max {}; a new connection's scrape at the cap: {fresh}",
            held.len(),
            opened.as_secs_f64(),
            mib(seen.rss),
            seen.fds
        )
    })?;
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "attack 1: {report}\nattack 1: RSS before {}, after {} (fds {}); /metrics on the \
         keep-alive connection throughout: {}",
        mib(before),
        mib(agent.rss()?),
        agent.fds()?,
        under.summary()
    );

    let before = agent.rss()?;
    let (report, under) = scraper.during(|| {
        let mut seen = Seen::default();
        let mut readers = Vec::with_capacity(o.readers);
        for _ in 0..o.readers {
            let Ok(mut s) = TcpStream::connect(agent.addr) else {
                continue;
            };
            if s.write_all(b"GET /v1/results HTTP/1.1\r\nHost: agent\r\n\r\n")
                .is_ok()
            {
                readers.push(s);
            }
        }
        seen.hold(agent, o.hold);
        format!(
            "{} clients asked for /v1/results and did not read for {} s; RSS max {}, agent \
             fds max {}, at the end {}",
            readers.len(),
            o.hold.as_secs(),
            mib(seen.rss),
            seen.fds,
            agent.fds().unwrap_or(0)
        )
    })?;
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "attack 2: {report}\nattack 2: RSS before {}, after {} (fds {}); /metrics on the \
         keep-alive connection throughout: {}",
        mib(before),
        mib(agent.rss()?),
        agent.fds()?,
        under.summary()
    );
    Ok(())
}

/// A calibration of a minute ago whose JSON is about `bytes` long (failure notes pad it: the
/// size, not the content, is what the attack needs).
fn calibration(bytes: usize) -> Calibration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Calibration {
        node: "n1".into(),
        last_success_timestamp: Some(now - 60.0),
        last_run: Some(Run {
            started_at: now - 70.0,
            duration_s: 10.0,
            result: RunResult::Success,
            points_done: 1,
            points_total: 1,
            partial: false,
            failures: vec!["x".repeat(1000); bytes / 1000],
            reason: None,
        }),
        records: Vec::new(),
    }
}

/// Raises the soft file-descriptor limit to the hard one and returns it.
fn raise_fd_limit() -> Result<u64, String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!("getrlimit: {}", std::io::Error::last_os_error()));
    }
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: a valid pointer to an rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(format!("setrlimit: {}", std::io::Error::last_os_error()));
    }
    Ok(limit.rlim_cur)
}

struct Agent {
    child: Child,
    addr: SocketAddr,
}

impl Agent {
    fn start(bin: &str, state_dir: &Path) -> Result<Agent, String> {
        let log = state_dir.join("agent.log");
        let err = std::fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
        let child = Command::new(bin)
            .args([
                "--backend",
                "sim",
                "--profile",
                "dgx-h100",
                "--node-name",
                "n1",
            ])
            .args(["--listen", "127.0.0.1:0", "--microbench-bin", "/bin/true"])
            .arg("--state-dir")
            .arg(state_dir)
            .env("MESHFIT_LOG", "warn,agent=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {bin}: {e}"))?;
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(rest) = text.split("listening on http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let addr = addr
                    .parse()
                    .map_err(|_| format!("address `{addr}` in the agent's log"))?;
                return Ok(Agent { child, addr });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "the agent did not log its address in 10 s:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        ))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory in bytes, from /proc/<pid>/status.
    fn rss(&self) -> Result<u64, String> {
        let path = format!("/proc/{}/status", self.pid());
        let status = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .ok_or_else(|| format!("no VmRSS in {path}"))
    }

    fn fds(&self) -> Result<usize, String> {
        let path = format!("/proc/{}/fd", self.pid());
        std::fs::read_dir(&path)
            .map(Iterator::count)
            .map_err(|e| format!("{path}: {e}"))
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The largest RSS and descriptor count seen.
#[derive(Default)]
struct Seen {
    rss: u64,
    fds: usize,
}

impl Seen {
    fn sample(&mut self, agent: &Agent) {
        self.rss = self.rss.max(agent.rss().unwrap_or(0));
        self.fds = self.fds.max(agent.fds().unwrap_or(0));
    }

    /// Samples every 100 ms for `span`.
    fn hold(&mut self, agent: &Agent, span: Duration) {
        let end = Instant::now() + span;
        while Instant::now() < end {
            self.sample(agent);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A scraper with its keep-alive connection, as Prometheus holds one.
struct Scraper {
    addr: SocketAddr,
    stream: BufReader<TcpStream>,
}

/// Scrape latencies and failures over a while.
struct Watched {
    latencies: Vec<Duration>,
    errors: usize,
}

impl Watched {
    fn summary(&self) -> String {
        let mut l = self.latencies.clone();
        l.sort();
        let at = |q: f64| {
            l.get(((l.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .map_or("-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
        };
        format!(
            "{} scrapes, {} failed, p50 {}, p99 {}, max {}",
            l.len(),
            self.errors,
            at(0.5),
            at(0.99),
            at(1.0)
        )
    }
}

impl Scraper {
    fn connect(addr: SocketAddr) -> Result<Scraper, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connecting: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        Ok(Scraper {
            addr,
            stream: BufReader::new(stream),
        })
    }

    /// Runs `attack` while scraping every [`SCRAPE_EVERY`] on another thread. A failed
    /// scrape is counted and the scraper reconnects, as Prometheus would.
    fn during<T>(&mut self, attack: impl FnOnce() -> T) -> Result<(T, Watched), String> {
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let watching = scope.spawn(|| {
                let mut w = Watched {
                    latencies: Vec::new(),
                    errors: 0,
                };
                while !done.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    match request(&mut self.stream, "/metrics") {
                        Ok(_) => w.latencies.push(start.elapsed()),
                        Err(_) => {
                            w.errors += 1;
                            if let Ok(fresh) = Scraper::connect(self.addr) {
                                *self = fresh;
                            }
                        }
                    }
                    std::thread::sleep(SCRAPE_EVERY.saturating_sub(start.elapsed()));
                }
                w
            });
            let out = attack();
            done.store(true, Ordering::Relaxed);
            let watched = watching
                .join()
                .map_err(|_| "the scraper thread panicked".to_string())?;
            Ok((out, watched))
        })
    }
}

/// GET `path` on a new connection; the body's length.
fn get_once(addr: SocketAddr, path: &str) -> Result<usize, String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("connecting: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    request(&mut BufReader::new(stream), path).map_err(|e| format!("GET {path}: {e}"))
}

/// What a scrape on a new connection got.
fn fresh_scrape(addr: SocketAddr) -> String {
    match get_once(addr, "/metrics") {
        Ok(n) => format!("answered ({n} bytes)"),
        Err(e) => format!("refused ({e})"),
    }
}

/// One keep-alive GET; the body's length. Any failure is an error.
fn request(stream: &mut BufReader<TcpStream>, path: &str) -> std::io::Result<usize> {
    // One write: a request split over several segments waits on Nagle and delayed ACKs
    // (40 ms each on Linux), which would be measured as the agent's latency.
    let head = format!("GET {path} HTTP/1.1\r\nHost: agent\r\n\r\n");
    stream.get_mut().write_all(head.as_bytes())?;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Err(bad("closed without a reply"));
    }
    if !line.starts_with("HTTP/1.1 200") {
        return Err(bad(&format!("status line {:?}", line.trim_end())));
    }
    let mut length = None;
    loop {
        line.clear();
        if stream.read_line(&mut line)? == 0 {
            return Err(bad("connection closed in the headers"));
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok();
            }
        }
    }
    let length = length.ok_or_else(|| bad("no content-length"))?;
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok(length)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}
