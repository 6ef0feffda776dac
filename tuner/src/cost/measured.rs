//! Collective times from fitted measurements, falling back to the nominal model term by term,
//! and across nodes never faster than the slowest measured NIC allows.

use std::collections::BTreeMap;

use record::{Kind, Scope};

use super::collective::{nic_multiple, Collective, CollectiveModel, NominalCollectives, Source};
use crate::fit::FleetCurve;
use crate::placement::{GroupSpan, LinkClass};

/// The record kind a cost-model collective is measured as.
pub fn kind_of(c: Collective) -> Kind {
    match c {
        Collective::AllReduce => Kind::AllReduce,
        Collective::AllGather => Kind::AllGather,
        Collective::ReduceScatter => Kind::ReduceScatter,
        Collective::AllToAll => Kind::AllToAll,
        Collective::SendRecv => Kind::SendRecv,
    }
}

/// What kind of group a fleet curve's ranks were, and so which groups it prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reach {
    /// Inside one node.
    Node,
    /// Across trays of one NVLink domain (`nvlink_domains` = 1): NVLink, not the NICs.
    Domain,
    /// Across nodes through the NICs, or not known to stay inside one NVLink domain.
    Network,
}

impl Reach {
    fn of(f: &FleetCurve) -> Reach {
        match f.scope {
            Scope::IntraNode => Reach::Node,
            Scope::InterNode if f.inside_one_nvlink_domain() => Reach::Domain,
            Scope::InterNode => Reach::Network,
        }
    }

    /// The curves that answer for `group`, best first. A group across nodes over the network
    /// takes inter-node curves not known to stay in one domain (one measured inside an NVL72
    /// rack ran at NVLink speed). An NVLink group across trays takes curves measured across
    /// trays of one domain, then, as a group inside a node does, intra-node curves.
    fn answering(group: &GroupSpan) -> &'static [Reach] {
        match group.link {
            LinkClass::Network => &[Reach::Network],
            _ if group.nodes > 1 => &[Reach::Domain, Reach::Node],
            _ => &[Reach::Node],
        }
    }
}

/// Fleet curves keyed by collective and reach, with rank counts sorted.
#[derive(Debug, Clone)]
pub struct MeasuredCollectives {
    nominal: NominalCollectives,
    curves: BTreeMap<(Kind, Reach), Vec<FleetCurve>>,
    /// Per-NIC send/recv bandwidth of the job's slowest node on an idle fabric, bytes/s, from a
    /// fabric run's pairs ([`crate::fit::Fits::fleet_nic`]).
    nic_busbw: Option<f64>,
}

