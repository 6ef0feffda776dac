//! The Prometheus HTTP API (`/api/v1/query`): one instant query per metric family, never one
//! per series, turned back into measurement records: the agents' calibrations and the last
//! multi-node fabric run each agent exports (issue 12).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use record::{Backend, Clock, Dtype, Family, Gemm, Group, Kind, Record, Scope, Timing};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::node_gpus::NodeGpus;
use super::snapshot::{GpuInfo, LinkInfo, Node, Snapshot, TimeRange};
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

/// One `/api/v1/query` reply, read by [`ReplySeed`].
struct Response {
    status: String,
    data: Option<Data>,
    error: Option<String>,
}

struct Data {
    result_type: String,
    /// Empty where the result is no vector: it is skipped unread.
    samples: Vec<Sample>,
}

/// One series of a reply: the labels its family's records read, and its value as written.
#[derive(Debug)]
struct Sample {
    metric: Vec<(&'static str, String)>,
    value: String,
}

/// The labels the records and the snapshot read of each family's series. The other labels
/// (`__name__`, `instance`, `job`, the targets' own) are dropped as the reply is read, so
/// that what is kept, not the size of the reply, bounds the memory a query takes (issue 31,
/// item 3).
fn labels_read(family: Family) -> &'static [&'static str] {
    match family {
        Family::CollectiveTime => &[
            "hostname",
            "backend",
            "collective",
            "scope",
            "ranks",
            "size_bytes",
            "ranks_per_node",
            "nvlink_domains",
        ],
        Family::GemmFlops => &["hostname", "backend", "gpu", "m", "n", "k", "dtype"],
        Family::MemoryBandwidth => &["hostname", "backend", "gpu", "path"],
        Family::GpuInfo => &["hostname", "gpu", "model_name"],
        Family::GpuLinkInfo => &["hostname", "gpu", "peer_gpu", "link"],
        Family::FabricPairBusbw => &["hostname", "backend", "gpu", "peer_node"],
        Family::CalibrationLastSuccess | Family::FabricLastRun => &["hostname"],
    }
}

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
        self.series(family, "")
    }

    /// The series of `family` scoped by the selector and `extra` matchers, as of the window.
    fn series(&self, family: &str, extra: &str) -> String {
        self.series_within(family, extra, self.window.as_deref())
    }

    /// [`PromSource::series`] as of `window` (`None`: the latest sample).
    fn series_within(&self, family: &str, extra: &str, window: Option<&str>) -> String {
        let selected = self
            .selector
            .as_deref()
            .map(|s| {
                s.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .trim()
            })
            .unwrap_or("");
        let matchers = match (selected, extra) {
            ("", m) | (m, "") => m.to_string(),
            (a, b) => format!("{a},{b}"),
        };
        let series = format!("{family}{{{matchers}}}");
        match window {
            Some(w) => format!("last_over_time({series}[{w}])"),
            None => series,
        }
    }

    /// The base URL with any password and every query value (`?token=X`, issue 31) replaced
    /// by `***`, for messages, reports and the snapshot's `source`.
    pub fn redacted_url(&self) -> String {
        // Written as given where there is nothing to hide.
        let Some(mut u) = reqwest::Url::parse(&self.url)
            .ok()
            .filter(|u| u.password().is_some() || u.query().is_some())
        else {
            return self.url.clone();
        };
        if u.password().is_some() {
            // Cannot fail: the URL has a host, or it could not carry a password.
            let _ = u.set_password(Some("***"));
        }
        if u.query().is_some() {
            let keys: Vec<String> = u.query_pairs().map(|(k, _)| k.into_owned()).collect();
            u.query_pairs_mut()
                .clear()
                .extend_pairs(keys.iter().map(|k| (k, "***")));
        }
        u.to_string()
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
        family: Family,
    ) -> Result<Vec<Sample>, TunerError> {
        let q = self.query_for(family.as_str());
        self.run(client, &q, labels_read(family))
            .map_err(|e| match e {
                // Every node's series of a large fleet: the reduced path reads a fraction.
                TunerError::Prometheus {
                    url,
                    query,
                    message,
                } if message.contains("the reply is larger than") => TunerError::Prometheus {
                    url,
                    query,
                    message: format!(
                        "{message}; --fleet-query reduced reads the fleet reduced in Prometheus \
                     instead of every node's series"
                    ),
                },
                e => e,
            })
    }

    /// Runs the PromQL `q` as an instant query, keeping the labels in `keep` of each sample.
    fn run(
        &self,
        client: &reqwest::blocking::Client,
        q: &str,
        keep: &'static [&'static str],
    ) -> Result<Vec<Sample>, TunerError> {
        let fail = |message: String| TunerError::Prometheus {
            url: self.redacted_url(),
            query: q.to_string(),
            message,
        };
        let mut url = self.query_url(q).map_err(fail)?;
        // Credentials in the URL become basic auth, never part of a message.
        let from_url = (!url.username().is_empty()).then(|| {
            (
                url.username().to_string(),
                url.password().unwrap_or("").to_string(),
            )
        });
        let _ = url.set_username("");
        let _ = url.set_password(None);
        // A timeout on the request, not only the client's: reqwest's blocking client restarts
        // its own at every read of the body, so a reply that drips a byte a second never timed
        // out (issue 31, item 5). The request's is one deadline for connecting, the headers
        // and the whole body.
        let mut req = client.get(url).timeout(self.timeout);
        if let Some(t) = &self.bearer {
            req = req.bearer_auth(t);
        }
        if let Some((u, p)) = self.basic.as_ref().or(from_url.as_ref()) {
            req = req.basic_auth(u, Some(p));
        }
        let resp = req.send().map_err(|e| fail(self.send_error(&e)))?;
        let status = resp.status();
        // A failed status is a failure whatever the body says: a 500 whose body read
        // `"status":"success"` was taken as an answer (issue 31).
        if !status.is_success() {
            return Err(fail(status_error(status, resp)));
        }
        // Parsed as it is read, under the size cap and the request's deadline.
        parse_reply(status, Capped::new(resp, REPLY_LIMIT), keep).map_err(|e| {
            fail(match e {
                ReplyError::Read(e) if is_timeout(&e) => format!(
                    "timed out after {} s reading the reply (--timeout bounds the whole \
                     request: connecting, the headers and the body)",
                    self.timeout.as_secs_f64()
                ),
                ReplyError::Read(e) => format!("HTTP {status}: {e}"),
                ReplyError::Refused(message) => message,
            })
        })
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

    /// The source as notes and snapshots name it: its URL, passwords and tokens hidden, and
    /// its selector.
    fn described(&self) -> String {
        format!(
            "prometheus {}{}",
            self.redacted_url(),
            self.selector
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default()
        )
    }

    /// Runs one query per family and returns every node's records, plus a snapshot of them.
    pub fn fetch(&self, now: f64) -> Result<(Measurements, Snapshot), TunerError> {
        self.fetch_raw(&self.client()?, now)
    }

    fn client(&self) -> Result<reqwest::blocking::Client, TunerError> {
        reqwest::blocking::Client::builder()
            .timeout(self.timeout)
            .build()
            .map_err(|e| TunerError::Prometheus {
                url: self.redacted_url(),
                query: String::new(),
                message: e.to_string(),
            })
    }

    fn fetch_raw(
        &self,
        client: &reqwest::blocking::Client,
        now: f64,
    ) -> Result<(Measurements, Snapshot), TunerError> {
        // In the order of `Families`' fields.
        let read = |family: Family| self.query(client, family);
        let families = Families {
            collectives: read(Family::CollectiveTime)?,
            gemms: read(Family::GemmFlops)?,
            memory: read(Family::MemoryBandwidth)?,
            calibrated: read(Family::CalibrationLastSuccess)?,
            gpus: read(Family::GpuInfo)?,
            links: read(Family::GpuLinkInfo)?,
            pairs: read(Family::FabricPairBusbw)?,
            fabric_runs: read(Family::FabricLastRun)?,
        };
        to_measurements(self, now, families)
    }
}

