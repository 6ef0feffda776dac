//! `tuner fit`: the fitted curves per node and collective, the fleet figures and the nodes
//! behind the fleet.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use serde::Serialize;

use crate::catalog::efficiency::arch_kernels;
use crate::catalog::{Cluster, NOMINAL};
use crate::cost::collective::{Collective, NominalCollectives};
use crate::fit::{measured_group, Fits, FleetCurve, NodeCurve};
use crate::ingest::Measurements;

/// One fitted curve in the report.
#[derive(Debug, Clone, Serialize)]
pub struct CurveRow {
    /// Node, or `fleet` for the aggregate.
    pub node: String,
    /// Collective.
    pub collective: String,
    /// intra_node or inter_node.
    pub scope: String,
    /// Ranks.
    pub ranks: u32,
    /// Ranks on each node.
    pub members_per_node: u32,
    /// NVLink domains the ranks spanned, where the records say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_domains: Option<u32>,
    /// Latency, seconds.
    pub alpha_s: f64,
    /// Bus bandwidth, bytes/s.
    pub busbw_bytes_per_s: f64,
    /// The catalog's bus bandwidth for the same group, as a sweep would show it (across nodes,
    /// on an idle fabric), bytes/s.
    pub nominal_busbw_bytes_per_s: f64,
    /// R² of log time (per node only).
    pub r2: Option<f64>,
    /// Largest relative error (per node only).
    pub max_rel_error: Option<f64>,
    /// RMS relative error.
    pub rms_rel_error: f64,
    /// Points (per node) or nodes (fleet).
    pub points: usize,
    /// Pieces of the curve.
    pub segments: usize,
    /// Bandwidth is a lower bound: the sweep stayed latency-bound.
    pub bandwidth_lower_bound: bool,
    /// Why pricing does not use the curve (fleet rows only), when it does not.
    pub unused: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// What was read.
    pub sources: Vec<String>,
    /// Stale, simulated or unreadable data.
    pub notes: Vec<String>,
    /// Aggregate used for the fleet rows.
    pub aggregate: String,
    /// Per-node and fleet curves.
    pub curves: Vec<CurveRow>,
    /// Everything else the fit found: GEMM, memory, stragglers, exclusions.
    pub fits: Fits,
    /// The catalog's large-GEMM efficiency for the cluster's GPU, beside the measured one.
    pub catalog_gemm_peak: f64,
}

impl FitReport {
    /// Builds the report; nominal figures come from `cluster`.
    pub fn new(fits: &Fits, cluster: &Cluster, m: &Measurements) -> FitReport {
        let nominal = NominalCollectives::new(cluster, &NOMINAL);
        let nominal_busbw = |kind, scope, ranks, members, domains| {
            Collective::of(kind).map_or(0.0, |c| {
                nominal.sweep_busbw(c, &measured_group(scope, ranks, members, domains, cluster))
            })
        };
        let node_row = |c: &NodeCurve| CurveRow {
            node: c.node.clone(),
            collective: c.kind.as_str().to_string(),
            scope: c.scope.as_str().to_string(),
            ranks: c.ranks,
            members_per_node: c.members_per_node,
            nvlink_domains: c.nvlink_domains,
            alpha_s: c.curve.alpha_s(),
            busbw_bytes_per_s: c.busbw_bytes_per_s,
            nominal_busbw_bytes_per_s: nominal_busbw(
                c.kind,
                c.scope,
                c.ranks,
                c.members_per_node,
                c.nvlink_domains,
            ),
            r2: Some(c.curve.r2),
            max_rel_error: Some(c.curve.max_rel_error),
            rms_rel_error: c.curve.rms_rel_error,
            points: c.curve.points,
            segments: c.curve.segments.len(),
            bandwidth_lower_bound: c.curve.bandwidth_lower_bound,
            unused: None,
        };
        let fleet_row = |f: &FleetCurve| CurveRow {
            node: "fleet".to_string(),
            collective: f.kind.as_str().to_string(),
            scope: f.scope.as_str().to_string(),
            ranks: f.ranks,
            members_per_node: f.members_per_node,
            nvlink_domains: f.nvlink_domains,
            alpha_s: f.alpha_s,
            busbw_bytes_per_s: f.busbw_bytes_per_s,
            nominal_busbw_bytes_per_s: nominal_busbw(
                f.kind,
                f.scope,
                f.ranks,
                f.members_per_node,
                f.nvlink_domains,
            ),
            r2: Some(f.r2),
            max_rel_error: None,
            rms_rel_error: f.rms_rel_error,
            points: f.nodes,
            segments: 1,
            bandwidth_lower_bound: false,
            unused: f.unusable(),
        };
        FitReport {
            sources: m.sources.clone(),
            notes: m.notes.clone(),
            aggregate: format!("{:?}", fits.aggregate).to_lowercase(),
            curves: fits
                .curves
                .iter()
                .map(node_row)
                .chain(fits.fleet.iter().map(fleet_row))
                .collect(),
            fits: fits.clone(),
            catalog_gemm_peak: arch_kernels(cluster.gpu.arch).gemm_peak,
        }
    }
}

