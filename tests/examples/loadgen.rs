//! A fixed-rate HTTP load generator for the agent's footprint benchmark
//! (agent/bench/footprint.sh): GET a path at a steady rate for a while, over keep-alive
//! connections on loopback, and print latency percentiles and the response size.
//!
//! wrk keeps as many requests in flight as it can rather than a fixed rate, so latency is
//! measured here from each request's scheduled send time (open loop): a slow response delays
//! the ones behind it and that delay is counted, not hidden.
//!
//! Usage: loadgen ADDR PATH RATE_PER_S SECONDS [CONNECTIONS [HEADER...]]
//!   HEADER: a request header line such as `Accept-Encoding: gzip`, sent with every request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: loadgen ADDR PATH RATE_PER_S SECONDS [CONNECTIONS [HEADER...]]");
        std::process::exit(2);
    }
    let addr: SocketAddr = args[1].parse().expect("ADDR like 127.0.0.1:9420");
    assert!(addr.ip().is_loopback(), "loadgen sends to loopback only");
    let path = args[2].clone();
    let rate: f64 = args[3].parse().expect("RATE_PER_S");
    let seconds: f64 = args[4].parse().expect("SECONDS");
    let connections: usize = args.get(5).map_or(4, |c| c.parse().expect("CONNECTIONS"));
    let headers: String = args.iter().skip(6).map(|h| format!("{h}\r\n")).collect();
    let total = (rate * seconds).round() as usize;
    let period = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now() + Duration::from_millis(100);
    let workers: Vec<_> = (0..connections)
        .map(|w| {
            let (path, headers) = (path.clone(), headers.clone());
            std::thread::spawn(move || {
                let mut conn = connect(addr);
                let mut latencies = Vec::new();
                let mut errors = 0usize;
                let mut bytes = 0usize;
                for i in (w..total).step_by(connections) {
                    let due = start + period * i as u32;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    match get(&mut conn, addr, &path, &headers) {
                        Ok(n) => {
                            bytes = n;
                            latencies.push(due.elapsed());
                        }
                        Err(_) => {
                            errors += 1;
                            conn = connect(addr);
                        }
                    }
                }
                (latencies, errors, bytes)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(total);
    let (mut errors, mut bytes) = (0, 0);
    for w in workers {
        let (l, e, b) = w.join().expect("worker");
        all.extend(l);
        errors += e;
        bytes = bytes.max(b);
    }
    let wall = start.elapsed().as_secs_f64();
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "requests {} errors {errors} rate {:.1}/s body_bytes {bytes} p50_ms {:.3} p90_ms {:.3} p99_ms {:.3} max_ms {:.3}",
        all.len(),
        all.len() as f64 / wall,
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(1.0)
    );
}

fn connect(addr: SocketAddr) -> BufReader<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.set_nodelay(true).ok();
    BufReader::new(s)
}

/// One keep-alive GET with `headers` (each line ended by CRLF); returns the body length.
fn get(
    conn: &mut BufReader<TcpStream>,
    addr: SocketAddr,
    path: &str,
    headers: &str,
) -> std::io::Result<usize> {
    write!(
        conn.get_mut(),
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\r\n"
    )?;
    let mut line = String::new();
    conn.read_line(&mut line)?;
    if !line.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("status `{}`", line.trim())));
    }
    let mut length = None;
    loop {
        line.clear();
        conn.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok();
            }
        }
    }
    let n = length.ok_or_else(|| std::io::Error::other("no content-length"))?;
    let mut body = vec![0; n];
    conn.read_exact(&mut body)?;
    Ok(n)
}