/// Largest reply read from Prometheus: a fleet of 10,000 nodes' calibration series is a few
/// tens of MB; a reply that streams on past this is cut and refused (issue 13).
pub const REPLY_LIMIT: u64 = 256 << 20;

/// Most of a failed reply's body read for its message, bytes.
const ERROR_BODY_READ: u64 = 64 << 10;

/// Most of a server's own words a message quotes, characters: a proxy's error page or a
/// runaway `error` field is cut, not printed whole.
const QUOTED_CHARS: usize = 300;

/// What a reply of a status other than 2xx says: the status, then the API's `error` where the
/// body is an API reply with one, else the body's opening.
fn status_error(status: reqwest::StatusCode, body: impl Read) -> String {
    #[derive(serde::Deserialize)]
    struct ApiError {
        error: Option<String>,
    }
    let mut head = Vec::new();
    // What came before the deadline, the cut or a dropped connection is all there is to quote.
    let _ = body.take(ERROR_BODY_READ).read_to_end(&mut head);
    let text = String::from_utf8_lossy(&head);
    let said = serde_json::from_str::<ApiError>(&text)
        .ok()
        .and_then(|e| e.error)
        .unwrap_or_else(|| text.trim().to_string());
    if said.is_empty() {
        format!("HTTP {status} with an empty body")
    } else {
        format!("HTTP {status}: {}", shortened(&said))
    }
}

