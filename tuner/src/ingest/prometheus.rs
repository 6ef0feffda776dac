//! The Prometheus HTTP API (`/api/v1/query`): one instant query per metric family, never one
//! per series, turned back into measurement records: the agents' calibrations and the last
//! multi-node fabric run each agent exports (issue 12).

use std::collections::BTreeMap;
use std::time::Duration;

use record::{Backend, Clock, Dtype, Gemm, Group, Kind, Record, Scope, Timing};
use serde::Deserialize;

use super::snapshot::{GpuInfo, LinkInfo, Node, Snapshot, TimeRange, FORMAT_VERSION};
use super::Measurements;
use crate::error::TunerError;

/// Where and how to query.
#[derive(Debug, Clone)]
pub struct PromSource {
    /// Base URL, e.g. `http://prometheus:9090`.
    pub url: String,
    /// Bearer token.
    pub bearer: Option<String>,
    /// Basic-auth user and password.
    pub basic: Option<(String, String)>,
    /// Request timeout.
    pub timeout: Duration,
    /// Label matchers scoping every query, e.g. `{pool="train-a"}`.
    pub selector: Option<String>,
    /// Look back this far (`last_over_time`), e.g. `24h`; `None` for the latest sample.
    pub window: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct Sample {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// The families read, in query order (that of [`Families`]' fields).
const FAMILIES: [&str; 8] = [
    "meshfit_collective_time_seconds",
    "meshfit_gemm_flops_per_second",
    "meshfit_memory_bandwidth_bytes_per_second",
    "meshfit_calibration_last_success_timestamp_seconds",
    "meshfit_gpu_info",
    "meshfit_gpu_link_info",
    "meshfit_fabric_pair_busbw_bytes_per_second",
    "meshfit_fabric_last_run_timestamp_seconds",
];

/// What each family's query returned.
#[derive(Default)]
struct Families {
    collectives: Vec<Sample>,
    gemms: Vec<Sample>,
    memory: Vec<Sample>,
    calibrated: Vec<Sample>,
    gpus: Vec<Sample>,
    links: Vec<Sample>,
    pairs: Vec<Sample>,
    fabric_runs: Vec<Sample>,
}

impl PromSource {
    /// The PromQL for one family, scoped by the selector and the window.
    pub fn query_for(&self, family: &str) -> String {
        let matchers = self
            .selector
            .as_deref()
            .map(|s| {
                s.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .trim()
            })
            .unwrap_or("");
        let series = format!("{family}{{{matchers}}}");
        match &self.window {
            Some(w) => format!("last_over_time({series}[{w}])"),
            None => series,
        }
    }

    /// The base URL with any password replaced by `***`, for messages and reports.
    pub fn redacted_url(&self) -> String {
        match reqwest::Url::parse(&self.url) {
            Ok(mut u) if u.password().is_some() => {
                // Cannot fail: the URL has a host, or it could not carry a password.
                let _ = u.set_password(Some("***"));
                u.to_string()
            }
            _ => self.url.clone(),
        }
    }

    /// `<base>/api/v1/query?query=...`, built with a URL parser so a base path, a query string
    /// (`?token=x`) or credentials in the base URL stay where they belong.
    fn query_url(&self, query: &str) -> Result<reqwest::Url, String> {
        let mut url = reqwest::Url::parse(&self.url)
            .map_err(|e| format!("not a URL ({e}); expected one such as http://prometheus:9090"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("scheme `{}`: expected http or https", url.scheme()));
        }
        let path = format!("{}/api/v1/query", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.query_pairs_mut().append_pair("query", query);
        Ok(url)
    }

    fn query(
        &self,
        client: &reqwest::blocking::Client,
        family: &str,
    ) -> Result<Vec<Sample>, TunerError> {
        let q = self.query_for(family);
        let fail = |message: String| TunerError::Prometheus {
            url: self.redacted_url(),
            query: q.clone(),
            message,
        };
        let mut url = self.query_url(&q).map_err(fail)?;
        // Credentials in the URL become basic auth, never part of a message.
        let from_url = (!url.username().is_empty()).then(|| {
            (
                url.username().to_string(),
                url.password().unwrap_or("").to_string(),
            )
        });
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let mut req = client.get(url);
        if let Some(t) = &self.bearer {
            req = req.bearer_auth(t);
        }
        if let Some((u, p)) = self.basic.as_ref().or(from_url.as_ref()) {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().map_err(|e| fail(self.send_error(&e)))?;
        let status = resp.status();
        let body = read_capped(resp, REPLY_LIMIT).map_err(|e| {
            fail(if e.kind() == std::io::ErrorKind::TimedOut {
                format!(
                    "timed out after {} s reading the reply",
                    self.timeout.as_secs_f64()
                )
            } else {
                format!("HTTP {status}: {e}")
            })
        })?;
        parse_reply(status, &body).map_err(fail)
    }

    /// What a failed request means, in words: timed out, refused, or the transport's message.
    fn send_error(&self, e: &reqwest::Error) -> String {
        if e.is_timeout() {
            format!("timed out after {} s", self.timeout.as_secs_f64())
        } else if e.is_connect() {
            "connection refused or unreachable (is Prometheus listening there?)".into()
        } else {
            // reqwest's message may carry the URL: use the chain's root cause only.
            let mut cause: &dyn std::error::Error = e;
            while let Some(next) = cause.source() {
                cause = next;
            }
            cause.to_string()
        }
    }

    /// Runs one query per family and returns the records, plus a snapshot of them.
    pub fn fetch(&self, now: f64) -> Result<(Measurements, Snapshot), TunerError> {
        let client = reqwest::blocking::Client::builder()
            .timeout(self.timeout)
            .build()
            .map_err(|e| TunerError::Prometheus {
                url: self.redacted_url(),
                query: String::new(),
                message: e.to_string(),
            })?;
        let mut results = Vec::with_capacity(FAMILIES.len());
        for family in FAMILIES {
            results.push(self.query(&client, family)?);
        }
        let [collectives, gemms, memory, calibrated, gpus, links, pairs, fabric_runs] =
            <[Vec<Sample>; FAMILIES.len()]>::try_from(results)
                .unwrap_or_else(|_| unreachable!("one result per family"));
        let families = Families {
            collectives,
            gemms,
            memory,
            calibrated,
            gpus,
            links,
            pairs,
            fabric_runs,
        };
        Ok(to_measurements(self, now, families))
    }
}

/// Largest reply read from Prometheus: a fleet of 10,000 nodes' calibration series is a few
/// tens of MB; a reply that streams on past this is cut and refused (issue 13).
pub const REPLY_LIMIT: u64 = 256 << 20;

/// Reads at most `limit` bytes of the reply, and refuses one that goes on past it.
fn read_capped(resp: impl std::io::Read, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut body = Vec::new();
    resp.take(limit + 1).read_to_end(&mut body)?;
    if body.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "the reply is larger than {} MiB: refused",
            limit >> 20
        )));
    }
    Ok(body)
}