/// How a measured figure answers a question about a group.
enum Answer<'a> {
    /// Same collective, scope, rank count and members per node.
    Exact(&'a FleetCurve),
    /// Same collective and scope, measured at rank counts on either side of the group's.
    Between(&'a FleetCurve, &'a FleetCurve),
    /// Same collective and scope, another rank count or members per node.
    Nearest(&'a FleetCurve),
    /// Nothing measured.
    None,
}

/// Whether an answer's curves price `bytes`: sizes near those they swept.
fn covers(answer: &Answer, bytes: f64) -> bool {
    match answer {
        Answer::Exact(f) | Answer::Nearest(f) => f.covers(bytes),
        Answer::Between(a, b) => a.covers(bytes) && b.covers(bytes),
        Answer::None => false,
    }
}

/// A curve's time at `bytes`: its measured table inside the sizes it measured, the fitted
/// curve elsewhere.
fn measured_time_s(f: &FleetCurve, bytes: f64) -> f64 {
    f.table
        .as_ref()
        .and_then(|t| t.time_s(bytes))
        .unwrap_or_else(|| f.curve.time_s(bytes))
}

impl MeasuredCollectives {
    /// Wraps the nominal model with fleet curves and, where a fabric run measured pairs, the
    /// per-NIC bandwidth of the slowest node (idle fabric, bytes/s).
    pub fn new(nominal: NominalCollectives, fleet: &[FleetCurve], nic_busbw: Option<f64>) -> Self {
        let mut curves: BTreeMap<(Kind, Reach), Vec<FleetCurve>> = BTreeMap::new();
        for c in fleet.iter().filter(|c| c.unusable().is_none()) {
            curves
                .entry((c.kind, Reach::of(c)))
                .or_default()
                .push(c.clone());
        }
        for v in curves.values_mut() {
            v.sort_by_key(|c| c.ranks);
        }
        MeasuredCollectives {
            nominal,
            curves,
            nic_busbw,
        }
    }

    /// The least time the slowest measured NIC allows a group that crosses nodes (zero inside
    /// a node or without pair measurements). A ring splits the traffic evenly over its members'
    /// rails, and every share must arrive, so the group moves at its members per node times
    /// the slowest rail (send/recv crosses one rail), at the job's in-fabric share of the
    /// idle-fabric pair figure: t >= S x factor / (members x nic x contention). The slowest
    /// member sets the pace of a synchronous step (issue 12).
    fn nic_floor_s(&self, c: Collective, group: &GroupSpan, bytes: f64) -> f64 {
        let Some(nic) = self.nic_busbw else {
            return 0.0;
        };
        if group.link != LinkClass::Network {
            return 0.0;
        }
        let nics = nic_multiple(c, group.ranks, group.members_per_node);
        let busbw = nics * nic * self.nominal.network_contention();
        bytes * c.busbw_factor(group.ranks) / busbw
    }

    /// Where only the all-reduce was measured for a group, the all-reduce that an
    /// all-gather or reduce-scatter is half of: a ring all-reduce runs as a reduce-scatter and
    /// then an all-gather over the same ring, each moving (n-1)/n of the buffer per rank
    /// (Patarasuk and Yuan 2009, §3; NCCL's ring all-reduce), so each takes half its time.
    fn halved_all_reduce(&self, c: Collective, group: &GroupSpan) -> Option<Answer<'_>> {
        let halves = matches!(c, Collective::AllGather | Collective::ReduceScatter);
        if !halves || !matches!(self.lookup(c, group), Answer::None) {
            return None;
        }
        let ar = self.lookup(Collective::AllReduce, group);
        (!matches!(ar, Answer::None)).then_some(ar)
    }

    /// The time from fitted curves (or the catalog where none answers).
    fn fitted_time_s(&self, c: Collective, group: &GroupSpan, bytes: f64) -> f64 {
        if let Some(ar) = self.halved_all_reduce(c, group) {
            if covers(&ar, bytes) {
                return 0.5 * self.fitted_time_s(Collective::AllReduce, group, bytes);
            }
        }
        if let (Answer::None, Some(intra)) = (self.lookup(c, group), self.intra_floor(c, group)) {
            // No inter-node measurement: the catalog prices the network, but the collective can
            // be no faster than its members inside one node measured on their own.
            let floor =
                intra.alpha_s + bytes * c.busbw_factor(group.ranks) / intra.busbw_bytes_per_s;
            return self.nominal.time_s(c, group, bytes).max(floor);
        }
        match self.lookup(c, group) {
            // A curve prices only sizes near those it swept (issue 13).
            a @ (Answer::Exact(_) | Answer::Nearest(_) | Answer::Between(..))
                if !covers(&a, bytes) =>
            {
                self.nominal.time_s(c, group, bytes)
            }
            // Across nodes the job shares the fabric that was measured idle: its bytes move
            // as a larger message would on the idle fabric.
            Answer::Exact(f) if group.link == LinkClass::Network => {
                measured_time_s(f, bytes / self.nominal.network_contention())
            }
            Answer::Exact(f) => measured_time_s(f, bytes),
            // Between two measured rank counts the bus bandwidth at this size is interpolated
            // in log2(ranks): it carries both counts' latency and protocol at the size, which
            // the ring model below would have to assume.
            Answer::Between(a, b) => {
                let busbw =
                    |f: &FleetCurve| bytes * c.busbw_factor(f.ranks) / measured_time_s(f, bytes);
                let (la, lb) = (f64::from(a.ranks).log2(), f64::from(b.ranks).log2());
                let w = (f64::from(group.ranks).log2() - la) / (lb - la);
                let bw = busbw(a) + w * (busbw(b) - busbw(a));
                bytes * c.busbw_factor(group.ranks) / bw
            }
            // Ring model: bus bandwidth holds across rank counts, latency grows with the steps
            // (Thakur et al. 2005, §4); the measured busbw carries over, alpha scales.
            Answer::Nearest(f) => {
                let steps = |n: u32| f64::from(n).log2().ceil().max(1.0);
                f.alpha_s * steps(group.ranks) / steps(f.ranks)
                    + bytes * c.busbw_factor(group.ranks) / self.carried_busbw(c, f, group)
            }
            Answer::None => self.nominal.time_s(c, group, bytes),
        }
    }

    /// For a group that crosses nodes, the measured intra-node curve of its members per node.
    fn intra_floor(&self, c: Collective, group: &GroupSpan) -> Option<&FleetCurve> {
        if group.link != LinkClass::Network || group.members_per_node <= 1 {
            return None;
        }
        self.curves
            .get(&(kind_of(c), Reach::Node))?
            .iter()
            .find(|f| f.ranks == group.members_per_node)
    }

    fn lookup(&self, c: Collective, group: &GroupSpan) -> Answer<'_> {
        let Some(list) = Reach::answering(group)
            .iter()
            .find_map(|&reach| self.curves.get(&(kind_of(c), reach)))
        else {
            return Answer::None;
        };
        // A curve with the group's own members per node is preferred where they matter.
        let members =
            |f: &FleetCurve| !drives_nics(c, group) || f.members_per_node == group.members_per_node;
        if let Some(exact) = list.iter().find(|f| f.ranks == group.ranks && members(f)) {
            return Answer::Exact(exact);
        }
        // Inside a node, rank counts on either side (the list is sorted by ranks); across
        // nodes the members per node change with the count, which the ring model carries.
        if group.link != LinkClass::Network {
            let below = list.iter().rev().find(|f| f.ranks < group.ranks);
            let above = list.iter().find(|f| f.ranks > group.ranks);
            if let (Some(a), Some(b)) = (below, above) {
                return Answer::Between(a, b);
            }
        }
        list.iter()
            .min_by_key(|f| {
                let distance = (f64::from(f.ranks).log2() - f64::from(group.ranks).log2()).abs();
                (!members(f), (distance * 1000.0) as u64)
            })
            .map_or(Answer::None, Answer::Nearest)
    }

    /// The bus bandwidth a curve measured on another group implies for `group`. The ring
    /// model keeps busbw across rank counts; across nodes it scales with the NICs the group
    /// drives ([`nic_multiple`]), up to what its members reach inside one node (measured, else
    /// the catalog's), and the job gets its in-job share of the idle-fabric figure.
    fn carried_busbw(&self, c: Collective, f: &FleetCurve, group: &GroupSpan) -> f64 {
        if group.link != LinkClass::Network {
            return f.busbw_bytes_per_s;
        }
        let shared = f.busbw_bytes_per_s * self.nominal.network_contention();
        let ratio = nic_multiple(c, group.ranks, group.members_per_node)
            / nic_multiple(c, f.ranks, f.members_per_node);
        if ratio == 1.0 {
            return shared;
        }
        let scaled = shared * ratio;
        let inside = self
            .intra_floor(c, group)
            .map_or(self.nominal.intra_busbw(), |i| i.busbw_bytes_per_s);
        scaled.min(inside)
    }
}