/// `text` cut to [`QUOTED_CHARS`] characters, saying so where it was.
fn shortened(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((at, _)) => format!("{}... (cut at {QUOTED_CHARS} characters)", &text[..at]).into(),
        None => text.into(),
    }
}

/// Whether a body read failed on the deadline: reqwest reports it as an I/O error of kind
/// `Other` that wraps its own timeout error, not as `TimedOut`.
fn is_timeout(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::TimedOut
        || e.get_ref()
            .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
            .is_some_and(reqwest::Error::is_timeout)
}

/// A reply body that refuses to go on past `limit` bytes.
struct Capped<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Capped<R> {
    fn new(inner: R, limit: u64) -> Self {
        Capped {
            inner,
            left: limit,
            limit,
        }
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // One byte past what is left is asked for, so that a reply of exactly the limit
        // passes and a longer one is refused at the byte that crosses it.
        let asked =
            usize::try_from(self.left.saturating_add(1)).map_or(buf.len(), |n| n.min(buf.len()));
        let n = self.inner.read(&mut buf[..asked])?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::other(format!(
                "the reply is larger than {} MiB: refused",
                self.limit >> 20
            ))
        })?;
        Ok(n)
    }
}

/// Why a reply gave no samples.
#[derive(Debug)]
enum ReplyError {
    /// The body could not be read: the deadline, the size cap or the connection.
    Read(std::io::Error),
    /// What was read is no instant vector, in words.
    Refused(String),
}

/// Reads one `/api/v1/query` reply body, as answered with HTTP 200: the number of samples in
/// its instant vector, or what the reply is instead. It is the reader [`PromSource::fetch`]
/// runs on every reply, public so that the fuzz target in tuner/fuzz reaches it without a
/// server.
pub fn read_reply(body: &[u8]) -> Result<usize, String> {
    // Counting keeps no labels.
    parse_reply(reqwest::StatusCode::OK, body, &[])
        .map(|samples| samples.len())
        .map_err(|e| match e {
            ReplyError::Read(e) => e.to_string(),
            ReplyError::Refused(message) => message,
        })
}

