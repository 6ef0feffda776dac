//! Prometheus metrics, rendered from the cache at scrape time.
//!
//! One [`Collector`] per file, all listed in [`COLLECTORS`]. The registry ([`collect`]) times
//! each one and reports its success and duration, as node_exporter's
//! `node_scrape_collector_success{collector}` does: a failing collector is logged and
//! reports 0, and the others still report. Collectors read only a [`Snapshot`], so a scrape
//! never waits on NVML or on a benchmark. Every series carries `hostname` and `backend`.
//!
//! The exposition formats are written by `prometheus-client`, the Prometheus project's Rust
//! client, which encodes one registry both as the classic text format 0.0.4
//! (`encoding::prometheus_text`) and as OpenMetrics text 1.0.0 (`encoding::text`); the other
//! maintained crate, tikv's `prometheus`, writes no OpenMetrics. Every value is already in the
//! cache, so the collectors hand the library constant families ([`Families`], through its
//! `Collector` interface) rather than keeping live metric objects. Where the formats differ
//! the library decides: an OpenMetrics counter family is named without `_total` (its samples
//! keep it) and the `_info` families are of OpenMetrics' info type; the 0.0.4 text keeps the
//! names and gauge types it always had.

mod calibration;
mod counters;
mod exporter;
mod fabric;
mod process;
mod topology;

use crate::cache::{Cache, Snapshot};
use axum::body::Bytes;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One group of metric families, read from the cache.
pub trait Collector: Sync {
    /// The `collector` label.
    fn name(&self) -> &'static str;

    /// Writes this collector's families; an error drops everything it wrote.
    fn collect(&self, snapshot: &Snapshot, out: &mut Out) -> Result<(), String>;
}

/// Every collector, in output order.
pub static COLLECTORS: &[&dyn Collector] = &[
    &topology::Topology,
    &calibration::CALIBRATION,
    &fabric::Fabric,
    &counters::Counters,
    &process::Process,
];

/// An exposition format `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The classic text format 0.0.4, what a client that asks for nothing in particular gets.
    Text,
    /// OpenMetrics text 1.0.0, ended by `# EOF`.
    OpenMetrics,
}

impl Format {
    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// How a `/metrics` body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// As written.
    Identity,
    /// gzip-compressed (`Content-Encoding: gzip`).
    Gzip,
}

/// The bodies of one cache generation: its families, and each (format, encoding) body once
/// a scrape asked for it.
struct Generation {
    generation: u64,
    registry: Registry,
    bodies: [[Option<Bytes>; 2]; 2],
}

/// The last `/metrics` bodies and the cache generation they show. The cache changes every
/// sample interval, and scrapes in between share one body per format and encoding (a
/// reference count, not a copy), so a burst of scrapes costs next to nothing.
#[derive(Default)]
pub struct Rendered(Mutex<Option<Generation>>);

impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendered").finish_non_exhaustive()
    }
}

impl Rendered {
    /// The body for the cache as it is now, in `format` and `encoding`.
    pub fn get(&self, cache: &Cache, format: Format, encoding: Encoding) -> Result<Bytes, String> {
        let snapshot = cache.snapshot();
        // A panic while rendering leaves the last whole generation behind: keep serving.
        let mut last = match self.0.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        let current = match &mut *last {
            Some(g) if g.generation == snapshot.generation => g,
            stale => stale.insert(Generation {
                generation: snapshot.generation,
                registry: collect(&snapshot),
                bodies: Default::default(),
            }),
        };
        let slot = &mut current.bodies[format as usize][encoding as usize];
        if let Some(body) = slot {
            return Ok(body.clone());
        }
        let text = encode(&current.registry, format)
            .map_err(|_| format!("encoding /metrics as {format:?} failed"))?;
        let body = match encoding {
            Encoding::Identity => Bytes::from(text),
            Encoding::Gzip => Bytes::from(
                gzip(text.as_bytes()).map_err(|e| format!("compressing /metrics: {e}"))?,
            ),
        };
        *slot = Some(body.clone());
        Ok(body)
    }
}

/// gzip at the default level, once per cache change and format: a tenth of the text (13 KB
/// of 140 KB for a calibrated sim DGX H100), for clients that fetch it over a network.
fn gzip(text: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(text.len() / 8),
        flate2::Compression::default(),
    );
    encoder.write_all(text)?;
    encoder.finish()
}