/// Whether the members per node set a group's rate across nodes ([`nic_multiple`]): not
/// for send/recv, whose pairs cross one NIC each whatever the count.
fn drives_nics(c: Collective, group: &GroupSpan) -> bool {
    group.link == LinkClass::Network && c != Collective::SendRecv
}

impl CollectiveModel for MeasuredCollectives {
    fn time_s(&self, c: Collective, group: &GroupSpan, bytes: f64) -> f64 {
        if group.ranks <= 1 {
            return 0.0;
        }
        self.fitted_time_s(c, group, bytes)
            .max(self.nic_floor_s(c, group, bytes))
    }

    fn source(&self, c: Collective, group: &GroupSpan) -> Source {
        if self.halved_all_reduce(c, group).is_some() {
            return Source::Extrapolated;
        }
        match self.lookup(c, group) {
            Answer::Exact(_) => Source::Measured,
            Answer::Between(..) | Answer::Nearest(_) => Source::Extrapolated,
            // A measured figure bounds the catalog's: the members inside a node, or the NICs.
            Answer::None
                if self.intra_floor(c, group).is_some()
                    || (self.nic_busbw.is_some() && group.link == LinkClass::Network) =>
            {
                Source::Extrapolated
            }
            Answer::None => Source::Nominal,
        }
    }