/// The samples of an instant-vector reply with the labels in `keep`, or what the reply is
/// instead. The body is parsed as it is read: no copy of the reply, nor a tree of its JSON,
/// is ever held (issue 31, item 3).
fn parse_reply(
    status: reqwest::StatusCode,
    body: impl Read,
    keep: &'static [&'static str],
) -> Result<Vec<Sample>, ReplyError> {
    let mut body = BufReader::new(body);
    match first_byte(&mut body).map_err(ReplyError::Read)? {
        None => return Err(ReplyError::Refused(format!("HTTP {status}: empty reply"))),
        Some(b'<') => {
            return Err(ReplyError::Refused(format!(
                "HTTP {status}: not JSON but HTML (a login page or a proxy in the way?)"
            )))
        }
        Some(_) => {}
    }
    let in_samples = Cell::new(false);
    let mut de = serde_json::Deserializer::from_reader(body);
    let reply = ReplySeed {
        in_samples: &in_samples,
        keep,
    }
    .deserialize(&mut de)
    .and_then(|reply| de.end().map(|()| reply))
    .map_err(|e| match e.classify() {
        serde_json::error::Category::Io => ReplyError::Read(e.into()),
        serde_json::error::Category::Data if in_samples.get() => ReplyError::Refused(format!(
            "HTTP {status}: the vector's samples do not parse: {e}"
        )),
        _ => ReplyError::Refused(format!("HTTP {status}: not a Prometheus API reply: {e}")),
    })?;
    if reply.status != "success" {
        // An error that says nothing is no reason: the status is named instead.
        return Err(ReplyError::Refused(
            match reply.error.filter(|e| !e.trim().is_empty()) {
                Some(error) => shortened(&error).into_owned(),
                None => format!("HTTP {status}, status {}", shortened(&reply.status)),
            },
        ));
    }
    let Some(data) = reply.data else {
        return Ok(Vec::new());
    };
    if data.result_type != "vector" {
        return Err(ReplyError::Refused(format!(
            "result type `{}`, expected `vector` (an instant query of a metric family)",
            data.result_type
        )));
    }
    Ok(data.samples)
}

/// The first byte past leading whitespace, consumed up to it; `None` for a blank body.
fn first_byte(body: &mut impl BufRead) -> std::io::Result<Option<u8>> {
    loop {
        let buf = body.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(at) => {
                let first = buf[at];
                body.consume(at);
                return Ok(Some(first));
            }
            None => {
                let all = buf.len();
                body.consume(all);
            }
        }
    }
}

/// Reads the reply's top level and notes when the vector's samples are being read, so that a
/// sample of the wrong shape is told apart from a reply that is no API reply at all.
struct ReplySeed<'a> {
    in_samples: &'a Cell<bool>,
    keep: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for ReplySeed<'_> {
    type Value = Response;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Response, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReplySeed<'_> {
    type Value = Response;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Prometheus API reply object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Response, A::Error> {
        let (mut status, mut data, mut error) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "status" => status = Some(map.next_value()?),
                "data" => {
                    data = map.next_value_seed(DataSeed {
                        in_samples: self.in_samples,
                        keep: self.keep,
                    })?
                }
                "error" => error = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Response {
            status: status.ok_or_else(|| de::Error::missing_field("status"))?,
            data,
            error,
        })
    }
}

/// Reads `data`, `null` or an object. Prometheus writes `resultType` before `result`, so a
/// result that is no vector is skipped unread rather than parsed as samples.
struct DataSeed<'a> {
    in_samples: &'a Cell<bool>,
    keep: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for DataSeed<'_> {
    type Value = Option<Data>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Data>, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_> {
    type Value = Option<Data>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the reply's data: null or an object")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<Data>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<Data>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<Data>, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Data>, A::Error> {
        let (mut result_type, mut samples) = (None::<String>, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "resultType" => result_type = Some(map.next_value()?),
                "result" if samples.is_some() => return Err(de::Error::duplicate_field("result")),
                "result" if result_type.as_deref().is_some_and(|t| t != "vector") => {
                    map.next_value::<IgnoredAny>()?;
                    samples = Some(Vec::new());
                }
                "result" => {
                    self.in_samples.set(true);
                    samples = Some(map.next_value_seed(Samples(self.keep))?);
                    self.in_samples.set(false);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(Data {
            result_type: result_type.ok_or_else(|| de::Error::missing_field("resultType"))?,
            samples: samples.ok_or_else(|| de::Error::missing_field("result"))?,
        }))
    }
}