/// Runs every collector on `snapshot`, then the exporter's own families.
pub fn collect(snapshot: &Snapshot) -> Registry {
    let start = Instant::now();
    let mut families = Vec::new();
    let mut results = Vec::with_capacity(COLLECTORS.len());
    for collector in COLLECTORS {
        let began = Instant::now();
        let mut out = Out::new(snapshot);
        let ok = match collector.collect(snapshot, &mut out) {
            Ok(()) => {
                families.append(&mut out.families);
                true
            }
            Err(e) => {
                tracing::warn!(collector = collector.name(), "collector failed: {e}");
                false
            }
        };
        results.push((collector.name(), ok, began.elapsed().as_secs_f64()));
    }
    let mut out = Out::new(snapshot);
    exporter::write(snapshot, &results, start.elapsed().as_secs_f64(), &mut out);
    families.append(&mut out.families);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families)));
    registry
}

/// The registry's text in `format`.
pub fn encode(registry: &Registry, format: Format) -> Result<String, std::fmt::Error> {
    let mut text = String::with_capacity(128 * 1024);
    match format {
        Format::Text => prometheus_client::encoding::prometheus_text::encode(&mut text, registry)?,
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, registry)?,
    }
    Ok(text)
}

/// Metric types used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// A value that goes up and down.
    Gauge,
    /// A value that only goes up (name ends in `_total`).
    Counter,
    /// Labels describing something, value always 1 (name ends in `_info`): a gauge in the
    /// 0.0.4 text, OpenMetrics' info type there.
    Info,
}

/// One family's samples, held until the library encodes them.
#[derive(Debug, Clone)]
pub struct FamilyData {
    name: &'static str,
    kind: Type,
    help: &'static str,
    samples: Vec<(Vec<(String, String)>, f64)>,
}

/// A rendering's families, as the library's collector interface reads them.
#[derive(Debug)]
struct Families(Vec<Arc<FamilyData>>);

impl prometheus_client::collector::Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            // The library appends the type's suffix to the family name.
            let (name, metric_type) = match f.kind {
                Type::Gauge => (f.name, MetricType::Gauge),
                Type::Counter => (suffixless(f.name, "_total"), MetricType::Counter),
                Type::Info => (suffixless(f.name, "_info"), MetricType::Info),
            };
            let mut metric = encoder.encode_descriptor(name, f.help, None, metric_type)?;
            for (labels, value) in &f.samples {
                match (f.kind, whole(*value)) {
                    (Type::Info, _) => metric.encode_info(labels)?,
                    (Type::Gauge, Some(v)) => metric.encode_family(labels)?.encode_gauge(&v)?,
                    (Type::Gauge, None) => metric.encode_family(labels)?.encode_gauge(value)?,
                    (Type::Counter, Some(v)) if v >= 0 => {
                        metric
                            .encode_family(labels)?
                            .encode_counter::<NoLabelSet, _, f64>(&v.unsigned_abs(), None)?
                    }
                    (Type::Counter, _) => metric
                        .encode_family(labels)?
                        .encode_counter::<NoLabelSet, _, f64>(value, None)?,
                }
            }
        }
        Ok(())
    }
}

/// `name` without `suffix`; the names here are written with it.
fn suffixless(name: &'static str, suffix: &str) -> &'static str {
    name.strip_suffix(suffix).unwrap_or(name)
}

/// Whole numbers as integers, so that they print without a fraction (`1`, not `1.0`).
fn whole(v: f64) -> Option<i64> {
    (v.fract() == 0.0 && v.abs() < 1e15).then_some(v as i64)
}

/// Output of one collector.
pub struct Out {
    families: Vec<Arc<FamilyData>>,
    hostname: String,
    source: &'static str,
}

impl Out {
    fn new(snapshot: &Snapshot) -> Out {
        Out {
            families: Vec::new(),
            hostname: snapshot.node_name.clone(),
            source: snapshot.source.as_str(),
        }
    }

    /// Starts a family; it is added with its first sample, so a family without samples
    /// leaves no trace.
    pub fn family(&mut self, name: &'static str, kind: Type, help: &'static str) -> Family<'_> {
        Family {
            out: self,
            name,
            kind,
            help,
            started: false,
        }
    }
}

/// A family being written.
pub struct Family<'a> {
    out: &'a mut Out,
    name: &'static str,
    kind: Type,
    help: &'static str,
    started: bool,
}

impl Family<'_> {
    /// One sample. `hostname` is added, and `backend` (the node's source) unless given. The
    /// value of a [`Type::Info`] sample is 1 (the library writes no other).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let mut all: Vec<(String, String)> = Vec::with_capacity(labels.len() + 2);
        all.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        all.push(("hostname".into(), self.out.hostname.clone()));
        if !labels.iter().any(|(k, _)| *k == "backend") {
            all.push(("backend".into(), self.out.source.into()));
        }
        let families = &mut self.out.families;
        match families.last_mut() {
            // Unshared until the collector is done: `make_mut` copies nothing.
            Some(family) if self.started => Arc::make_mut(family).samples.push((all, value)),
            _ => {
                families.push(Arc::new(FamilyData {
                    name: self.name,
                    kind: self.kind,
                    help: self.help,
                    samples: vec![(all, value)],
                }));
                self.started = true;
            }
        }
    }
}