    fn origin(&self, c: Collective, group: &GroupSpan, bytes: f64) -> Source {
        if group.ranks <= 1 {
            return Source::Nominal;
        }
        if let Some(ar) = self.halved_all_reduce(c, group) {
            return if covers(&ar, bytes) {
                Source::Extrapolated
            } else {
                Source::Nominal
            };
        }
        match self.lookup(c, group) {
            Answer::None => self.source(c, group),
            a if !covers(&a, bytes) => Source::Nominal,
            _ => self.source(c, group),
        }
    }

    fn uncertainty(&self, c: Collective, group: &GroupSpan) -> f64 {
        if self.halved_all_reduce(c, group).is_some() {
            return self.uncertainty(Collective::AllReduce, group);
        }
        match self.lookup(c, group) {
            Answer::Exact(f) => f.rms_rel_error,
            Answer::Between(a, b) => a.rms_rel_error.max(b.rms_rel_error),
            // Extrapolation doubles the fit's spread: the ring model is an assumption on top.
            Answer::Nearest(f) => 2.0 * f.rms_rel_error,
            Answer::None => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};
    use crate::placement::span;

    fn curve(kind: Kind, ranks: u32, busbw: f64) -> FleetCurve {
        let factor = record::busbw_factor(kind, ranks).unwrap();
        let pts: Vec<(f64, f64)> = (10..34)
            .map(|i| 2f64.powi(i))
            .map(|s| (s, 20e-6 + s * factor / busbw))
            .collect();
        FleetCurve {
            kind,
            scope: Scope::IntraNode,
            ranks,
            members_per_node: ranks,
            nvlink_domains: None,
            alpha_s: 20e-6,
            beta_bytes_per_s: busbw / factor,
            busbw_bytes_per_s: busbw,
            rms_rel_error: 0.02,
            nodes: 4,
            bytes_range: (1024.0, 8.0 * 1024.0 * 1024.0 * 1024.0),
            r2: 0.999,
            curve: crate::fit::alpha_beta::fit(&pts).unwrap(),
            table: None,
        }
    }

    #[test]
    fn curves_price_only_near_their_sizes_and_only_when_they_fit() {
        let c = catalog::cluster("l40s-pcie").unwrap();
        let nominal = NominalCollectives::new(&c, &NOMINAL);
        let g4 = span(4, 1, &c);
        let narrow = FleetCurve {
            bytes_range: (1024.0, 4096.0),
            ..curve(Kind::AllReduce, 4, 10e9)
        };
        let m = MeasuredCollectives::new(nominal.clone(), std::slice::from_ref(&narrow), None);
        let at = |m: &MeasuredCollectives, b: f64| m.time_s(Collective::AllReduce, &g4, b);
        // Within 8x of the sweep the curve prices; far past it the catalog does.
        assert_eq!(at(&m, 8.0 * 4096.0), narrow.curve.time_s(8.0 * 4096.0));
        assert_eq!(at(&m, 1e9), nominal.time_s(Collective::AllReduce, &g4, 1e9));
        let poor = FleetCurve {
            r2: -56.9,
            ..curve(Kind::AllReduce, 4, 10e9)
        };
        assert!(poor.unusable().unwrap().contains("R² -56.90 < 0.9"));
        let m = MeasuredCollectives::new(nominal.clone(), &[poor], None);
        assert_eq!(m.source(Collective::AllReduce, &g4), Source::Nominal);
        assert_eq!(at(&m, 1e6), nominal.time_s(Collective::AllReduce, &g4, 1e6));
    }

    #[test]
    fn measured_exact_extrapolated_and_nominal() {
        let c = catalog::cluster("l40s-pcie").unwrap();
        let m = MeasuredCollectives::new(
            NominalCollectives::new(&c, &NOMINAL),
            &[curve(Kind::AllReduce, 4, 10e9)],
            None,
        );
        let g4 = span(4, 1, &c);
        let g8 = span(8, 1, &c);
        assert_eq!(m.source(Collective::AllReduce, &g4), Source::Measured);
        let t = m.time_s(Collective::AllReduce, &g4, 1e9);
        assert!((t - (20e-6 + 1e9 * 1.5 / 10e9)).abs() < 1e-12);
        assert_eq!(m.source(Collective::AllReduce, &g8), Source::Extrapolated);
        let t8 = m.time_s(Collective::AllReduce, &g8, 1e9);
        assert!((t8 - (20e-6 * 3.0 / 2.0 + 1e9 * 1.75 / 10e9)).abs() < 1e-12);
        // Only the all-reduce was measured: an all-gather over the same group takes half of it
        // (a ring all-reduce is a reduce-scatter and an all-gather), called extrapolated.
        assert_eq!(m.source(Collective::AllGather, &g4), Source::Extrapolated);
        let gather = m.time_s(Collective::AllGather, &g4, 1e9);
        assert!((gather - t / 2.0).abs() < 1e-12, "{gather} vs {t}");
        assert_eq!(m.source(Collective::SendRecv, &g4), Source::Nominal);
        assert_eq!(
            m.source(Collective::AllReduce, &span(16, 1, &c)),
            Source::Nominal
        );
    }

    /// vTrain's A100 lookup tables: a measured size is priced at its measured time (93.25 us
    /// at 2 MiB on 8 GPUs, where the two-piece curve through 1,024 sizes misses by up to a
    /// third), and a rank count between two measured ones at the bus bandwidth interpolated
    /// in log2(ranks): 6 ranks between 4 and 8 sit halfway.
    #[test]
    fn tables_price_measured_sizes_and_rank_counts_between_them() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/vtrain-luts/a100");
        let mut records = Vec::new();
        for n in [4, 8] {
            let name = format!("AR_GPU{n}_1M_1024M_LUT");
            let text = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
            let parsed =
                record::tables::parse(&text, &name, &record::nccl_tests::ImportOptions::default())
                    .unwrap();
            records.extend(parsed.records);
        }
        let fits = crate::fit::fit_all(&records, 1.0, &crate::fit::FitOptions::default());
        let c = catalog::cluster("dgx-a100").unwrap();
        let m = MeasuredCollectives::new(NominalCollectives::new(&c, &NOMINAL), &fits.fleet, None);
        let mib = 1048576.0;
        let t8 = m.time_s(Collective::AllReduce, &span(8, 1, &c), 2.0 * mib);
        assert!((t8 - 93.25e-6).abs() < 1e-12, "{t8}");
        let t4 = m.time_s(Collective::AllReduce, &span(4, 1, &c), 2.0 * mib);
        let g6 = span(6, 1, &c);
        assert_eq!(m.source(Collective::AllReduce, &g6), Source::Extrapolated);
        let bus = |t: f64, n: u32| 2.0 * mib * Collective::AllReduce.busbw_factor(n) / t;
        let w = (6f64.log2() - 2.0) / (3.0 - 2.0);
        let expected = bus(t4, 4) + w * (bus(t8, 8) - bus(t4, 4));
        let t6 = m.time_s(Collective::AllReduce, &g6, 2.0 * mib);
        assert!((bus(t6, 6) / expected - 1.0).abs() < 1e-12);
        // Held out: vTrain measured 6 GPUs too. The interpolation between 4 and 8 lands
        // within 8% of it from 1 to 16 MiB (+7.7% at 4 MiB, where 6 GPUs' protocol switch
        // falls between the other two's).
        let name = "AR_GPU6_1M_1024M_LUT";
        let text = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
        let six = record::tables::parse(&text, name, &record::nccl_tests::ImportOptions::default())
            .unwrap()
            .records;
        for size in [1u64, 2, 4, 8, 16].map(|m| m << 20) {
            let measured = six
                .iter()
                .find(|r| r.bytes == size && !r.in_place)
                .unwrap()
                .timing
                .time_s;
            let priced = m.time_s(Collective::AllReduce, &g6, size as f64);
            assert!(
                (priced / measured - 1.0).abs() < 0.08,
                "{size}: {priced} vs {measured}"
            );
        }
    }

