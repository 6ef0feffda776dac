//! Helpers for meshfit's end-to-end tests: build and start the real `agent` binary on
//! loopback with a temporary state directory, talk HTTP to it, run promtool and a real
//! Prometheus.
//!
//! HTTP goes through a few lines over `std::net::TcpStream` (HTTP/1.0, so no chunked
//! bodies) rather than reqwest with rustls: the tests only GET and POST on loopback, and the
//! TLS stack would add minutes to a two-core build for nothing it tests.

pub mod stub;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A workspace binary, built on first use with the same cargo, profile and target dir.
///
/// A test of this package cannot name another package's binary, so it asks cargo; a build
/// that is up to date returns at once, and a stale binary is never tested.
pub fn workspace_bin(package: &str, bin: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(name, _)| name == bin) {
        return path.clone();
    }
    // target/<profile>/deps/<this test> -> target/<profile>/<bin>
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable under target/<profile>/deps");
    let mut build = vec!["build", "--quiet", "-p", package, "--bin", bin];
    if profile_dir.ends_with("release") {
        build.push("--release");
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(&build)
        .status()
        .unwrap_or_else(|e| panic!("running cargo build -p {package}: {e}"));
    assert!(status.success(), "cargo build -p {package} failed");
    let path = profile_dir.join(bin);
    assert!(path.exists(), "{} missing after the build", path.display());
    built.push((bin.to_string(), path.clone()));
    path
}

/// The `agent` binary, with the `microbench` binary it calibrates with beside it.
pub fn agent_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        workspace_bin("microbench", "microbench");
        workspace_bin("agent", "agent")
    })
}

/// Runs the workspace binary `bin` of `package` with `args` and returns its standard output;
/// panics with its stderr when it fails.
pub fn output_of(package: &str, bin: &str, args: &[&str]) -> String {
    let out = Command::new(workspace_bin(package, bin))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    assert!(
        out.status.success(),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Runs `tuner` with `args` and parses its JSON output (`--format json`, or a JSON-writing
/// command); panics with its stderr when it fails.
pub fn tuner_json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&output_of("tuner", "tuner", args)).unwrap_or(serde_json::Value::Null)
}

/// A ranked mesh of `tuner recommend --format json` as "tp8 pp1 dp8 cp1 mb1 v1 z1".
pub fn layout_label(m: &serde_json::Value) -> String {
    format!(
        "tp{} pp{} dp{} cp{} mb{} v{} z{}",
        m["tp"],
        m["pp"],
        m["dp"],
        m["cp"],
        m["microbatch_size"],
        m["virtual_stages"],
        m["zero_stage"]
    )
}

/// Flags for a sim agent of `profile` named `node`, keeping state in `state`, with no start
/// jitter and a 1 s sampler, followed by `extra`.
pub fn sim_args<'a>(
    profile: &'a str,
    state: &'a Path,
    node: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "--backend",
        "sim",
        "--profile",
        profile,
        "--state-dir",
        state.to_str().expect("UTF-8 state path"),
        "--node-name",
        node,
        "--jitter",
        "0s",
        "--sample-interval",
        "1s",
    ];
    args.extend_from_slice(extra);
    args
}

/// Waits up to 60 s for the agent's first successful calibration and returns its timestamp.
pub fn wait_calibrated(agent: &Agent) -> f64 {
    let mut ts = None;
    let ok = wait_for(Duration::from_secs(60), || {
        ts = agent.metric("meshfit_calibration_last_success_timestamp_seconds{");
        ts.is_some()
    });
    assert!(ok, "no calibration:\n{}", agent.log_text());
    ts.unwrap_or_default()
}

/// Waits for `check` to hold, polling every 50 ms up to `limit`.
pub fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

/// A running agent; killed when dropped.
pub struct Agent {
    child: Child,
    /// Where it serves.
    pub addr: SocketAddr,
    /// Its stderr (the log), as a file.
    pub log: PathBuf,
}