/// The 0.0.4 text of `snapshot`, as the tests read it.
#[cfg(test)]
pub(crate) fn text(snapshot: &Snapshot) -> String {
    encode(&collect(snapshot), Format::Text).unwrap()
}

#[cfg(test)]
impl Out {
    /// The 0.0.4 text of this collector's families alone, as the tests read it.
    pub(crate) fn text(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Families(self.families)));
        encode(&registry, Format::Text).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn cache() -> Cache {
        Cache::new(
            "n1".into(),
            record::Backend::Sim,
            crate::state::Calibration::default(),
        )
    }

    fn body(rendered: &Rendered, cache: &Cache, format: Format, encoding: Encoding) -> Bytes {
        rendered.get(cache, format, encoding).unwrap()
    }

    #[test]
    fn scrapes_share_a_body_per_format_and_encoding_until_the_cache_changes() {
        let cache = cache();
        let rendered = Rendered::default();
        for format in [Format::Text, Format::OpenMetrics] {
            for encoding in [Encoding::Identity, Encoding::Gzip] {
                let first = body(&rendered, &cache, format, encoding);
                let again = body(&rendered, &cache, format, encoding);
                assert_eq!(first.as_ptr(), again.as_ptr(), "{format:?} {encoding:?}");
            }
        }
        let text = body(&rendered, &cache, Format::Text, Encoding::Identity);
        let gzipped = body(&rendered, &cache, Format::Text, Encoding::Gzip);
        let mut unzipped = Vec::new();
        flate2::read::GzDecoder::new(&gzipped[..])
            .read_to_end(&mut unzipped)
            .unwrap();
        assert_eq!(unzipped, text);
        cache.update(|s| s.running = true);
        let second = body(&rendered, &cache, Format::Text, Encoding::Identity);
        let text = String::from_utf8_lossy(&second);
        assert!(text.contains("meshfit_calibration_in_progress{hostname=\"n1\",backend=\"sim\"} 1"));
    }

    /// Counters and info families as each format names them; the 0.0.4 names and types are
    /// those the agent wrote before the library (issue 11).
    #[test]
    fn counters_and_info_families_follow_each_format() {
        let registry = collect(&cache().snapshot());
        let text = encode(&registry, Format::Text).unwrap();
        for line in [
            "# TYPE meshfit_calibration_runs_total counter\n",
            "meshfit_calibration_runs_total{result=\"success\",hostname=\"n1\",backend=\"sim\"} 0\n",
            "# TYPE meshfit_down_reason_info gauge\n",
            "meshfit_down_reason_info{reason=\"discovering\",hostname=\"n1\",backend=\"sim\"} 1\n",
            "# TYPE meshfit_up gauge\nmeshfit_up{hostname=\"n1\",backend=\"sim\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert!(!text.contains("# EOF"));
        let om = encode(&registry, Format::OpenMetrics).unwrap();
        for line in [
            "# TYPE meshfit_calibration_runs counter\n",
            "meshfit_calibration_runs_total{result=\"success\",hostname=\"n1\",backend=\"sim\"} 0\n",
            "# TYPE meshfit_down_reason info\n",
            "meshfit_down_reason_info{reason=\"discovering\",hostname=\"n1\",backend=\"sim\"} 1\n",
            "# TYPE meshfit_up gauge\nmeshfit_up{hostname=\"n1\",backend=\"sim\"} 0\n",
        ] {
            assert!(om.contains(line), "{line} not in\n{om}");
        }
        assert!(om.ends_with("\n# EOF\n"), "{om}");
    }

    #[test]
    fn values_and_labels_follow_the_text_format() {
        let snapshot = Cache::new(
            "a\"b\\c\nd".into(),
            record::Backend::Sim,
            crate::state::Calibration::default(),
        )
        .snapshot();
        let mut out = Out::new(&snapshot);
        let mut family = out.family("meshfit_test_value", Type::Gauge, "A test.");
        for (i, v) in [1.0, 0.25, f64::NAN, f64::INFINITY, 3.35e12, -2.0]
            .iter()
            .enumerate()
        {
            family.sample(&[("i", &i.to_string())], *v);
        }
        let text = out.text();
        let values: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().1)
            .collect();
        assert_eq!(values, ["1", "0.25", "NaN", "+Inf", "3350000000000", "-2"]);
        assert!(
            text.contains(
                "meshfit_test_value{i=\"0\",hostname=\"a\\\"b\\\\c\\nd\",backend=\"sim\"} 1\n"
            ),
            "{text}"
        );
    }
}