    /// Two DGX A100 measured as one 16-rank all-reduce, eight GPUs per node: 177 GB/s busbw
    /// over eight 25 GB/s rails on an idle fabric. Inside a job, the catalog's in-job share of
    /// line rate against 0.90 idle leaves that fraction of it. A data-parallel group of 16 with one
    /// member per node drives one rail, so it gets an eighth.
    #[test]
    fn members_per_node_carry_across_nodes() {
        let c = catalog::cluster("dgx-a100").unwrap();
        let across = FleetCurve {
            scope: Scope::InterNode,
            members_per_node: 8,
            ..curve(Kind::AllReduce, 16, 177e9)
        };
        let m = MeasuredCollectives::new(NominalCollectives::new(&c, &NOMINAL), &[across], None);
        let full = span(16, 1, &c);
        assert_eq!(full.members_per_node, 8);
        assert_eq!(m.source(Collective::AllReduce, &full), Source::Measured);
        let k = NOMINAL.network_busbw / NOMINAL.network_idle_busbw;
        let bytes = 1e9;
        let busbw_of = |t: f64| bytes * Collective::AllReduce.busbw_factor(16) / (t - 20e-6);
        let exact = busbw_of(m.time_s(Collective::AllReduce, &full, bytes));
        assert!((exact / (177e9 * k) - 1.0).abs() < 1e-3, "{exact}");
        let dp = span(16, 8, &c);
        assert_eq!((dp.members_per_node, dp.link), (1, LinkClass::Network));
        assert_eq!(m.source(Collective::AllReduce, &dp), Source::Extrapolated);
        let busbw = busbw_of(m.time_s(Collective::AllReduce, &dp, bytes));
        assert!((busbw / (177e9 * k / 8.0) - 1.0).abs() < 1e-9, "{busbw}");
        // Four members per node: half the rails, still under NVLink.
        let four = busbw_of(m.time_s(Collective::AllReduce, &span(16, 2, &c), bytes));
        assert!((four / (177e9 * k / 2.0) - 1.0).abs() < 1e-9, "{four}");
        // An all-to-all sends through each GPU's own NIC. Measured over two full nodes its
        // busbw is 15/8 of a NIC (half the traffic stays inside the node); a group of one
        // member per node gets one NIC: 8/15 of it, not an eighth.
        let a2a = FleetCurve {
            scope: Scope::InterNode,
            members_per_node: 8,
            ..curve(Kind::AllToAll, 16, 40e9)
        };
        let m = MeasuredCollectives::new(NominalCollectives::new(&c, &NOMINAL), &[a2a], None);
        let factor = Collective::AllToAll.busbw_factor(16);
        let a2a_busbw = |t: f64| bytes * factor / (t - 20e-6);
        let spread = a2a_busbw(m.time_s(Collective::AllToAll, &dp, bytes));
        assert!(
            (spread / (40e9 * k * 8.0 / 15.0) - 1.0).abs() < 1e-9,
            "{spread}"
        );
    }

