//! The fleet as the chart's recording rules keep it (issue 28). The query-time reduction reads
//! every size and shape of every node, about 400 series per 8-GPU node: at 12,500 nodes that
//! is minutes of Prometheus' time per query, whatever the reply's size. `meshfit.fleet.curves`
//! records the same reductions (each GPU model's slowest and median node per point) every 30
//! minutes, so the fleet's curves are a few hundred series to read. Stragglers are judged as
//! the alerts judge them: each node's peak busbw per collective, each GPU's peak GEMM rate per
//! dtype and each rail's median over its peers, against its model's median, all recorded by
//! the `meshfit.fleet.*` groups.
//!
//! The curves stand for every node of the cluster, so they are read only where that is the
//! fleet asked for: no node left out (`--exclude`, `--exclude-degraded`, `--max-age`), an
//! aggregate the rules record, and the census's node count per GPU model. Elsewhere the caller
//! reduces at query time and says why.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    label, value, worst_per_node, Census, Found, Reducer, Sample, Straggler, TunerError, SPECS,
};
use crate::fit::fleet::Aggregate;
use record::Family;

/// The rule group the curves come from, as errors and notes name it.
pub(super) const CURVES: &str = "meshfit.fleet.curves";

/// How far back the recorded series are read at least: two evaluations of the 30-minute group.
const LOOKBACK: Duration = Duration::from_secs(3600);

/// Nodes per GPU model that the recorded curves stand on.
const NODES: &str = "model:meshfit_node_gpu_model_info:nodes";

/// When the curves were recorded, per GPU model.
const RECORDED_AT: &str = "model:meshfit_fleet_curves_recorded:timestamp_seconds";

/// A figure each node is judged by: the node's recorded series, its model's median and the
/// labels that pair them.
struct Judged {
    node: NodeSeries,
    fleet: &'static str,
    on: &'static [&'static str],
    /// The figure as the straggler list names it.
    what: fn(&Sample) -> Option<String>,
}