/// Reads one `/api/v1/query` reply body, as answered with HTTP 200: the number of samples in
/// its instant vector, or what the reply is instead. It is the reader [`PromSource::fetch`]
/// runs on every reply, public so that the fuzz target in tuner/fuzz reaches it without a
/// server.
pub fn read_reply(body: &[u8]) -> Result<usize, String> {
    parse_reply(reqwest::StatusCode::OK, body).map(|samples| samples.len())
}

/// The samples of an instant-vector reply, or what the reply is instead.
fn parse_reply(status: reqwest::StatusCode, body: &[u8]) -> Result<Vec<Sample>, String> {
    let text = String::from_utf8_lossy(body);
    let start = text.trim_start();
    if start.is_empty() {
        return Err(format!("HTTP {status}: empty reply"));
    }
    if start.starts_with('<') {
        return Err(format!(
            "HTTP {status}: not JSON but HTML (a login page or a proxy in the way?)"
        ));
    }
    let reply: Response = serde_json::from_str(start)
        .map_err(|e| format!("HTTP {status}: not a Prometheus API reply: {e}"))?;
    if reply.status != "success" {
        return Err(reply
            .error
            .unwrap_or_else(|| format!("HTTP {status}, status {}", reply.status)));
    }
    let Some(data) = reply.data else {
        return Ok(Vec::new());
    };
    if data.result_type != "vector" {
        return Err(format!(
            "result type `{}`, expected `vector` (an instant query of a metric family)",
            data.result_type
        ));
    }
    serde_json::from_value(data.result)
        .map_err(|e| format!("HTTP {status}: the vector's samples do not parse: {e}"))
}

fn label<'a>(s: &'a Sample, name: &str) -> Option<&'a str> {
    s.metric.get(name).map(String::as_str)
}