/// Reads the vector's samples, each keeping the labels in `.0`.
struct Samples(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Samples {
    type Value = Vec<Sample>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Sample>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Samples {
    type Value = Vec<Sample>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of samples")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Sample>, A::Error> {
        let mut samples = Vec::new();
        while let Some(sample) = seq.next_element_seed(SampleSeed(self.0))? {
            samples.push(sample);
        }
        Ok(samples)
    }
}

/// Reads one sample, `{"metric": {...}, "value": [timestamp, "value"]}`, keeping the labels
/// in `.0` and the value as written, which a record parses; the query's timestamp is not kept.
struct SampleSeed(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for SampleSeed {
    type Value = Sample;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Sample, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SampleSeed {
    type Value = Sample;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sample object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sample, A::Error> {
        let (mut metric, mut value) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metric" if metric.is_some() => return Err(de::Error::duplicate_field("metric")),
                "metric" => metric = Some(map.next_value_seed(Labels(self.0))?),
                "value" if value.is_some() => return Err(de::Error::duplicate_field("value")),
                "value" => value = Some(map.next_value::<(f64, String)>()?.1),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Sample {
            metric: metric.ok_or_else(|| de::Error::missing_field("metric"))?,
            value: value.ok_or_else(|| de::Error::missing_field("value"))?,
        })
    }
}

/// Reads a series' labels, keeping those in `.0`; every label's value must still be a string.
struct Labels(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Labels {
    type Value = Vec<(&'static str, String)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Labels {
    type Value = Vec<(&'static str, String)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of label names to values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept: Vec<(&'static str, String)> = Vec::new();
        while let Some(name) = map.next_key_seed(LabelName(self.0))? {
            let Some(name) = name else {
                map.next_value_seed(Dropped)?;
                continue;
            };
            let value = map.next_value()?;
            // The last of a repeated label wins, as it did in a map.
            match kept.iter_mut().find(|(k, _)| *k == name) {
                Some(slot) => slot.1 = value,
                None => kept.push((name, value)),
            }
        }
        // Held for the whole fetch: no room to spare per series.
        kept.shrink_to_fit();
        Ok(kept)
    }
}

/// A label name as the one of `.0` it is, or `None` for one that is dropped, read without a
/// copy.
struct LabelName(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for LabelName {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for LabelName {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().find(|k| **k == v).copied())
    }
}

/// A dropped label's value: required to be a string, as every label is, and read without a
/// copy.
struct Dropped;

impl<'de> DeserializeSeed<'de> for Dropped {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Dropped {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

fn label<'a>(s: &'a Sample, name: &str) -> Option<&'a str> {
    s.metric
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.as_str())
}

fn value(s: &Sample) -> Option<f64> {
    s.value.parse::<f64>().ok().filter(|v| v.is_finite())
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
    // Inter-node series of a fabric run say how many ranks each node ran and, where known,
    // how many NVLink domains they spanned; a malformed value drops the series rather than
    // keying the curve wrongly (a cross-rack curve priced as NVLink, or the reverse).
    let number = |name| match label(s, name) {
        Some(v) => v.parse().ok().map(Some),
        None => Some(None),
    };
    r.detail.ranks_per_node = number("ranks_per_node")?;
    r.detail.nvlink_domains = number("nvlink_domains")?;
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

fn to_measurements(
    src: &PromSource,
    now: f64,
    f: Families,
) -> Result<(Measurements, Snapshot), TunerError> {
    let mut m = Measurements::default();
    // A node's newest time where two servers or agents report it, so that the stamp does not
    // depend on the order of the reply (issue 31, item 2).
    let by_node = |samples: &[Sample]| -> BTreeMap<String, f64> {
        let mut newest = BTreeMap::new();
        for (n, t) in samples.iter().filter_map(|s| Some((node(s), value(s)?))) {
            let at = newest.entry(n).or_insert(t);
            *at = at.max(t);
        }
        newest
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
        .map(|s| (s, Family::CollectiveTime.as_str(), collective_record(s)))
        .chain(
            f.gemms
                .iter()
                .map(|s| (s, Family::GemmFlops.as_str(), gemm_record(s))),
        )
        .chain(hbm.map(|s| (s, Family::MemoryBandwidth.as_str(), hbm_record(s))))
        .chain(
            f.pairs
                .iter()
                .map(|s| (s, Family::FabricPairBusbw.as_str(), pair_record(s))),
        );
    let mut skipped = Vec::new();
    for (sample, family, r) in parsed {
        let Some(mut r) = r else {
            skipped.push(skip_reason(sample, family));
            continue;
        };
        // Inter-node figures come from the last fabric run, the rest from calibration.
        let when = match r.group.scope {
            Scope::InterNode => &fabric_stamps,
            Scope::IntraNode => &stamps,
        };
        r.timestamp = r.group.node.as_ref().and_then(|n| when.get(n)).copied();
        // A `ranks="0"` label makes a record no measurement can have (issue 13), and a stamp
        // in the future would keep it fresh under --max-age forever (issue 31, item 10).
        if let Err(e) = r.validate_at(now) {
            skipped.push(format!("{} {family}: {e}", node(sample)));
            continue;
        }
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
    let what = src.described();
    // A GPU exported twice alike is one GPU; one exported as two models is refused,
    // whatever the order of the series (issue 31, item 2), as a snapshot's listings are.
    let mut gpus = NodeGpus::default();
    for s in &f.gpus {
        if let (Some(idx), Some(model)) = (
            label(s, "gpu").and_then(|g| g.parse().ok()),
            label(s, "model_name"),
        ) {
            gpus.list(&node(s), idx, model, &what)
                .map_err(|c| TunerError::Prometheus {
                    url: src.redacted_url(),
                    query: src.query_for(Family::GpuInfo.as_str()),
                    message: format!(
                        "{c}: two series disagree on what the GPU is (two agents or targets \
                         export the node?), and which GPU its records ran on cannot be told"
                    ),
                })?;
        }
    }
    let nodes = snapshot_nodes(&f, &gpus, &m.records);
    m.add_gpus(gpus)?;
    let oldest = stamps
        .values()
        .chain(fabric_stamps.values())
        .copied()
        .fold(now, f64::min);
    m.sources.push(format!(
        "{what} ({} records from {} nodes)",
        m.records.len(),
        nodes.len()
    ));
    let range = TimeRange {
        start: oldest,
        end: now,
    };
    let snapshot = Snapshot::per_node(what, now, range, nodes.into_values().collect());
    Ok((m, snapshot))
}

/// The snapshot's nodes: each node's GPUs, as `gpus` lists them, and links as the agents
/// export them, and its records.
fn snapshot_nodes(f: &Families, gpus: &NodeGpus, records: &[Record]) -> BTreeMap<String, Node> {
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for name in gpus.nodes() {
        let mut node = empty_node(name.to_string());
        node.gpus = gpus
            .gpus_of(name)
            .map(|(index, model)| GpuInfo {
                index,
                model: model.to_string(),
            })
            .collect();
        nodes.insert(name.to_string(), node);
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
    for r in records {
        let n = r.group.node.clone().unwrap_or_default();
        nodes
            .entry(n.clone())
            .or_insert_with(|| empty_node(n))
            .records
            .push(r.clone());
    }
    nodes
}

/// Why a sample of `family` made no record: a value that is no time or rate, or labels that
/// design.md's series carry and this one lacks.
fn skip_reason(s: &Sample, family: &str) -> String {
    let raw = &s.value;
    let why = match raw.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => "lacks the labels of docs/design.md".to_string(),
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

pub mod fleet;

#[cfg(test)]
mod tests;