impl Agent {
    /// Starts `agent` with `args` plus `--listen 127.0.0.1:0`, logging to `log`, and waits
    /// for the line that names the bound address.
    pub fn start(args: &[&str], env: &[(&str, &str)], log: &Path) -> Agent {
        let err = std::fs::File::create(log).expect("log file");
        let mut cmd = Command::new(agent_bin());
        cmd.args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        // Settings come from flags only, unless a test sets a variable itself.
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("MESHFIT_")) {
            cmd.env_remove(k);
        }
        cmd.envs(env.iter().copied());
        let child = cmd.spawn().expect("starting agent");
        let mut agent = Agent {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log: log.to_path_buf(),
        };
        let found = wait_for(Duration::from_secs(30), || {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            match text.split("listening on http://").nth(1) {
                Some(rest) => {
                    // Ends at a space (text log) or the closing quote (JSON log).
                    let addr = rest
                        .split(|c: char| c.is_whitespace() || c == '"')
                        .next()
                        .unwrap_or_default();
                    agent.addr = addr.parse().expect("bound address in the log");
                    true
                }
                None => false,
            }
        });
        assert!(
            found,
            "agent did not report its address:\n{}",
            agent.log_text()
        );
        agent
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the exit, up to `limit`; returns the status and the time
    /// it took.
    pub fn terminate(&mut self, limit: Duration) -> (Option<ExitStatus>, Duration) {
        let start = Instant::now();
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let mut status = None;
        wait_for(limit, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        (status, start.elapsed())
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// GET `path`.
    pub fn get(&self, path: &str) -> Response {
        request(self.addr, "GET", path, &[])
    }

    /// The `/metrics` text.
    pub fn metrics(&self) -> String {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    /// The value of the first series whose line starts with `prefix`.
    pub fn metric(&self, prefix: &str) -> Option<f64> {
        value(&self.metrics(), prefix)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the first series in `text` whose line starts with `prefix`.
pub fn value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header lines, lower-cased names.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: String,
}

impl Response {
    /// The first header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.0 request on loopback, with a 10 s limit each way.
pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line `{status_line}`"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut body = String::new();
    reader.read_to_string(&mut body).expect("body");
    Response {
        status,
        headers,
        body,
    }
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// True when `tool` runs; otherwise says why its tests are skipped. scripts/test.sh
/// installs Debian's `prometheus` (prometheus and promtool), so CI never skips.
pub fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: `{tool}` is not installed; run scripts/test.sh, which installs Debian's prometheus package");
    }
    ok
}

/// `promtool check metrics` on `text`: its findings, one per line.
pub fn promtool_findings(text: &str) -> Vec<String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feeding promtool");
    let out = child.wait_with_output().expect("promtool output");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// A Prometheus server on loopback with its own storage, scraping `targets` every second;
/// killed when dropped.
pub struct Prometheus {
    child: Child,
    /// Where its API is.
    pub addr: SocketAddr,
    /// Its log.
    pub log: PathBuf,
}

impl Prometheus {
    /// Starts it in `dir` and waits until it is ready (up to 60 s).
    pub fn start(dir: &Path, targets: &[SocketAddr]) -> Prometheus {
        Prometheus::start_with(dir, targets, None, &[])
    }

    /// [`Prometheus::start`] with a rule file (every group as its own interval says) and
    /// more flags.
    pub fn start_with(
        dir: &Path,
        targets: &[SocketAddr],
        rules: Option<&Path>,
        flags: &[&str],
    ) -> Prometheus {
        let config = dir.join("prometheus.yml");
        let rule_files = rules
            .map(|r| format!("rule_files: ['{}']\n", r.display()))
            .unwrap_or_default();
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n{rule_files}scrape_configs:\n  - job_name: meshfit\n    static_configs:\n      - targets: [{list}]\n"
            ),
        )
        .expect("prometheus config");
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("starting prometheus");
        let mut p = Prometheus { child, addr, log };
        let ready = wait_for(Duration::from_secs(60), || {
            TcpStream::connect(addr).is_ok() && request(addr, "GET", "/-/ready", &[]).status == 200
        });
        assert!(
            ready && p.child.try_wait().ok().flatten().is_none(),
            "prometheus not ready:\n{}",
            std::fs::read_to_string(&p.log).unwrap_or_default()
        );
        p
    }

    /// The result vector of an instant query.
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/v1/query?query={}", encode(promql));
        let r = request(self.addr, "GET", &path, &[]);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