    /// An 8-rank all-reduce, one GPU per node, swept from 1 MiB to 1 GiB by two fabric runs
    /// whose rank 0 is tray t0: once over 8 trays of t0's NVL72 rack (one NVLink domain, 800
    /// GB/s busbw) and once over one tray in each of 8 racks (8 domains, 40 GB/s).
    fn two_fabric_runs() -> Vec<record::Record> {
        let mut records = Vec::new();
        for (domains, busbw) in [(1, 800e9), (8, 40e9)] {
            // Rack r's tray is r{r}t0; rack 0's is t0 itself.
            let nodes: Vec<String> = (0..8)
                .map(|i| match (domains, i) {
                    (1, _) | (_, 0) => format!("t{i}"),
                    _ => format!("r{i}t0"),
                })
                .collect();
            for i in 20..=30 {
                let bytes = 1u64 << i;
                let group = record::Group {
                    node: Some("t0".into()),
                    gpus: vec![0; 8],
                    scope: Scope::InterNode,
                    ranks: 8,
                };
                let time_s = 20e-6 + bytes as f64 * 1.75 / busbw;
                let timing =
                    record::Timing::without_spread(time_s, Some(20), record::Clock::CudaEvent);
                let mut r = record::Record::transfer(
                    Kind::AllReduce,
                    record::Backend::Nccl,
                    group,
                    bytes,
                    record::Dtype::Bf16,
                    timing,
                );
                r.detail.ranks_per_node = Some(1);
                r.detail.nodes = Some(nodes.clone());
                r.detail.nvlink_domains = Some(domains);
                records.push(r);
            }
        }
        records
    }