fn value(s: &Sample) -> Option<f64> {
    s.value.1.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn node(s: &Sample) -> String {
    label(s, "hostname").unwrap_or("unknown").to_string()
}

fn backend(s: &Sample) -> Backend {
    label(s, "backend")
        .and_then(|b| b.parse().ok())
        .unwrap_or(Backend::Nccl)
}

fn timing(time_s: f64, backend: Backend) -> Timing {
    let clock = if backend == Backend::Sim {
        Clock::Model
    } else {
        Clock::CudaEvent
    };
    Timing::without_spread(time_s, None, clock)
}

fn collective_record(s: &Sample) -> Option<Record> {
    let kind: Kind = label(s, "collective")?.parse().ok()?;
    let scope: Scope = label(s, "scope")
        .and_then(|v| v.parse().ok())
        .unwrap_or(Scope::IntraNode);
    let ranks: u32 = label(s, "ranks")?.parse().ok()?;
    let bytes: u64 = label(s, "size_bytes")?.parse().ok()?;
    let t = value(s).filter(|t| *t > 0.0)?;
    let b = backend(s);
    let group = Group {
        node: Some(node(s)),
        gpus: Vec::new(),
        scope,
        ranks,
    };
    let mut r = Record::transfer(kind, b, group, bytes, Dtype::Bf16, timing(t, b));
    // Inter-node series of a fabric run say how many ranks each node ran; a malformed value
    // drops the series rather than keying the curve wrongly.
    r.detail.ranks_per_node = match label(s, "ranks_per_node") {
        Some(v) => Some(v.parse().ok()?),
        None => None,
    };
    Some(r)
}

/// A pairwise send/recv of 1 GiB between the sample's node and `peer_node` over rail `gpu`,
/// at the exported bandwidth (the agent exports the largest size's figure, not the size).
fn pair_record(s: &Sample) -> Option<Record> {
    let bw = value(s).filter(|v| *v > 0.0)?;
    let bytes = 1u64 << 30;
    let b = backend(s);
    Some(Record::pair(
        b,
        (&node(s), label(s, "peer_node")?),
        label(s, "gpu")?.parse().ok()?,
        bytes,
        Dtype::Bf16,
        timing(bytes as f64 / bw, b),
    ))
}

/// The single GPU a per-GPU sample names, on its node.
fn one_gpu(s: &Sample) -> Option<Group> {
    Some(Group {
        node: Some(node(s)),
        gpus: vec![label(s, "gpu")?.parse().ok()?],
        scope: Scope::IntraNode,
        ranks: 1,
    })
}

fn gemm_record(s: &Sample) -> Option<Record> {
    let shape = Gemm {
        m: label(s, "m")?.parse().ok()?,
        n: label(s, "n")?.parse().ok()?,
        k: label(s, "k")?.parse().ok()?,
    };
    let dtype: Dtype = label(s, "dtype")?.parse().ok()?;
    let flops = value(s).filter(|f| *f > 0.0)?;
    let b = backend(s);
    let group = one_gpu(s)?;
    Some(Record::gemm(
        b,
        group,
        shape,
        dtype,
        timing(shape.flop() / flops, b),
    ))
}

/// An HBM copy of 1 GiB whose reads plus writes ran at the exported rate (the agent names the
/// path after the record kind, `hbm_copy`).
fn hbm_record(s: &Sample) -> Option<Record> {
    let bw = value(s).filter(|v| *v > 0.0)?;
    let bytes = 1u64 << 30;
    let b = backend(s);
    let group = one_gpu(s)?;
    Some(Record::transfer(
        Kind::HbmCopy,
        b,
        group,
        bytes,
        Dtype::Bf16,
        timing(2.0 * bytes as f64 / bw, b),
    ))
}

fn to_measurements(src: &PromSource, now: f64, f: Families) -> (Measurements, Snapshot) {
    let mut m = Measurements::default();
    let by_node = |samples: &[Sample]| -> BTreeMap<String, f64> {
        samples
            .iter()
            .filter_map(|s| Some((node(s), value(s)?)))
            .collect()
    };
    let stamps = by_node(&f.calibrated);
    let fabric_stamps = by_node(&f.fabric_runs);
    let hbm = f
        .memory
        .iter()
        .filter(|s| matches!(label(s, "path"), Some("hbm_copy" | "hbm")));
    let parsed = f
        .collectives
        .iter()
        .map(|s| (s, FAMILIES[0], collective_record(s)))
        .chain(f.gemms.iter().map(|s| (s, FAMILIES[1], gemm_record(s))))
        .chain(hbm.map(|s| (s, FAMILIES[2], hbm_record(s))))
        .chain(f.pairs.iter().map(|s| (s, FAMILIES[6], pair_record(s))));
    let mut skipped = Vec::new();
    for (sample, family, r) in parsed {
        let Some(mut r) = r else {
            skipped.push(skip_reason(sample, family));
            continue;
        };
        // A `ranks="0"` label makes a record no measurement can have (issue 13).
        if let Err(e) = r.validate() {
            skipped.push(format!("{} {family}: {e}", node(sample)));
            continue;
        }
        // Inter-node figures come from the last fabric run, the rest from calibration.
        let when = match r.group.scope {
            Scope::InterNode => &fabric_stamps,
            Scope::IntraNode => &stamps,
        };
        r.timestamp = r.group.node.as_ref().and_then(|n| when.get(n)).copied();
        m.records.push(r);
    }
    if !skipped.is_empty() {
        const SHOWN: usize = 3;
        m.notes.push(format!(
            "{} series from {} skipped: {}{}",
            skipped.len(),
            src.redacted_url(),
            skipped[..skipped.len().min(SHOWN)].join("; "),
            if skipped.len() > SHOWN { "; ..." } else { "" }
        ));
    }
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for s in &f.gpus {
        let (Some(idx), Some(model)) = (
            label(s, "gpu").and_then(|g| g.parse().ok()),
            label(s, "model_name"),
        ) else {
            continue;
        };
        m.gpu_models.insert(node(s), model.to_string());
        nodes
            .entry(node(s))
            .or_insert_with(|| empty_node(node(s)))
            .gpus
            .push(GpuInfo {
                index: idx,
                model: model.to_string(),
            });
    }
    for s in &f.links {
        let (Some(gpu), Some(peer), Some(link)) = (
            label(s, "gpu").and_then(|g| g.parse().ok()),
            label(s, "peer_gpu").and_then(|g| g.parse().ok()),
            label(s, "link"),
        ) else {
            continue;
        };
        nodes
            .entry(node(s))
            .or_insert_with(|| empty_node(node(s)))
            .links
            .push(LinkInfo {
                gpu,
                peer_gpu: peer,
                link: link.to_string(),
            });
    }
    for r in &m.records {
        let n = r.group.node.clone().unwrap_or_default();
        nodes
            .entry(n.clone())
            .or_insert_with(|| empty_node(n))
            .records
            .push(r.clone());
    }
    let oldest = stamps
        .values()
        .chain(fabric_stamps.values())
        .copied()
        .fold(now, f64::min);
    let what = format!(
        "prometheus {}{}",
        src.redacted_url(),
        src.selector
            .as_deref()
            .map(|s| format!(" {s}"))
            .unwrap_or_default()
    );
    m.sources.push(format!(
        "{what} ({} records from {} nodes)",
        m.records.len(),
        nodes.len()
    ));
    let snapshot = Snapshot {
        format_version: FORMAT_VERSION,
        created: now,
        source: what,
        time_range: TimeRange {
            start: oldest,
            end: now,
        },
        nodes: nodes.into_values().collect(),
    };
    (m, snapshot)
}

/// Why a sample of `family` made no record: a value that is no time or rate, or labels that
/// design.md's series carry and this one lacks.
fn skip_reason(s: &Sample, family: &str) -> String {
    let raw = &s.value.1;
    let why = match raw.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => "lacks the labels of shared/design.md".to_string(),
        _ => format!("value `{raw}` is not a positive finite number"),
    };
    format!("{} {family}: {why}", node(s))
}

