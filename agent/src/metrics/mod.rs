//! Prometheus metrics, rendered from the cache at scrape time.
//!
//! One [`Collector`] per file, all listed in [`COLLECTORS`]. The registry ([`render`]) times
//! each one and reports its success and duration, as node_exporter's
//! `node_scrape_collector_success{collector}` does: a failing collector is logged and
//! reports 0, and the others still report. Collectors read only a [`Snapshot`], so a scrape
//! never waits on NVML or on a benchmark. Every series carries `hostname` and `backend`.
//!
//! The text format is written here rather than through a client library: the families are
//! fixed, the values already cached, and a string writer keeps the scrape cheap and the
//! binary small.

mod calibration;
mod counters;
mod exporter;
mod fabric;
mod process;
mod topology;

use crate::cache::{Cache, Snapshot};
use axum::body::Bytes;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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

/// The last `/metrics` text and the cache generation it shows. The cache changes every
/// sample interval, and scrapes in between share one rendering (a reference count, not a
/// copy), so a burst of scrapes costs next to nothing.
#[derive(Debug, Default)]
pub struct Rendered(Mutex<Option<(u64, Bytes)>>);

impl Rendered {
    /// The text for the cache as it is now.
    pub fn get(&self, cache: &Cache) -> Bytes {
        let snapshot = cache.snapshot();
        let mut last = match self.0.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        match &*last {
            Some((generation, text)) if *generation == snapshot.generation => text.clone(),
            _ => {
                let text = Bytes::from(render(&snapshot));
                *last = Some((snapshot.generation, text.clone()));
                text
            }
        }
    }
}

/// Renders `/metrics`.
pub fn render(snapshot: &Snapshot) -> String {
    let start = Instant::now();
    let mut text = String::with_capacity(64 * 1024);
    let mut results = Vec::with_capacity(COLLECTORS.len());
    for collector in COLLECTORS {
        let began = Instant::now();
        let mut out = Out::new(snapshot);
        let ok = match collector.collect(snapshot, &mut out) {
            Ok(()) => {
                text.push_str(&out.text);
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
    text.push_str(&out.text);
    text
}

/// Metric types used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// A value that goes up and down.
    Gauge,
    /// A value that only goes up (name ends in `_total`).
    Counter,
}

/// Output of one collector.
pub struct Out {
    text: String,
    hostname: String,
    source: &'static str,
}

impl Out {
    fn new(snapshot: &Snapshot) -> Out {
        Out {
            text: String::new(),
            hostname: escape_label(&snapshot.node_name),
            source: snapshot.source.as_str(),
        }
    }

    /// Starts a family; its HELP and TYPE lines are written with its first sample, so a
    /// family without samples leaves no trace.
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
    /// One sample. `hostname` is added, and `backend` (the node's source) unless given.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let t = &mut self.out.text;
        if !self.started {
            let kind = match self.kind {
                Type::Gauge => "gauge",
                Type::Counter => "counter",
            };
            let _ = writeln!(t, "# HELP {} {}", self.name, self.help);
            let _ = writeln!(t, "# TYPE {} {kind}", self.name);
            self.started = true;
        }
        t.push_str(self.name);
        t.push('{');
        for (k, v) in labels {
            let _ = write!(t, "{k}=\"{}\",", escape_label(v));
        }
        let _ = write!(t, "hostname=\"{}\"", self.out.hostname);
        if !labels.iter().any(|(k, _)| *k == "backend") {
            let _ = write!(t, ",backend=\"{}\"", self.out.source);
        }
        t.push_str("} ");
        write_value(t, value);
        t.push('\n');
    }
}

/// Label values escape backslash, double quote and newline.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Whole numbers print without a fraction; NaN and infinities as the format spells them.
fn write_value(t: &mut String, v: f64) {
    let _ = if v.is_nan() {
        write!(t, "NaN")
    } else if v.is_infinite() {
        write!(t, "{}Inf", if v > 0.0 { "+" } else { "-" })
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        write!(t, "{}", v as i64)
    } else {
        write!(t, "{v}")
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_share_a_rendering_until_the_cache_changes() {
        let cache = Cache::new(
            "n1".into(),
            record::Backend::Sim,
            crate::state::Calibration::default(),
        );
        let rendered = Rendered::default();
        let first = rendered.get(&cache);
        assert_eq!(first.as_ptr(), rendered.get(&cache).as_ptr());
        cache.update(|s| s.running = true);
        let second = rendered.get(&cache);
        let text = String::from_utf8_lossy(&second);
        assert!(text.contains("meshfit_calibration_in_progress{hostname=\"n1\",backend=\"sim\"} 1"));
    }

    #[test]
    fn values_and_labels_follow_the_text_format() {
        let mut t = String::new();
        for v in [1.0, 0.25, f64::NAN, f64::INFINITY, 3.35e12, 1e20] {
            write_value(&mut t, v);
            t.push(' ');
        }
        assert_eq!(t, "1 0.25 NaN +Inf 3350000000000 100000000000000000000 ");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