    /// On gb200-nvl72 (4 GPUs a tray, 72 a domain) a TP 8 group spans two trays of one rack:
    /// it prices from the in-rack curve, 20 us + 1 GiB x 1.75 / 800 GB/s = 2.36881 ms, as
    /// measured. A DP group of 8, one rank per rack (stride 72), crosses the network and
    /// prices from the cross-rack curve at the job's share of the idle fabric: a message of
    /// 256 MiB x k takes what 256 MiB took idle, 20 us + 256 MiB x 1.75 / 40 GB/s = 11.7641
    /// ms. Before, the two runs fell on one curve, TP 8 took the catalog and DP was priced
    /// near NVLink speed.
    #[test]
    fn nvlink_groups_across_trays_and_network_groups_price_from_their_own_runs() {
        let c = catalog::cluster("gb200-nvl72").unwrap();
        let fits = crate::fit::fit_all(&two_fabric_runs(), 1.0, &crate::fit::FitOptions::default());
        let mut kept: Vec<(Option<u32>, f64)> = fits
            .fleet
            .iter()
            .map(|f| (f.nvlink_domains, (f.busbw_bytes_per_s / 1e9).round()))
            .collect();
        kept.sort_by_key(|k| k.0);
        assert_eq!(kept, [(Some(1), 800.0), (Some(8), 40.0)]);
        let m = MeasuredCollectives::new(NominalCollectives::new(&c, &NOMINAL), &fits.fleet, None);
        let tp = span(8, 1, &c);
        assert_eq!((tp.nodes, tp.link), (2, LinkClass::Nvlink));
        assert_eq!(m.source(Collective::AllReduce, &tp), Source::Measured);
        let gib = (1u64 << 30) as f64;
        let t = m.time_s(Collective::AllReduce, &tp, gib);
        assert!((t / 2.36881e-3 - 1.0).abs() < 1e-5, "{t}");
        let dp = span(8, 72, &c);
        assert_eq!(
            (dp.nodes, dp.members_per_node, dp.link),
            (8, 1, LinkClass::Network)
        );
        assert_eq!(m.source(Collective::AllReduce, &dp), Source::Measured);
        let k = NOMINAL.network_busbw / NOMINAL.network_idle_busbw;
        let t = m.time_s(Collective::AllReduce, &dp, 268435456.0 * k);
        assert!((t / 11.7641e-3 - 1.0).abs() < 1e-5, "{t}");
        // Without the cross-rack run nothing measured prices the network: the catalog does.
        let in_rack: Vec<FleetCurve> = fits
            .fleet
            .iter()
            .filter(|f| f.nvlink_domains == Some(1))
            .cloned()
            .collect();
        let m = MeasuredCollectives::new(NominalCollectives::new(&c, &NOMINAL), &in_rack, None);
        assert_eq!(m.source(Collective::AllReduce, &dp), Source::Nominal);
        assert_eq!(m.source(Collective::AllReduce, &tp), Source::Measured);
    }