fn empty_node(name: String) -> Node {
    Node {
        name,
        gpus: Vec::new(),
        links: Vec::new(),
        records: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(selector: Option<&str>, window: Option<&str>) -> PromSource {
        PromSource {
            url: "http://p:9090".into(),
            bearer: None,
            basic: None,
            timeout: Duration::from_secs(5),
            selector: selector.map(Into::into),
            window: window.map(Into::into),
        }
    }

    /// A sample with `labels` and value `v`, as a reply's vector holds it.
    fn sample(labels: &[(&str, &str)], v: &str) -> Sample {
        Sample {
            metric: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value: (0.0, v.to_string()),
        }
    }

    fn at(url: &str) -> PromSource {
        PromSource {
            url: url.into(),
            ..src(None, None)
        }
    }

    #[test]
    fn urls_are_built_by_a_parser_and_passwords_never_shown() {
        let q = at("http://prom.example/sub/?token=x")
            .query_url("up")
            .unwrap();
        assert_eq!(
            q.as_str(),
            "http://prom.example/sub/api/v1/query?token=x&query=up"
        );
        let s = at("https://ops:hunter2@prom.example:9090");
        assert_eq!(s.redacted_url(), "https://ops:***@prom.example:9090/");
        assert!(!s
            .query_url("up")
            .unwrap()
            .as_str()
            .contains("api/v1/query/"));
        let err = at("prom.example:9090").query_url("up").unwrap_err();
        assert!(err.starts_with("scheme `prom.example`"), "{err}");
        let err = at("not a url").query_url("up").unwrap_err();
        assert!(err.starts_with("not a URL"), "{err}");
    }

    #[test]
    fn replies_that_are_not_an_instant_vector_say_what_they_are() {
        let ok = reqwest::StatusCode::OK;
        let err = |body: &str| parse_reply(ok, body.as_bytes()).unwrap_err();
        assert_eq!(err(""), "HTTP 200 OK: empty reply");
        assert!(err("<html>login</html>").contains("not JSON but HTML"));
        assert!(err("{\"foo\": 1").contains("not a Prometheus API reply"));
        assert!(
            err(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
                .contains("result type `matrix`, expected `vector`")
        );
        assert_eq!(
            err(r#"{"status":"error","error":"parse error at char 3"}"#),
            "parse error at char 3"
        );
        let samples = parse_reply(
            ok,
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"hostname":"n1"},"value":[1,"2"]}]}}"#,
        )
        .unwrap();
        assert_eq!(samples.len(), 1);
        assert_eq!(
            read_reply(br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#),
            Ok(0)
        );
    }

    #[test]
    fn a_reply_past_the_limit_is_refused() {
        let endless = std::io::repeat(b' ');
        let err = read_capped(endless, 1 << 20).unwrap_err().to_string();
        assert_eq!(err, "the reply is larger than 1 MiB: refused");
        assert_eq!(read_capped(&b"{}"[..], 1 << 20).unwrap(), b"{}");
    }

    #[test]
    fn a_collective_on_zero_ranks_is_skipped_by_name() {
        let sample = sample(
            &[
                ("hostname", "n3"),
                ("collective", "all_reduce"),
                ("scope", "intra_node"),
                ("ranks", "0"),
                ("size_bytes", "1048576"),
            ],
            "0.001",
        );
        let families = Families {
            collectives: vec![sample],
            ..Families::default()
        };
        let (m, _) = to_measurements(&src(None, None), 0.0, families);
        assert!(m.records.is_empty());
        assert!(
            m.notes[0].contains("n3 meshfit_collective_time_seconds: ranks 0: expected at least 1"),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn skipped_samples_name_node_family_and_reason() {
        let nan = sample(&[("hostname", "n7"), ("gpu", "0")], "NaN");
        assert_eq!(
            skip_reason(&nan, "meshfit_gemm_flops_per_second"),
            "n7 meshfit_gemm_flops_per_second: value `NaN` is not a positive finite number"
        );
        let unlabelled = sample(&[("hostname", "n7")], "1e12");
        assert!(skip_reason(&unlabelled, "meshfit_gemm_flops_per_second")
            .ends_with("lacks the labels of shared/design.md"));
    }

    #[test]
    fn a_refused_connection_and_a_timeout_say_so() {
        // A port nothing listens on: bind, learn the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = at(&format!("http://127.0.0.1:{port}"))
            .fetch(0.0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("connection refused or unreachable"), "{err}");
        // A server that accepts and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let source = PromSource {
            timeout: Duration::from_millis(300),
            ..at(&format!("http://127.0.0.1:{port}"))
        };
        let err = source.fetch(0.0).unwrap_err().to_string();
        assert!(err.contains("timed out after 0.3 s"), "{err}");
        drop(silent);
    }

    #[test]
    fn one_query_per_family_scoped_by_selector_and_window() {
        assert_eq!(
            src(None, None).query_for("meshfit_gpu_info"),
            "meshfit_gpu_info{}"
        );
        assert_eq!(
            src(Some("{pool=\"train-a\"}"), None).query_for("meshfit_gpu_info"),
            "meshfit_gpu_info{pool=\"train-a\"}"
        );
        assert_eq!(
            src(Some("pool=\"a\""), Some("24h")).query_for("meshfit_collective_time_seconds"),
            "last_over_time(meshfit_collective_time_seconds{pool=\"a\"}[24h])"
        );
    }

    #[test]
    fn samples_become_records() {
        let coll = vec![sample(
            &[
                ("collective", "all_reduce"),
                ("scope", "intra_node"),
                ("ranks", "8"),
                ("size_bytes", "1048576"),
                ("backend", "sim"),
                ("hostname", "n1"),
            ],
            "0.0001",
        )];
        let gemm = vec![sample(
            &[
                ("gpu", "3"),
                ("dtype", "bf16"),
                ("m", "8192"),
                ("n", "8192"),
                ("k", "8192"),
                ("backend", "sim"),
                ("hostname", "n1"),
            ],
            "7e14",
        )];
        let mem = vec![sample(
            &[("gpu", "0"), ("path", "hbm"), ("hostname", "n1")],
            "3e12",
        )];
        let stamp = vec![sample(&[("hostname", "n1")], "1000")];
        let (m, snap) = to_measurements(
            &src(None, None),
            2000.0,
            Families {
                collectives: coll,
                gemms: gemm,
                memory: mem,
                calibrated: stamp,
                ..Families::default()
            },
        );
        assert_eq!(m.records.len(), 3);
        let ar = &m.records[0];
        assert_eq!(
            (ar.kind, ar.group.ranks, ar.bytes, ar.backend),
            (Kind::AllReduce, 8, 1 << 20, Backend::Sim)
        );
        assert_eq!(ar.timestamp, Some(1000.0));
        assert!((m.records[1].flops.unwrap() / 7e14 - 1.0).abs() < 1e-12);
        assert!((m.records[2].busbw.unwrap() / 3e12 - 1.0).abs() < 1e-12);
        assert_eq!(snap.nodes.len(), 1);
        assert_eq!(snap.time_range.start, 1000.0);
    }

    /// What one agent of a fabric run exports (issue 12): a job-wide all-reduce of 6 ranks, 2
    /// per node, and its NIC 1 at 22.5 GB/s to n0. The records key the curve by ranks per node
    /// and carry the pair's ends, with the fabric run's time.
    #[test]
    fn fabric_series_become_inter_node_records() {
        let inter = |per_node: &str| {
            sample(
                &[
                    ("collective", "all_reduce"),
                    ("scope", "inter_node"),
                    ("ranks", "6"),
                    ("ranks_per_node", per_node),
                    ("size_bytes", "16777216"),
                    ("backend", "sim"),
                    ("hostname", "n2"),
                ],
                "0.0003",
            )
        };
        let pairs = vec![sample(
            &[
                ("peer_node", "n0"),
                ("gpu", "1"),
                ("backend", "sim"),
                ("hostname", "n2"),
            ],
            "22.5e9",
        )];
        let (m, _) = to_measurements(
            &src(None, None),
            2000.0,
            Families {
                collectives: vec![inter("2"), inter("two")],
                pairs,
                calibrated: vec![sample(&[("hostname", "n2")], "1000")],
                fabric_runs: vec![sample(&[("hostname", "n2")], "1500")],
                ..Families::default()
            },
        );
        assert_eq!(
            m.records.len(),
            2,
            "the malformed ranks_per_node is skipped"
        );
        assert!(m.notes[0].starts_with("1 series"), "{:?}", m.notes);
        let ar = &m.records[0];
        assert_eq!(
            (
                ar.group.scope,
                ar.group.ranks,
                ar.detail.ranks_per_node,
                ar.timestamp
            ),
            (Scope::InterNode, 6, Some(2), Some(1500.0))
        );
        assert_eq!(crate::fit::members_per_node(ar), 2);
        let p = &m.records[1];
        assert!(crate::fit::pairs::is_pair(p));
        assert_eq!(
            (
                p.group.node.as_deref(),
                p.detail.peer_node.as_deref(),
                p.group.gpus.as_slice()
            ),
            (Some("n2"), Some("n0"), &[1][..])
        );
        assert!((p.busbw.unwrap() / 22.5e9 - 1.0).abs() < 1e-12);
    }
}