/// What is read of each node for a [`Judged`] figure.
enum NodeSeries {
    /// The node's figure over its model's median, recorded by `meshfit.fleet.*` as the alert's
    /// input: Prometheus filters it without joining each node's series to its median, 3 to 8
    /// times faster for the 400,000 GEMM series of 12,500 nodes.
    Ratio(&'static str),
    /// The node's own figure, where no rule records its ratio.
    Figure(&'static str),
}

const JUDGED: [Judged; 3] = [
    Judged {
        node: NodeSeries::Ratio(
            "hostname_collective:meshfit_collective_busbw_bytes_per_second:ratio_to_fleet",
        ),
        fleet: "fleet_collective:meshfit_collective_busbw_bytes_per_second:median",
        on: &[
            "cluster",
            "model_name",
            "collective",
            "scope",
            "ranks",
            "ranks_per_node",
            "nvlink_domains",
            "backend",
        ],
        what: |s| {
            let within = match label(s, "nvlink_domains") {
                Some("1") => " in one NVLink domain",
                _ => "",
            };
            Some(format!(
                "{} x{} {}{within} peak busbw",
                label(s, "collective")?,
                label(s, "ranks")?,
                label(s, "scope")?
            ))
        },
    },
    Judged {
        node: NodeSeries::Ratio("hostname_gpu_dtype:meshfit_gemm_flops_per_second:ratio_to_fleet"),
        fleet: "fleet_dtype:meshfit_gemm_flops_per_second:median",
        on: &["cluster", "model_name", "dtype", "backend"],
        what: |s| {
            Some(format!(
                "GEMM {} peak rate of GPU {}",
                label(s, "dtype")?,
                label(s, "gpu")?
            ))
        },
    },
    Judged {
        node: NodeSeries::Figure("hostname_rail:meshfit_fabric_pair_busbw_bytes_per_second:median"),
        fleet: "model_rail:meshfit_fabric_pair_busbw_bytes_per_second:median",
        on: &["cluster", "model_name", "gpu", "backend"],
        what: |s| {
            Some(format!(
                "inter-node send_recv pairs through NIC {} (busbw, median over peers)",
                label(s, "gpu")?
            ))
        },
    },
];

/// Why the recorded curves cannot stand for the fleet these options ask for, if they cannot.
fn unusable(r: &Reducer) -> Option<String> {
    let o = r.opts;
    if o.aggregate == Aggregate::P10 {
        Some(format!(
            "--aggregate p10 is not recorded ({CURVES} keeps the slowest and the median)"
        ))
    } else if !o.exclude.is_empty() || o.exclude_degraded {
        Some(format!(
            "--exclude and --exclude-degraded leave nodes out, and {CURVES} is over every node"
        ))
    } else if o.max_age_s.is_some() {
        Some(format!(
            "--max-age leaves stale nodes out, and {CURVES} is over every node"
        ))
    } else {
        None
    }
}

/// The recorded series `name` scoped by the selector and `extra`, its latest sample within the
/// window or [`LOOKBACK`], whichever is longer.
fn recorded(r: &Reducer, name: &str, extra: &str) -> String {
    let window = r
        .src
        .window
        .as_deref()
        .and_then(|w| humantime::parse_duration(w).ok())
        .unwrap_or_default()
        .max(LOOKBACK);
    r.src
        .series_within(name, extra, Some(&format!("{}s", window.as_secs())))
}

/// The recorded curve of `spec` for `--aggregate`.
fn curve_name(spec: &super::Spec, aggregate: Aggregate) -> String {
    let op = match (aggregate, spec.cost) {
        (Aggregate::Median, _) => "median",
        (_, true) => "max",
        (_, false) => "min",
    };
    format!("{}:{op}", spec.recorded)
}

/// The fleet from the recorded curves, or why they cannot stand for it.
pub(super) fn fetch(r: &mut Reducer, census: &Census) -> Result<Result<Found, String>, TunerError> {
    if let Some(why) = unusable(r) {
        return Ok(Err(why));
    }
    let replies = r.run_all(&[recorded(r, NODES, ""), recorded(r, RECORDED_AT, "")])?;
    let on: BTreeMap<String, usize> = replies[0]
        .iter()
        .filter_map(|s| Some((label(s, "model_name")?.to_string(), value(s)? as usize)))
        .collect();
    if on.is_empty() {
        return Ok(Err(format!(
            "Prometheus has none of {CURVES}'s series ({NODES}) from the last hour: load the \
             chart's rules (deploy/helm/meshfit/rules/meshfit.rules.yaml)"
        )));
    }
    if on != census.models {
        let list = |m: &BTreeMap<String, usize>| {
            m.iter()
                .map(|(model, n)| format!("{n} of {model}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Ok(Err(format!(
            "{CURVES} stands on {} nodes where the query finds {} (a --selector on other labels \
             than cluster, or nodes that joined or left since it was recorded)",
            list(&on),
            list(&census.models)
        )));
    }
    let recorded_at = replies[1].iter().filter_map(value).fold(r.now, f64::min);

    let aggregate = r.opts.aggregate;
    let mut queries: Vec<String> = SPECS
        .iter()
        .map(|spec| recorded(r, &curve_name(spec, aggregate), spec.only))
        .collect();
    let keep = 1.0 - r.opts.threshold;
    for j in &JUDGED {
        let fleet = recorded(r, j.fleet, "");
        queries.push(match j.node {
            NodeSeries::Ratio(ratio) => format!("{} < {keep}", recorded(r, ratio, "")),
            NodeSeries::Figure(node) => format!(
                "{} < on ({}) group_left () ({keep} * {fleet})",
                recorded(r, node, ""),
                j.on.join(", ")
            ),
        });
        queries.push(fleet);
    }
    queries.push(r.stamps(Family::CalibrationLastSuccess)[0].clone());
    queries.push(r.stamps(Family::FabricLastRun)[0].clone());
    let replies = r.run_all(&queries)?;
    let (curves, rest) = replies.split_at(SPECS.len());
    let (judged, stamps) = rest.split_at(2 * JUDGED.len());
    let mut stragglers = Vec::new();
    for (j, pair) in JUDGED.iter().zip(judged.chunks(2)) {
        stragglers.extend(behind(j, &pair[0], &pair[1]));
    }
    let (calibrated, fabric) = (r.oldest(&stamps[0]), r.oldest(&stamps[1]));
    Ok(Ok(Found {
        kept: super::fleet_records(r, curves, &calibrated, &fabric),
        all: None,
        stragglers: worst_per_node(stragglers),
        excluded: Vec::new(),
        oldest: super::oldest_stamp(r, &calibrated, &fabric),
        how: format!(
            "read from {CURVES}'s recorded curves ({:.0} min old) as their {} per point and \
             GPU model",
            (r.now - recorded_at).max(0.0) / 60.0,
            r.aggregate_name()
        ),
        notes: vec![format!(
            "stragglers judged as the alerts judge them: each node's peak busbw per \
             collective, each GPU's peak GEMM rate per dtype and each rail's median over its \
             peers, against the model's median (HBM is not judged; --fleet-query reduced judges \
             every point at query time)"
        )],
    }))
}

/// The stragglers of `j` from a reply of the nodes behind (their own figures, or their ratios
/// to the median where `j` has one) and one of the medians they are behind.
fn behind(j: &Judged, nodes: &[Sample], medians: &[Sample]) -> Vec<Straggler> {
    let key = |s: &Sample| -> Vec<String> {
        j.on.iter()
            .map(|l| label(s, l).unwrap_or("").to_string())
            .collect()
    };
    let medians: BTreeMap<Vec<String>, f64> = medians
        .iter()
        .filter_map(|s| Some((key(s), value(s)?)))
        .collect();
    nodes
        .iter()
        .filter_map(|s| {
            let fleet_median = *medians.get(&key(s))?;
            let figure = value(s)?;
            Some(Straggler {
                node: label(s, "hostname")?.to_string(),
                what: (j.what)(s)?,
                value: match j.node {
                    NodeSeries::Ratio(_) => figure * fleet_median,
                    NodeSeries::Figure(_) => figure,
                },
                fleet_median,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{sample, serve, src};
    use super::*;
    use crate::ingest::prometheus::fleet::{FleetOptions, FleetQuery};

    /// A node's peak busbw is named against its own group's median: n7's all-reduce at 0.65 of
    /// a median of 4.6e11 is 2.99e11, 35% behind; a group with no median names nobody.
    #[test]
    fn a_node_behind_is_priced_against_its_groups_median() {
        let group = |ranks: &'static str| {
            vec![
                ("model_name", "H"),
                ("collective", "all_reduce"),
                ("scope", "intra_node"),
                ("ranks", ranks),
                ("backend", "nccl"),
            ]
        };
        let mut n7 = group("8");
        n7.push(("hostname", "n7"));
        let mut n8 = group("4");
        n8.push(("hostname", "n8"));
        let named = behind(
            &JUDGED[0],
            &[sample(&n7, "0.65"), sample(&n8, "0.2")],
            &[sample(&group("8"), "4.6e11")],
        );
        assert_eq!(named.len(), 1);
        assert_eq!(
            (named[0].node.as_str(), named[0].what.as_str()),
            ("n7", "all_reduce x8 intra_node peak busbw")
        );
        assert!((named[0].value - 2.99e11).abs() < 1.0);
        assert!((named[0].shortfall() - 0.35).abs() < 1e-12);
    }

    /// A rail has no recorded ratio: its reply holds the node's own median busbw, 2e10 against
    /// a model median of 2.5e10, 20% behind.
    #[test]
    fn a_rail_is_named_by_its_own_figure() {
        let rail = [("model_name", "H"), ("gpu", "3"), ("backend", "nccl")];
        let mut node = rail.to_vec();
        node.push(("hostname", "n2"));
        let named = behind(
            &JUDGED[2],
            &[sample(&node, "2e10")],
            &[sample(&rail, "2.5e10")],
        );
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].value, 2e10);
        assert!(named[0].what.contains("NIC 3"), "{}", named[0].what);
        assert!((named[0].shortfall() - 0.2).abs() < 1e-12);
    }

    fn opts(aggregate: Aggregate) -> FleetOptions {
        FleetOptions {
            mode: FleetQuery::Recorded,
            ..super::super::tests::opts(aggregate)
        }
    }

    /// What the curves cannot stand for is named before anything is read.
    #[test]
    fn curves_over_every_node_stand_for_no_subset() {
        let src = src("http://p:9090", None);
        let client = reqwest::blocking::Client::new();
        let why = |o: &FleetOptions| {
            unusable(&Reducer {
                src: &src,
                client: &client,
                opts: o,
                now: 0.0,
                only_model: None,
                queries: 0,
                samples: 0,
            })
        };
        assert_eq!(why(&opts(Aggregate::Slowest)), None);
        assert_eq!(why(&opts(Aggregate::Median)), None);
        assert!(why(&opts(Aggregate::P10))
            .unwrap()
            .contains("p10 is not recorded"));
        let mut o = opts(Aggregate::Slowest);
        o.exclude_degraded = true;
        assert!(why(&o).unwrap().contains("leave nodes out"));
        let mut o = opts(Aggregate::Slowest);
        o.max_age_s = Some(60.0);
        assert!(why(&o).unwrap().contains("--max-age"));
    }

    /// A Prometheus without the chart's rules: `--fleet-query recorded` fails in one line that
    /// names the group and the rule file, and prices nothing.
    #[test]
    fn recorded_without_the_rules_says_where_they_are() {
        let url = serve(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#);
        let src = src(&url, None);
        let err = src
            .fetch_fleet(0.0, &opts(Aggregate::Slowest))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("none of meshfit.fleet.curves's series")
                && err.contains("deploy/helm/meshfit/rules/meshfit.rules.yaml")
                && err.contains("(--fleet-query recorded)"),
            "{err}"
        );
    }

    /// The chart's rule file, as far as the tuner relies on it.
    #[derive(serde::Deserialize)]
    struct RuleFile {
        groups: Vec<RuleGroup>,
    }

    #[derive(serde::Deserialize)]
    struct RuleGroup {
        name: String,
        rules: Vec<Rule>,
    }

    #[derive(serde::Deserialize)]
    struct Rule {
        record: Option<String>,
    }

    /// The chart's group records every curve the tuner reads, and the census last: the tuner
    /// takes the census as the word that the curves of its evaluation are written, which holds
    /// only because a group writes its rules in order. CI once read a first evaluation between
    /// the two and priced a fleet without its HBM and fabric curves.
    #[test]
    fn the_chart_records_every_curve_and_the_census_last() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/helm/meshfit/rules/meshfit.rules.yaml"
        );
        let file: RuleFile =
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let group = file.groups.iter().find(|g| g.name == CURVES).unwrap();
        let names: Vec<&str> = group
            .rules
            .iter()
            .filter_map(|r| r.record.as_deref())
            .collect();
        for spec in &SPECS {
            for aggregate in [Aggregate::Slowest, Aggregate::Median] {
                let curve = curve_name(spec, aggregate);
                assert!(names.contains(&curve.as_str()), "{curve} not in {names:?}");
            }
        }
        assert_eq!(names[names.len() - 2..], [NODES, RECORDED_AT]);
    }

    #[test]
    fn the_slowest_is_the_most_time_and_the_least_rate() {
        assert_eq!(
            curve_name(&SPECS[0], Aggregate::Slowest),
            "model_size:meshfit_collective_time_seconds:max"
        );
        assert_eq!(
            curve_name(&SPECS[2], Aggregate::Slowest),
            "model_shape:meshfit_gemm_flops_per_second:min"
        );
        assert_eq!(
            curve_name(&SPECS[4], Aggregate::Median),
            "model:meshfit_fabric_pair_busbw_bytes_per_second:median"
        );
    }
}
