//! Pricing from measurements: fit the records, build the measured scenario, and say what the
//! measurements changed (stragglers, exclusions, another GPU than the preset's).

use crate::cost::Scenario;
use crate::fit::{fit_all, FitOptions, Fits};
use crate::ingest::Measurements;
use record::Record;

/// The priced scenario and what its measurements were and changed.
pub struct Priced {
    /// The scenario, measured where measurements exist.
    pub scenario: Scenario,
    /// The fits, when measurements with usable records were given.
    pub fits: Option<Fits>,
    /// What was read, when measurements were given.
    pub read: Option<Read>,
    /// What keeping the excluded nodes would cost the best layout.
    pub keep_cost: Option<String>,
    /// Lines for the notes.
    pub notes: Vec<String>,
}

/// The measurement files read.
pub struct Read {
    /// What was read.
    pub sources: Vec<String>,
    /// Stale, simulated or unreadable data, by name.
    pub notes: Vec<String>,
}

impl Priced {
    /// The catalog's scenario, with no measurements behind it.
    pub fn nominal(scenario: Scenario) -> Priced {
        Priced {
            scenario,
            fits: None,
            read: None,
            keep_cost: None,
            notes: Vec::new(),
        }
    }
}

/// Builds the measured scenario from a nominal one and loaded measurements, fitted with `opts`.
pub fn price(nominal: Scenario, mut m: Measurements, opts: &FitOptions) -> Priced {
    drop_foreign_gpus(&nominal, &mut m);
    if m.records.is_empty() {
        let mut notes = m.notes.clone();
        notes.push("no usable measurements: every term falls back to catalog figures".into());
        let read = Read {
            sources: m.sources,
            notes: m.notes,
        };
        return Priced {
            read: Some(read),
            notes,
            ..Priced::nominal(nominal)
        };
    }
    let peak = nominal.peak_flops();
    let opts = &FitOptions {
        attention_peak_flops: Some(nominal.cluster.gpu.bf16_flops),
        ..opts.clone()
    };
    let mut fits = fit_all(&m.records, peak, opts);
    let mut notes = m.notes.clone();
    let all_records = match &m.fleet {
        Some(fleet) => {
            // The fleet's records are one node per GPU model: its stragglers and exclusions
            // were found where the nodes' series live.
            fits.stragglers
                .extend(fleet.section.stragglers.iter().cloned());
            fits.excluded.extend(fleet.section.excluded.iter().cloned());
            fleet.all.as_ref().map(|all| with_fleet(&m.records, all))
        }
        None => Some(m.records.clone()),
    };
    notes.extend(fit_notes(&fits, &nominal));
    let keep_cost = (!fits.excluded.is_empty())
        .then(|| {
            let Some(records) = &all_records else {
                notes.push(
                    "what keeping the excluded nodes would cost is not priced: a compact                      snapshot holds the aggregate of the nodes kept only"
                        .into(),
                );
                return None;
            };
            let all = FitOptions {
                exclude: Vec::new(),
                exclude_degraded: false,
                ..opts.clone()
            };
            let nodes: Vec<String> = fits.excluded.iter().map(|(n, _)| n.clone()).collect();
            Some((fit_all(records, peak, &all), nodes))
        })
        .flatten();
    notes.extend(gpu_model_notes(&m, &nominal));
    let read = Read {
        sources: m.sources.clone(),
        notes: m.notes.clone(),
    };
    for s in &fits.stragglers {
        notes.push(format!(
            "node {} is {:.0}% below the fleet median on {}",
            s.node,
            s.shortfall() * 100.0,
            s.what
        ));
    }
    let Scenario {
        model,
        training,
        cluster,
        gpus,
        efficiency,
        ..
    } = nominal;
    let scenario = Scenario::measured(model, training, cluster, gpus, efficiency, &fits);
    let keep_cost = keep_cost.map(|(all, nodes)| keep_cost_line(&scenario, &all, &nodes));
    Priced {
        scenario,
        fits: Some(fits),
        read: Some(read),
        keep_cost,
        notes,
    }
}

/// `records` with the fleet's aggregate over the nodes kept replaced by `all`, its aggregate
/// over every node.
fn with_fleet(records: &[Record], all: &[Record]) -> Vec<Record> {
    let fleet = |r: &Record| {
        r.group
            .node
            .as_deref()
            .is_some_and(|n| n.starts_with(crate::ingest::prometheus::fleet::FLEET_PREFIX))
    };
    records
        .iter()
        .filter(|r| !fleet(r))
        .chain(all)
        .cloned()
        .collect()
}

