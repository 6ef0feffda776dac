//! The fleet path (issue 28, item 1). Past a few hundred nodes every node's raw series are
//! more than a tuner should read (about 900 a node: 11M at 12,500 nodes), so Prometheus
//! reduces them where they live. For each family it is asked for the per-point median and the
//! fleet aggregate (`--aggregate`) per GPU model, and for the nodes that fall behind their
//! model's median by more than the straggler threshold; a reply grows with GPU models x points
//! plus stragglers, not with nodes. The fleet then prices as one node per GPU model,
//! `fleet/<model>`, whose records are the aggregate, and the stragglers are named as the raw
//! path names them.

use std::collections::BTreeMap;

use record::{busbw_factor, Family, Kind, Record};

use super::{
    collective_record, gemm_record, hbm_record, label, pair_record, value, PromSource, Sample,
};
use crate::error::TunerError;
use crate::fit::fleet::{Aggregate, Straggler};
use crate::ingest::node_gpus::NodeGpus;
use crate::ingest::snapshot::{FleetSection, GpuInfo, Node, Snapshot, TimeRange};
use crate::ingest::{FleetSummary, Measurements};

/// How the fleet is read from Prometheus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetQuery {
    /// Every node's series up to [`RAW_NODES`] nodes, reduced in Prometheus past that.
    Auto,
    /// Every node's series, whatever the fleet's size.
    Raw,
    /// Reduced in Prometheus at query time, whatever the fleet's size.
    Reduced,
    /// The fleet's curves as the chart's recording rules keep them (`meshfit.fleet.curves`),
    /// whatever the fleet's size; refused, saying why, where they cannot stand for the fleet.
    Recorded,
}

/// The most nodes `auto` reads series by series: 128 nodes are about 115,000 series, a reply
/// of about 15 MB, which the raw path reads in about a second.
pub const RAW_NODES: usize = 128;

/// What the fleet path needs of the flags: how to aggregate, what a straggler is, which nodes
/// to leave out and how old a node's calibration may be.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Raw or reduced.
    pub mode: FleetQuery,
    /// How node figures become the fleet's.
    pub aggregate: Aggregate,
    /// A node more than this fraction behind its model's median is a straggler.
    pub threshold: f64,
    /// Nodes left out by name.
    pub exclude: Vec<String>,
    /// Leave out every straggler.
    pub exclude_degraded: bool,
    /// Nodes whose last calibration (fabric run, for inter-node figures) is older are left
    /// out, seconds.
    pub max_age_s: Option<f64>,
}

/// Fleet queries sent at once: Prometheus runs up to 20 at a time by default
/// (`--query.max-concurrency`), and others share it.
const PARALLEL: usize = 8;

/// The labels of a census sample.
const CENSUS: &[&str] = &["cluster", "model_name"];

/// One family as the fleet queries read it.
struct Spec {
    family: Family,
    /// Matchers that narrow the family to what this spec reads.
    only: &'static str,
    /// The labels of one point, the same on every node.
    point: &'static [&'static str],
    /// The labels a straggler is judged per (besides the node and its model).
    judged_per: &'static [&'static str],
    /// Matchers for the points a node is judged on.
    judged_on: &'static str,
    /// Times (lower is better) rather than rates.
    cost: bool,
    /// The labels one node's figure keeps, where a node's series are reduced before the fleet
    /// is: its best copy rate, its best pair per rail.
    per_node: Option<&'static [&'static str]>,
    /// What the raw path stamps the family with.
    stamp: Family,
    /// The recording rule that keeps the family's fleet curve, less its aggregate
    /// (`:max`/`:min` for the slowest, `:median`).
    recorded: &'static str,
}