/// The report as tables: alpha in us, busbw in GB/s (1e9 bytes/s).
pub fn table(r: &FitReport) -> String {
    let mut s = String::new();
    for src in &r.sources {
        s.push_str(&format!("source: {src}\n"));
    }
    s.push_str(&format!("{}\n", curve_table(r)));
    s.push_str(&fleet_lines(r));
    s
}

/// One row per fitted curve, the node's and the fleet's.
fn curve_table(r: &FitReport) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(vec![
        "node",
        "collective",
        "scope",
        "ranks",
        "per node",
        "alpha us",
        "busbw GB/s",
        "nominal GB/s",
        "R2",
        "max err",
        "points",
        "pieces",
        "priced",
    ]);
    for c in &r.curves {
        t.add_row(vec![
            Cell::new(&c.node),
            Cell::new(&c.collective),
            Cell::new(match c.nvlink_domains {
                Some(1) => format!("{} (1 NVLink domain)", c.scope),
                Some(d) => format!("{} ({d} NVLink domains)", c.scope),
                None => c.scope.clone(),
            }),
            Cell::new(c.ranks),
            Cell::new(c.members_per_node),
            Cell::new(format!("{:.1}", c.alpha_s * 1e6)),
            Cell::new(format!(
                "{:.1}{}",
                c.busbw_bytes_per_s / 1e9,
                if c.bandwidth_lower_bound { " (>=)" } else { "" }
            )),
            Cell::new(format!("{:.1}", c.nominal_busbw_bytes_per_s / 1e9)),
            Cell::new(c.r2.map_or("-".into(), |v| format!("{v:.4}"))),
            Cell::new(
                c.max_rel_error
                    .map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
            ),
            Cell::new(c.points),
            Cell::new(c.segments),
            Cell::new(match (&c.unused, c.node.as_str()) {
                (Some(why), _) => format!("no: {why}"),
                (None, "fleet") => "yes".into(),
                (None, _) => "-".into(),
            }),
        ]);
    }
    t
}

/// The GEMM curves by node, then a line for each fleet figure, straggler and exclusion.
fn fleet_lines(r: &FitReport) -> String {
    let mut s = String::new();
    let f = &r.fits;
    if !f.gemm.is_empty() {
        let mut g = Table::new();
        g.load_preset(UTF8_FULL_CONDENSED).set_header(vec![
            "node",
            "slowest GPU",
            "GEMM peak efficiency",
            "half-efficiency dim",
            "rms err",
        ]);
        for n in &f.gemm {
            g.add_row(vec![
                Cell::new(&n.node),
                Cell::new(n.gpu),
                Cell::new(format!("{:.1}%", n.curve.peak_efficiency * 100.0)),
                Cell::new(format!("{:.0}", n.curve.half_dim)),
                Cell::new(format!("{:.1}%", n.curve.rms_rel_error * 100.0)),
            ]);
        }
        s.push_str(&format!("{g}\n"));
    }
    if let Some(g) = &f.fleet_gemm {
        s.push_str(&format!(
            "fleet ({}) GEMM peak efficiency {:.1}% (catalog {:.0}%), the curve through the \
             large GEMMs; the table below prices\n",
            r.aggregate,
            g.peak_efficiency * 100.0,
            r.catalog_gemm_peak * 100.0
        ));
    }
    if let Some(t) = &f.gemm_table {
        s.push_str(&format!(
            "fleet ({}) GEMMs: {}\n",
            r.aggregate,
            t.describe()
        ));
    }
    if let Some(t) = &f.attention_table {
        s.push_str(&format!(
            "fleet ({}) attention: {}\n",
            r.aggregate,
            t.describe()
        ));
    }
    for refused in &f.refused {
        s.push_str(&format!("refused: {refused}\n"));
    }
    if let Some(m) = f.fleet_memory {
        s.push_str(&format!(
            "fleet ({}) HBM bandwidth {:.0} GB/s, reads plus writes\n",
            r.aggregate,
            m / 1e9
        ));
    }
    if let Some(nic) = &f.fleet_nic {
        let nodes: std::collections::BTreeSet<&str> =
            f.nics.iter().map(|n| n.node.as_str()).collect();
        s.push_str(&format!(
            "fleet ({}) NIC send/recv {:.1} GB/s per NIC on the idle fabric, set by {} NIC {} ({} NICs on {} nodes measured in pairs)\n",
            r.aggregate,
            nic.busbw_bytes_per_s / 1e9,
            nic.node,
            nic.rail,
            f.nics.len(),
            nodes.len()
        ));
    }
    for st in &f.stragglers {
        s.push_str(&format!(
            "straggler: {} {:.0}% below the fleet median on {}\n",
            st.node,
            st.shortfall() * 100.0,
            st.what
        ));
    }
    for (n, why) in &f.excluded {
        s.push_str(&format!("excluded: {n} ({why})\n"));
    }
    s
}