/// What the fits say about how they price: refusals, a stand-in dtype, unusable curves, the
/// range the curves cover, the job's share of an idle fabric, the slowest NIC.
fn fit_notes(fits: &Fits, nominal: &Scenario) -> Vec<String> {
    let mut notes: Vec<String> = fits
        .refused
        .iter()
        .map(|r| format!("refused: {r}"))
        .collect();
    if let Some(record::Dtype::Fp16) = fits.gemm_table_dtype {
        notes.push(
            "GEMMs priced from the fp16 sweep: no bf16 GEMM was measured, and the tensor cores \
             run both at one rate"
                .into(),
        );
    }
    for f in &fits.fleet {
        if let Some(why) = f.unusable() {
            notes.push(format!(
                "measured {} {} over {} ranks {why}",
                f.kind, f.scope, f.ranks
            ));
        }
    }
    if fits.fleet.iter().any(|f| f.unusable().is_none()) {
        notes.push(format!(
            "measured curves price messages within {}x of the sizes they swept; the catalog \
             prices the rest",
            crate::fit::EXTRAPOLATE
        ));
    }
    if fits.fleet.iter().any(|f| {
        f.scope == record::Scope::InterNode
            && !f.inside_one_nvlink_domain()
            && f.unusable().is_none()
    }) {
        let e = &nominal.efficiency;
        notes.push(format!(
            "inter-node measurements are idle-fabric sweeps; a job shares the fabric, so they \
             are priced at {:.0}% of their bandwidth (catalog: {:.2} of line rate in a job, \
             {:.2} idle)",
            100.0 * e.network_busbw / e.network_idle_busbw,
            e.network_busbw,
            e.network_idle_busbw
        ));
    }
    if let Some(nic) = &fits.fleet_nic {
        notes.push(format!(
            "inter-node terms are priced no faster than node {}'s NIC {} allows: {:.1} GB/s \
             (1e9 bytes/s) on idle-fabric send/recv pairs, the {} of the kept nodes' slowest \
             NICs (a synchronous step waits for its slowest member)",
            nic.node,
            nic.rail,
            nic.busbw_bytes_per_s / 1e9,
            format!("{:?}", fits.aggregate).to_lowercase()
        ));
    }
    notes
}

/// The GPU models the measurements report, against the datasheet that prices them.
fn gpu_model_notes(m: &Measurements, nominal: &Scenario) -> Vec<String> {
    let mut notes = Vec::new();
    for model in m
        .gpu_models
        .values()
        .collect::<std::collections::BTreeSet<_>>()
    {
        let priced_as = &nominal.cluster.gpu;
        if crate::catalog::gpu_for_model_name(model).is_some() {
            notes.push(format!(
                "measured GPUs report as {model}, priced against the {} datasheet",
                priced_as.name
            ));
        } else {
            notes.push(format!(
                "measured GPUs report as {model}, which the catalog does not know; priced \
                 against the {} datasheet",
                priced_as.name
            ));
        }
    }
    notes
}

/// Removes the records that ran on another catalog GPU than the one the cluster prices, by
/// the record's own statement or its node's: their curves would be read as efficiencies of
/// the wrong datasheet (issue 13). Each such model is named in a warning, with the preset
/// that would use them.
fn drop_foreign_gpus(nominal: &Scenario, m: &mut Measurements) {
    let priced_as = &nominal.cluster.gpu;
    let foreign_id =
        |model: &str| crate::catalog::gpu_named(model).filter(|id| *id != priced_as.id);
    let mut models: std::collections::BTreeSet<(String, &'static str)> = Default::default();
    let keep: Vec<bool> = m
        .records
        .iter()
        .map(|r| {
            match m
                .gpu_model_of(r)
                .and_then(|g| foreign_id(g).map(|id| (g, id)))
            {
                Some((model, id)) => {
                    models.insert((model.to_string(), id));
                    false
                }
                None => true,
            }
        })
        .collect();
    let mut keep = keep.into_iter();
    m.records.retain(|_| keep.next().unwrap_or(true));
    // Their models are not priced against anything now: only the warning below names them.
    m.gpu_models.retain(|_, model| foreign_id(model).is_none());
    for (model, id) in models {
        let preset = crate::catalog::CLUSTERS
            .iter()
            .find(|c| c.gpu == id)
            .map_or(String::new(), |c| format!("; pass --cluster {}", c.id));
        m.notes.push(format!(
            "WARNING: the measurements come from {model} ({id}) but the cluster prices {} ({}): \
             they are not used and the catalog prices those terms{preset}",
            priced_as.id, priced_as.name
        ));
    }
}

/// What keeping the excluded nodes costs the best layout.
fn keep_cost_line(without: &Scenario, all: &Fits, nodes: &[String]) -> String {
    let best = |s: &Scenario| {
        crate::search::search(s, &crate::search::Constraints::default(), 1)
            .ranked
            .first()
            .map(|e| e.step_time_s)
    };
    let with = Scenario::measured(
        without.model.clone(),
        without.training.clone(),
        without.cluster.clone(),
        without.gpus,
        without.efficiency.clone(),
        all,
    );
    match (best(without), best(&with)) {
        (Some(a), Some(b)) => format!(
            "keeping {} costs {:+.3} s per step ({:+.1}%) on the best layout",
            nodes.join(", "),
            b - a,
            (b / a - 1.0) * 100.0
        ),
        _ => format!("keeping {}: no layout fits either way", nodes.join(", ")),
    }
}