/// The families the fleet prices, with the labels the records read.
const SPECS: [Spec; 5] = [
    Spec {
        family: Family::CollectiveTime,
        only: r#"scope="intra_node""#,
        point: &[
            "collective",
            "scope",
            "ranks",
            "size_bytes",
            "ranks_per_node",
            "backend",
        ],
        judged_per: &["collective", "scope", "ranks", "ranks_per_node"],
        // Bandwidth-bound sizes, 1 MB and up: labels compare as text, so by digit count.
        // Below, launch latency and its jitter decide the time, not the links.
        judged_on: r#"size_bytes=~"[0-9]{7,}""#,
        cost: true,
        per_node: None,
        stamp: Family::CalibrationLastSuccess,
        recorded: "model_size:meshfit_collective_time_seconds",
    },
    Spec {
        family: Family::CollectiveTime,
        only: r#"scope="inter_node""#,
        // A shape run inside one NVL72 rack (NVLink) and across racks (the NICs) are two
        // points: the fleet figure must not mix them.
        point: &[
            "collective",
            "scope",
            "ranks",
            "size_bytes",
            "ranks_per_node",
            "nvlink_domains",
            "backend",
        ],
        judged_per: &[
            "collective",
            "scope",
            "ranks",
            "ranks_per_node",
            "nvlink_domains",
        ],
        judged_on: r#"size_bytes=~"[0-9]{7,}""#,
        cost: true,
        per_node: None,
        stamp: Family::FabricLastRun,
        recorded: "model_size:meshfit_collective_time_seconds",
    },
    Spec {
        family: Family::GemmFlops,
        only: "",
        point: &["m", "n", "k", "dtype", "backend"],
        // One GEMM figure per node, its worst shape and type, as the raw path names one.
        judged_per: &[],
        // The shapes the compute curve is fitted to, 1000 and up in every dimension, in bf16:
        // a GPU slow in one type is slow in all, and the other three types would quadruple
        // the query (224 GEMM series a node, the most of any family).
        judged_on: r#"dtype="bf16",m=~"[0-9]{4,}",n=~"[0-9]{4,}",k=~"[0-9]{4,}""#,
        cost: false,
        per_node: None,
        stamp: Family::CalibrationLastSuccess,
        recorded: "model_shape:meshfit_gemm_flops_per_second",
    },
    Spec {
        family: Family::MemoryBandwidth,
        only: r#"path=~"hbm_copy|hbm""#,
        point: &["path", "backend"],
        judged_per: &["path"],
        judged_on: "",
        cost: false,
        per_node: Some(&["hostname", "model_name", "path", "backend"]),
        stamp: Family::CalibrationLastSuccess,
        recorded: "model_path:meshfit_memory_bandwidth_bytes_per_second",
    },
    Spec {
        family: Family::FabricPairBusbw,
        only: "",
        point: &["backend"],
        judged_per: &["gpu"],
        judged_on: "",
        cost: false,
        // A healthy NIC reaches full speed with at least one peer: its best pair.
        per_node: Some(&["hostname", "model_name", "gpu", "backend"]),
        stamp: Family::FabricLastRun,
        recorded: "model:meshfit_fabric_pair_busbw_bytes_per_second",
    },
];

/// Every label a fleet query keeps.
const KEPT: &[&str] = &[
    "hostname",
    "model_name",
    "collective",
    "scope",
    "ranks",
    "size_bytes",
    "ranks_per_node",
    "nvlink_domains",
    "backend",
    "m",
    "n",
    "k",
    "dtype",
    "path",
    "gpu",
];

/// How the pseudo-nodes that stand for a GPU model's nodes are named.
pub const FLEET_PREFIX: &str = "fleet/";

/// The pseudo-node that stands for a GPU model's nodes.
pub fn fleet_node(model: &str) -> String {
    format!("{FLEET_PREFIX}{model}")
}

/// `s` as a PromQL string literal's contents: backslashes and quotes escaped.
fn quoted(s: &str) -> String {
    s.replace('\\', r"\\").replace('"', "\\\"")
}