    /// Old files say nothing of domains: their inter-node curves price the network as
    /// before, and an NVLink group across trays takes the intra-node curve.
    #[test]
    fn curves_of_unknown_domains_price_the_network_only() {
        let c = catalog::cluster("gb200-nvl72").unwrap();
        let across = FleetCurve {
            scope: Scope::InterNode,
            members_per_node: 4,
            ..curve(Kind::AllReduce, 8, 40e9)
        };
        let inside = curve(Kind::AllReduce, 4, 700e9);
        let m = MeasuredCollectives::new(
            NominalCollectives::new(&c, &NOMINAL),
            &[across, inside],
            None,
        );
        let tp = span(8, 1, &c);
        assert_eq!(m.source(Collective::AllReduce, &tp), Source::Extrapolated);
        // The ring model carries the 4-GPU tray's 700 GB/s to 8 ranks (3 steps against 2).
        let t = m.time_s(Collective::AllReduce, &tp, 1e9);
        assert!(
            (t - (20e-6 * 3.0 / 2.0 + 1e9 * 1.75 / 700e9)).abs() < 1e-12,
            "{t}"
        );
        let two_racks = span(8, 72, &c);
        assert_eq!(
            m.source(Collective::AllReduce, &two_racks),
            Source::Extrapolated
        );
    }

    /// A fabric run found one DGX H100's NIC at 22.5 GB/s per pair on the idle fabric, half
    /// of the 45 GB/s (0.90 of 400 Gb/s) the others reach. A data-parallel all-reduce of 16
    /// nodes, one member each, moves 1 GB x 2 x 15/16 = 1.875 GB per rank through that NIC at
    /// the catalog's in-job share of it, 0.5497 / 0.90: 22.5 x 0.61078 = 13.7425 GB/s, so at
    /// least 1.875 / 13.7425 = 0.136438 s, where the catalog alone says about half. A pipeline
    /// send/recv of 1 GB crosses one rail: at least 1 / 13.7425 = 0.0727669 s. Inside a node
    /// the NIC does not count.
    #[test]
    fn the_slowest_nic_bounds_every_inter_node_term() {
        let c = catalog::cluster("dgx-h100").unwrap();
        let nominal = NominalCollectives::new(&c, &NOMINAL);
        let m = MeasuredCollectives::new(nominal.clone(), &[], Some(22.5e9));
        let dp = span(16, 8, &c);
        assert_eq!((dp.members_per_node, dp.link), (1, LinkClass::Network));
        let t = m.time_s(Collective::AllReduce, &dp, 1e9);
        let in_job = 22.5e9 * NOMINAL.network_busbw / NOMINAL.network_idle_busbw;
        assert!((in_job / 13.7425e9 - 1.0).abs() < 1e-12, "{in_job}");
        assert!((t / 0.136438 - 1.0).abs() < 1e-5, "{t}");
        assert!(nominal.time_s(Collective::AllReduce, &dp, 1e9) < 0.6 * t);
        assert_eq!(m.source(Collective::AllReduce, &dp), Source::Extrapolated);
        let pp = span(2, 8, &c);
        let t = m.time_s(Collective::SendRecv, &pp, 1e9);
        assert!((t / 0.0727669 - 1.0).abs() < 1e-5, "{t}");
        let tp = span(8, 1, &c);
        assert_eq!(
            m.time_s(Collective::AllReduce, &tp, 1e9),
            nominal.time_s(Collective::AllReduce, &tp, 1e9)
        );
        assert_eq!(m.source(Collective::AllReduce, &tp), Source::Nominal);
    }
}