/// A matcher that leaves out the nodes named, as an RE2 alternation of literal names.
fn not_these(nodes: &[String]) -> String {
    let alternatives: Vec<String> = nodes
        .iter()
        .map(|n| {
            n.chars()
                .flat_map(|c| {
                    let meta = r"\.+*?()|[]{}^$".contains(c);
                    meta.then_some('\\').into_iter().chain(std::iter::once(c))
                })
                .collect()
        })
        .collect();
    format!(r#"hostname!~"{}""#, quoted(&alternatives.join("|")))
}

fn joined(matchers: &[&str]) -> String {
    matchers
        .iter()
        .filter(|m| !m.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(",")
}

/// The fleet's aggregate of the points in `inner`, per `by`.
fn aggregate_expr(aggregate: Aggregate, cost: bool, by: &str, inner: &str) -> String {
    match (aggregate, cost) {
        (Aggregate::Slowest, true) => format!("max by ({by}) ({inner})"),
        (Aggregate::Slowest, false) => format!("min by ({by}) ({inner})"),
        // The worst tenth is left out: the 90th percentile of times, the 10th of rates.
        (Aggregate::P10, true) => format!("quantile by ({by}) (0.9, {inner})"),
        (Aggregate::P10, false) => format!("quantile by ({by}) (0.1, {inner})"),
        (Aggregate::Median, _) => median_expr(by, inner),
    }
}

fn median_expr(by: &str, inner: &str) -> String {
    format!("quantile by ({by}) (0.5, {inner})")
}

/// The key of a point: its GPU model and point labels, as the reply gave them.
fn point_key(s: &Sample, point: &[&str]) -> Vec<String> {
    std::iter::once("model_name")
        .chain(point.iter().copied())
        .map(|l| label(s, l).unwrap_or("").to_string())
        .collect()
}

/// The fleet queries of one fetch.
struct Reducer<'a> {
    src: &'a PromSource,
    client: &'a reqwest::blocking::Client,
    opts: &'a FleetOptions,
    now: f64,
    /// The GPU model of every node, where the census found one only: the series then need
    /// no join to their node's `meshfit_gpu_info`, which doubles what Prometheus reads.
    only_model: Option<String>,
    /// The queries run and the samples they returned, for the notes.
    queries: usize,
    samples: usize,
}

impl Reducer<'_> {
    /// Runs `queries` at once, [`PARALLEL`] at a time: Prometheus evaluates each on its own
    /// core, so the fetch takes about its slowest query, not their sum. The replies come in
    /// the queries' order; the first query that fails fails them all.
    fn run_all(&mut self, queries: &[String]) -> Result<Vec<Vec<Sample>>, TunerError> {
        let mut replies = Vec::with_capacity(queries.len());
        for batch in queries.chunks(PARALLEL) {
            let (src, client) = (self.src, self.client);
            let batch: Vec<Result<Vec<Sample>, TunerError>> = std::thread::scope(|scope| {
                let running: Vec<_> = batch
                    .iter()
                    .map(|q| scope.spawn(move || src.run(client, q, KEPT)))
                    .collect();
                running
                    .into_iter()
                    .map(|t| {
                        t.join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .collect()
            });
            for reply in batch {
                let samples = reply?;
                self.queries += 1;
                self.samples += samples.len();
                replies.push(samples);
            }
        }
        Ok(replies)
    }

    /// The threshold before which a stamp is stale, when `--max-age` is given.
    fn fresh_after(&self) -> Option<f64> {
        self.opts.max_age_s.map(|age| self.now - age)
    }

    /// The nodes' GPU models, one series per node and model (value 1).
    fn models(&self) -> String {
        format!(
            "group by (hostname, model_name) ({})",
            self.src.series(Family::GpuInfo.as_str(), "")
        )
    }

    /// `spec`'s series joined with their node's GPU model, narrowed by `extra`, from fresh
    /// nodes not in `without`, reduced per node where the spec says.
    fn series(&self, spec: &Spec, extra: &str, without: &[String]) -> String {
        let leave_out = (!without.is_empty()).then(|| not_these(without));
        let matchers = joined(&[spec.only, extra, leave_out.as_deref().unwrap_or("")]);
        let mut x = self.with_model(&self.src.series(spec.family.as_str(), &matchers));
        if let Some(after) = self.fresh_after() {
            x = format!(
                "({x} and on (hostname) ({} > {after}))",
                self.src.series(spec.stamp.as_str(), "")
            );
        }
        match spec.per_node {
            Some(by) => format!("max by ({}) ({x})", by.join(", ")),
            None => x,
        }
    }

    /// `series` with its node's GPU model as a label, where the fleet has more than one.
    fn with_model(&self, series: &str) -> String {
        match self.only_model {
            Some(_) => series.to_string(),
            None => format!(
                "({series} * on (hostname) group_left (model_name) {})",
                self.models()
            ),
        }
    }

    /// The GPU model a reduced sample stands for.
    fn model_of(&self, s: &Sample) -> String {
        match &self.only_model {
            Some(model) => model.clone(),
            None => label(s, "model_name").unwrap_or("").to_string(),
        }
    }

    /// `--aggregate` as the notes name it.
    fn aggregate_name(&self) -> String {
        format!("{:?}", self.opts.aggregate).to_lowercase()
    }

    fn by(spec: &Spec) -> String {
        std::iter::once("model_name")
            .chain(spec.point.iter().copied())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The fleet's aggregate per point, over the nodes not in `without`.
    fn aggregate(&self, spec: &Spec, without: &[String]) -> String {
        let inner = self.series(spec, "", without);
        aggregate_expr(self.opts.aggregate, spec.cost, &Self::by(spec), &inner)
    }

    /// The median per point over every node.
    fn median(&self, spec: &Spec) -> String {
        median_expr(&Self::by(spec), &self.series(spec, "", &[]))
    }

    /// Each node's worst point per judged group, as its ratio to the median there, where that
    /// ratio passes the threshold.
    fn stragglers(&self, spec: &Spec) -> String {
        let x = self.series(spec, spec.judged_on, &[]);
        let by = Self::by(spec);
        let ratio = format!("{x} / on ({by}) group_left () {}", median_expr(&by, &x));
        let per: Vec<&str> = ["hostname", "model_name"]
            .into_iter()
            .chain(spec.judged_per.iter().copied())
            .collect();
        let t = self.opts.threshold;
        if spec.cost {
            format!(
                "topk by ({}) (1, {ratio} > {})",
                per.join(", "),
                1.0 / (1.0 - t)
            )
        } else {
            format!("bottomk by ({}) (1, {ratio} < {})", per.join(", "), 1.0 - t)
        }
    }

    /// The oldest fresh stamp per GPU model of `family`, and, under `--max-age`, the count of
    /// nodes whose stamp is stale.
    fn stamps(&self, family: Family) -> [String; 2] {
        let stamp = self.with_model(&self.src.series(family.as_str(), ""));
        match self.fresh_after() {
            Some(after) => [
                format!("min by (model_name) ({stamp} > {after})"),
                format!("count({stamp} <= {after})"),
            ],
            // A query that returns nothing, for the count of stale nodes.
            None => [
                format!("min by (model_name) ({stamp})"),
                "vector(0) > 1".into(),
            ],
        }
    }

    /// The oldest stamp per GPU model from a [`Reducer::stamps`] reply.
    fn oldest(&self, samples: &[Sample]) -> BTreeMap<String, f64> {
        samples
            .iter()
            .filter_map(|s| Some((self.model_of(s), value(s)?)))
            .collect()
    }
}

/// GPU models and node counts, per cluster.
struct Census {
    /// Nodes per GPU model.
    models: BTreeMap<String, usize>,
}

impl Census {
    fn nodes(&self) -> usize {
        self.models.values().sum()
    }
}

impl PromSource {
    /// Reads the fleet as `opts.mode` says: raw below [`RAW_NODES`] nodes in `auto`, reduced
    /// in Prometheus past that. Series from more than one cluster are refused by name.
    pub fn fetch_fleet(
        &self,
        now: f64,
        opts: &FleetOptions,
    ) -> Result<(Measurements, Snapshot), TunerError> {
        let client = self.client()?;
        let census = self.census(&client)?;
        let reduce = match opts.mode {
            FleetQuery::Auto => census.nodes() > RAW_NODES,
            FleetQuery::Raw => false,
            FleetQuery::Reduced | FleetQuery::Recorded => true,
        };
        if !reduce {
            return self.fetch_raw(&client, now);
        }
        let mut r = Reducer {
            src: self,
            client: &client,
            opts,
            now,
            only_model: (census.models.len() == 1)
                .then(|| census.models.keys().next().cloned())
                .flatten(),
            queries: 1,
            samples: census.models.len(),
        };
        let found = match opts.mode {
            FleetQuery::Reduced => reduced(&mut r)?,
            FleetQuery::Recorded => {
                recorded::fetch(&mut r, &census)?.map_err(|why| TunerError::Prometheus {
                    url: self.redacted_url(),
                    query: recorded::CURVES.into(),
                    message: format!("{why} (--fleet-query recorded)"),
                })?
            }
            // Recorded where the curves stand for the fleet, reduced at query time where not.
            FleetQuery::Auto | FleetQuery::Raw => match recorded::fetch(&mut r, &census)? {
                Ok(found) => found,
                Err(why) => {
                    let mut found = reduced(&mut r)?;
                    found
                        .notes
                        .push(format!("recorded fleet curves not used: {why}"));
                    found
                }
            },
        };
        assemble(&r, &census, found)
    }

    /// The GPU models and their node counts; an error naming the clusters where the series
    /// come from more than one (a `cluster` label, from Prometheus' external labels or the
    /// targets'), which no fleet figure may mix.
    fn census(&self, client: &reqwest::blocking::Client) -> Result<Census, TunerError> {
        let q = format!(
            "count by (cluster, model_name) (group by (hostname, cluster, model_name) ({}))",
            self.series(Family::GpuInfo.as_str(), "")
        );
        let samples = self.run(client, &q, CENSUS)?;
        let mut clusters: BTreeMap<&str, usize> = BTreeMap::new();
        let mut models: BTreeMap<String, usize> = BTreeMap::new();
        for s in &samples {
            let n = value(s).unwrap_or(0.0) as usize;
            *clusters
                .entry(label(s, "cluster").unwrap_or(""))
                .or_default() += n;
            *models
                .entry(label(s, "model_name").unwrap_or("").to_string())
                .or_default() += n;
        }
        if clusters.len() > 1 {
            let named: Vec<String> = clusters
                .iter()
                .map(|(c, n)| match *c {
                    "" => format!("{n} nodes with no cluster label"),
                    c => format!("cluster=\"{c}\" ({n} nodes)"),
                })
                .collect();
            let first = clusters.keys().find(|c| !c.is_empty()).unwrap_or(&"");
            return Err(TunerError::Prometheus {
                url: self.redacted_url(),
                query: q,
                message: format!(
                    "the series come from {} clusters, {}: one fleet's figures cannot mix \
                     them; scope the queries with --selector '{{cluster=\"{first}\"}}'",
                    clusters.len(),
                    named.join(", ")
                ),
            });
        }
        Ok(Census { models })
    }
}

/// A record of the pseudo-node `node` from an aggregate sample of `spec`.
fn fleet_record(spec: &Spec, s: &Sample, node: &str) -> Option<Record> {
    let mut s = Sample {
        metric: s.metric.clone(),
        value: s.value.clone(),
    };
    s.metric.retain(|(k, _)| *k != "hostname" && *k != "gpu");
    s.metric.push(("hostname", node.to_string()));
    s.metric.push(("gpu", "0".to_string()));
    match spec.family {
        Family::CollectiveTime => collective_record(&s),
        Family::GemmFlops => gemm_record(&s),
        Family::MemoryBandwidth => hbm_record(&s),
        Family::FabricPairBusbw => {
            // One end and the other are the fleet: its figure counts once per end, as a
            // node's best pair does.
            s.metric.push(("peer_node", node.to_string()));
            pair_record(&s)
        }
        _ => None,
    }
}

/// A straggler from a sample of [`Reducer::stragglers`], against the median per point.
fn straggler(spec: &Spec, s: &Sample, medians: &BTreeMap<Vec<String>, f64>) -> Option<Straggler> {
    let ratio = value(s)?;
    let median = *medians.get(&point_key(s, spec.point))?;
    let node = label(s, "hostname")?.to_string();
    let (what, fleet_median, own) = match spec.family {
        Family::CollectiveTime => {
            let kind: Kind = label(s, "collective")?.parse().ok()?;
            let ranks: u32 = label(s, "ranks")?.parse().ok()?;
            let bytes: f64 = label(s, "size_bytes")?.parse().ok()?;
            let busbw = bytes * busbw_factor(kind, ranks).unwrap_or(1.0) / median;
            // Named as the raw path's fit names it.
            let within = match label(s, "nvlink_domains") {
                Some("1") => " in one NVLink domain",
                _ => "",
            };
            (
                format!(
                    "{} x{ranks} {}{within} busbw at {bytes} bytes",
                    kind.as_str(),
                    label(s, "scope")?
                ),
                busbw,
                busbw / ratio,
            )
        }
        Family::GemmFlops => (
            format!(
                "GEMM {} rate at {}x{}x{}",
                label(s, "dtype")?,
                label(s, "m")?,
                label(s, "n")?,
                label(s, "k")?
            ),
            median,
            median * ratio,
        ),
        Family::MemoryBandwidth => ("HBM bandwidth".to_string(), median, median * ratio),
        Family::FabricPairBusbw => (
            format!(
                "inter-node send_recv pairs through NIC {} (busbw, best peer)",
                label(s, "gpu")?
            ),
            median,
            median * ratio,
        ),
        _ => return None,
    };
    Some(Straggler {
        node,
        what,
        value: own,
        fleet_median,
    })
}

/// One straggler per node, its worst figure, naming how many more fall behind: a slow GPU
/// shows on every GEMM shape and collective it takes part in, and a fleet's report names
/// nodes, not each of their figures.
fn worst_per_node(stragglers: Vec<Straggler>) -> Vec<Straggler> {
    let mut per_node: BTreeMap<String, (Straggler, usize)> = BTreeMap::new();
    for s in stragglers {
        match per_node.get_mut(&s.node) {
            Some((worst, more)) => {
                *more += 1;
                if s.shortfall() > worst.shortfall() {
                    *worst = s;
                }
            }
            None => {
                per_node.insert(s.node.clone(), (s, 0));
            }
        }
    }
    per_node
        .into_values()
        .map(|(mut worst, more)| {
            if more > 0 {
                worst.what = format!(
                    "{} (and {more} other figure{} beyond the threshold)",
                    worst.what,
                    if more > 1 { "s" } else { "" }
                );
            }
            worst
        })
        .collect()
}

/// The oldest stamp of `calibrated` and `fabric` (as [`Reducer::oldest`] gives them), or now.
fn oldest_stamp(
    r: &Reducer,
    calibrated: &BTreeMap<String, f64>,
    fabric: &BTreeMap<String, f64>,
) -> f64 {
    calibrated
        .values()
        .chain(fabric.values())
        .fold(r.now, |a, &b| a.min(b))
}

/// Records of the pseudo-nodes from aggregate replies in [`SPECS`]' order, each stamped with
/// its model's oldest calibration (`calibrated`) or fabric run (`fabric`).
fn fleet_records(
    r: &Reducer,
    replies: &[Vec<Sample>],
    calibrated: &BTreeMap<String, f64>,
    fabric: &BTreeMap<String, f64>,
) -> Vec<Record> {
    let mut records = Vec::new();
    for (spec, samples) in SPECS.iter().zip(replies) {
        let stamps = if spec.stamp == Family::FabricLastRun {
            fabric
        } else {
            calibrated
        };
        for s in samples {
            let model = r.model_of(s);
            let node = fleet_node(&model);
            if let Some(mut rec) = fleet_record(spec, s, &node) {
                rec.timestamp = stamps.get(&model).copied();
                if rec.validate_at(r.now).is_ok() {
                    records.push(rec);
                }
            }
        }
    }
    records
}

/// The reduced fetch: stragglers first (which `--exclude-degraded` leaves out), then the
/// aggregate over the nodes kept, and over every node where some are left out (what keeping
/// them would cost).
fn reduced(r: &mut Reducer) -> Result<Found, TunerError> {
    // One round for what every node is judged by, one for the aggregate of those kept.
    let mut queries: Vec<String> = SPECS.iter().map(|spec| r.median(spec)).collect();
    queries.extend(SPECS.iter().map(|spec| r.stragglers(spec)));
    queries.extend(r.stamps(Family::CalibrationLastSuccess));
    queries.extend(r.stamps(Family::FabricLastRun));
    let replies = r.run_all(&queries)?;
    let (medians, rest) = replies.split_at(SPECS.len());
    let (behind, stamps) = rest.split_at(SPECS.len());
    let mut stragglers: Vec<Straggler> = Vec::new();
    for ((spec, median), behind) in SPECS.iter().zip(medians).zip(behind) {
        let m: BTreeMap<Vec<String>, f64> = median
            .iter()
            .filter_map(|s| Some((point_key(s, spec.point), value(s)?)))
            .collect();
        stragglers.extend(behind.iter().filter_map(|s| straggler(spec, s, &m)));
    }
    let count = |samples: &[Sample]| samples.iter().filter_map(value).sum::<f64>() as usize;
    let (calibrated, stale) = (r.oldest(&stamps[0]), count(&stamps[1]));
    let (fabric, fabric_stale) = (r.oldest(&stamps[2]), count(&stamps[3]));
    let stragglers = worst_per_node(stragglers);
    let mut excluded: Vec<(String, String)> = r
        .opts
        .exclude
        .iter()
        .map(|n| (n.clone(), "--exclude".to_string()))
        .collect();
    if r.opts.exclude_degraded {
        for s in &stragglers {
            if !excluded.iter().any(|(n, _)| *n == s.node) {
                let why = format!(
                    "{} {:.0}% below the fleet median",
                    s.what,
                    s.shortfall() * 100.0
                );
                excluded.push((s.node.clone(), why));
            }
        }
    }
    let without: Vec<String> = excluded.iter().map(|(n, _)| n.clone()).collect();
    let mut queries: Vec<String> = SPECS.iter().map(|s| r.aggregate(s, &without)).collect();
    if !without.is_empty() {
        queries.extend(SPECS.iter().map(|s| r.aggregate(s, &[])));
    }
    let replies = r.run_all(&queries)?;
    let (kept, all) = replies.split_at(SPECS.len());
    let mut notes = Vec::new();
    if stale + fabric_stale > 0 {
        notes.push(format!(
            "{stale} nodes' calibrations and {fabric_stale} nodes' fabric runs are older than \
             --max-age: those nodes are left out of the fleet's figures"
        ));
    }
    Ok(Found {
        kept: fleet_records(r, kept, &calibrated, &fabric),
        all: (!all.is_empty()).then(|| fleet_records(r, all, &calibrated, &fabric)),
        stragglers,
        excluded,
        oldest: oldest_stamp(r, &calibrated, &fabric),
        how: format!(
            "reduced in Prometheus to their {} per point and GPU model",
            r.aggregate_name()
        ),
        notes,
    })
}

/// What a fleet fetch found, before it becomes measurements and a snapshot.
struct Found {
    /// The pseudo-nodes' records over the nodes kept.
    kept: Vec<Record>,
    /// Over every node, where some were left out.
    all: Option<Vec<Record>>,
    stragglers: Vec<Straggler>,
    /// Nodes left out, and why.
    excluded: Vec<(String, String)>,
    /// The oldest of the calibrations and fabric runs the records stand on.
    oldest: f64,
    /// How the fleet was read, for the note: "reduced in Prometheus to ...".
    how: String,
    notes: Vec<String>,
}

/// The measurements and the compact snapshot of what a fetch `found`.
fn assemble(
    r: &Reducer,
    census: &Census,
    found: Found,
) -> Result<(Measurements, Snapshot), TunerError> {
    let Found {
        kept,
        all,
        stragglers,
        excluded,
        oldest,
        how,
        notes,
    } = found;
    let mut m = Measurements::default();
    let what = r.src.described();
    let mut nodes: Vec<Node> = Vec::new();
    let mut gpus = NodeGpus::default();
    for model in census.models.keys() {
        let name = fleet_node(model);
        gpus.list(&name, 0, model, &what)
            .expect("one pseudo-node per GPU model");
        nodes.push(Node {
            name: name.clone(),
            gpus: vec![GpuInfo {
                index: 0,
                model: model.clone(),
            }],
            links: Vec::new(),
            records: kept
                .iter()
                .filter(|rec| rec.group.node.as_deref() == Some(name.as_str()))
                .cloned()
                .collect(),
        });
    }
    let fleet_nodes = census.nodes();
    let per_model: Vec<String> = census
        .models
        .iter()
        .map(|(model, n)| format!("{n} of {model}"))
        .collect();
    m.notes.push(format!(
        "fleet query: {fleet_nodes} nodes ({}) {how}, {} stragglers named ({} queries, {} \
         series read; --fleet-query raw reads every node's series)",
        per_model.join(", "),
        stragglers.len(),
        r.queries,
        r.samples
    ));
    m.notes.extend(notes);
    m.add_gpus(gpus)?;
    m.sources.push(format!(
        "{what} (fleet of {fleet_nodes} nodes reduced to {} records)",
        kept.len()
    ));
    let section = FleetSection {
        nodes: census.models.clone(),
        aggregate: r.opts.aggregate,
        stragglers,
        excluded,
    };
    m.records = kept;
    m.fleet = Some(FleetSummary {
        section: section.clone(),
        all,
    });
    let snapshot = Snapshot::compact(
        what,
        r.now,
        TimeRange {
            start: oldest,
            end: r.now,
        },
        nodes,
        section,
    );
    Ok((m, snapshot))
}

mod recorded;
#[cfg(test)]
mod tests;
