//! Measurement flags: where measurements come from, how they are screened and aggregated, and
//! the scenario they price.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Args;

use crate::catalog::NOMINAL;
use crate::cost::Scenario;
use crate::error::bad_input;
use crate::fit::fleet::Aggregate;
use crate::fit::{fit_all, FitOptions, Fits};
use crate::ingest::prometheus::PromSource;
use crate::ingest::snapshot::Snapshot;
use crate::ingest::{files, Measurements};
use crate::mesh::Precision;
use crate::report::doc::{MeasurementsDoc, StragglerDoc};

/// Where measured figures come from; without any, the catalog prices everything.
#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Query the Prometheus HTTP API at this URL for the agents' metrics.
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus: Option<String>,
    /// Bearer token for Prometheus.
    #[arg(long, env = "PROMETHEUS_TOKEN", hide_env_values = true)]
    pub prometheus_token: Option<String>,
    /// Basic-auth user for Prometheus.
    #[arg(long, env = "PROMETHEUS_USER")]
    pub prometheus_user: Option<String>,
    /// Basic-auth password for Prometheus.
    #[arg(long, env = "PROMETHEUS_PASSWORD", hide_env_values = true)]
    pub prometheus_password: Option<String>,
    /// Label matchers scoping every query, e.g. '{pool="train-a"}'.
    #[arg(long)]
    pub selector: Option<String>,
    /// Read the latest sample within this window (e.g. 24h) instead of the latest scrape.
    #[arg(long)]
    pub window: Option<String>,
    /// Prometheus request timeout, e.g. 30s.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Snapshot files, microbench JSON lines or nccl-tests logs.
    #[arg(long, num_args = 1..)]
    pub measurements: Vec<PathBuf>,
    /// Ignore measurements older than this, e.g. 7d.
    #[arg(long)]
    pub max_age: Option<String>,
    /// How node figures become fleet figures.
    #[arg(long, value_enum, default_value_t = Aggregate::Slowest)]
    pub aggregate: Aggregate,
    /// A node more than this fraction below the fleet median is flagged.
    #[arg(long, default_value_t = 0.10)]
    pub straggler_threshold: f64,
    /// Leave these nodes out.
    #[arg(long, num_args = 1..)]
    pub exclude: Vec<String>,
    /// Leave out every flagged node.
    #[arg(long)]
    pub exclude_degraded: bool,
}

/// Parses 90s, 30m, 24h, 7d, or plain seconds.
pub fn parse_duration(flag: &str, s: &str) -> anyhow::Result<Duration> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let mult = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => bail!(bad_input(flag, s, "a duration such as 90s, 30m, 24h or 7d")),
    };
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v * mult)),
        _ => bail!(bad_input(flag, s, "a duration such as 90s, 30m, 24h or 7d")),
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl MeasureArgs {
    /// Whether any source was given.
    pub fn any(&self) -> bool {
        self.prometheus.is_some() || !self.measurements.is_empty()
    }

    /// The Prometheus source, if one was given.
    pub fn prom(&self) -> anyhow::Result<Option<PromSource>> {
        let Some(url) = &self.prometheus else {
            return Ok(None);
        };
        if let Some(w) = &self.window {
            parse_duration("--window", w)?;
        }
        let basic = match (&self.prometheus_user, &self.prometheus_password) {
            (Some(u), Some(p)) => Some((u.clone(), p.clone())),
            (None, None) => None,
            _ => bail!(bad_input(
                "--prometheus-user/--prometheus-password",
                "one of them",
                "both or neither"
            )),
        };
        Ok(Some(PromSource {
            url: url.clone(),
            bearer: self.prometheus_token.clone(),
            basic,
            timeout: parse_duration("--timeout", &self.timeout)?,
            selector: self.selector.clone(),
            window: self.window.clone(),
        }))
    }

    /// Reads every source, screens stale and simulated data, and returns what is left with a
    /// snapshot of the Prometheus part.
    pub fn load(&self) -> anyhow::Result<(Measurements, Option<Snapshot>)> {
        let mut m = Measurements::default();
        let mut snapshot = None;
        if let Some(src) = self.prom()? {
            let (pm, snap) = src.fetch(now())?;
            m.records.extend(pm.records);
            m.notes.extend(pm.notes);
            m.sources.extend(pm.sources);
            m.gpu_models.extend(pm.gpu_models);
            snapshot = Some(snap);
        }
        for path in &self.measurements {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            files::read(&text, &path.display().to_string(), &mut m)?;
        }
        let max_age = self
            .max_age
            .as_deref()
            .map(|a| parse_duration("--max-age", a))
            .transpose()?;
        m.screen(now(), max_age.map(|d| d.as_secs_f64()));
        if !(0.0..1.0).contains(&self.straggler_threshold) {
            bail!(bad_input(
                "--straggler-threshold",
                self.straggler_threshold,
                "a fraction between 0 and 1"
            ));
        }
        Ok((m, snapshot))
    }

    /// Fit options from the flags.
    pub fn fit_options(&self, precision: Precision) -> FitOptions {
        FitOptions {
            aggregate: self.aggregate,
            threshold: self.straggler_threshold,
            exclude: self.exclude.clone(),
            exclude_degraded: self.exclude_degraded,
            gemm_dtype: match precision {
                Precision::Bf16 => record::Dtype::Bf16,
                Precision::Fp8 => record::Dtype::Fp8E4m3,
            },
        }
    }
}

/// The priced scenario and what the document says about its measurements.
pub struct Priced {
    /// The scenario, measured where measurements exist.
    pub scenario: Scenario,
    /// The fits, when measurements were given.
    pub fits: Option<Fits>,
    /// The measurements section.
    pub doc: Option<MeasurementsDoc>,
    /// Lines for the notes.
    pub notes: Vec<String>,
}

/// Builds the measured scenario from a nominal one, or returns the nominal one unchanged.
pub fn price(nominal: Scenario, args: &MeasureArgs) -> anyhow::Result<Priced> {
    if !args.any() {
        return Ok(Priced {
            scenario: nominal,
            fits: None,
            doc: None,
            notes: Vec::new(),
        });
    }
    let (m, _) = args.load()?;
    if m.records.is_empty() {
        let mut notes = m.notes.clone();
        notes.push("no usable measurements: every term falls back to catalog figures".into());
        let doc = MeasurementsDoc {
            sources: m.sources,
            notes: m.notes,
            ..Default::default()
        };
        return Ok(Priced {
            scenario: nominal,
            fits: None,
            doc: Some(doc),
            notes,
        });
    }
    let peak = match nominal.training.precision {
        Precision::Fp8 => nominal
            .cluster
            .gpu
            .fp8_flops
            .unwrap_or(nominal.cluster.gpu.bf16_flops),
        Precision::Bf16 => nominal.cluster.gpu.bf16_flops,
    };
    let opts = args.fit_options(nominal.training.precision);
    let fits = fit_all(&m.records, peak, &opts);
    let mut notes = m.notes.clone();
    let mut keep_cost = None;
    if !fits.excluded.is_empty() {
        let all = fit_all(
            &m.records,
            peak,
            &FitOptions {
                exclude: Vec::new(),
                exclude_degraded: false,
                ..opts.clone()
            },
        );
        keep_cost = Some((
            all,
            fits.excluded
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>(),
        ));
    }
    if fits
        .fleet
        .iter()
        .any(|f| f.scope == record::Scope::InterNode)
    {
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
    // Measurements of another GPU than the one the cluster preset prices would be read as
    // efficiencies of the wrong datasheet: say so loudly instead.
    for model in m
        .gpu_models
        .values()
        .collect::<std::collections::BTreeSet<_>>()
    {
        let priced_as = &nominal.cluster.gpu;
        match crate::catalog::gpu_for_model_name(model) {
            Some(g) if g.id != priced_as.id => {
                let preset = crate::catalog::CLUSTERS.iter().find(|c| c.gpu == g.id).map_or(String::new(), |c| format!("; pass --cluster {}", c.id));
                notes.push(format!("WARNING: the measurements come from {model} ({}) but the cluster prices {} ({}){preset}", g.id, priced_as.id, priced_as.name));
            }
            Some(_) => notes.push(format!("measured GPUs report as {model}, priced against the {} datasheet", priced_as.name)),
            None => notes.push(format!("measured GPUs report as {model}, which the catalog does not know; priced against the {} datasheet", priced_as.name)),
        }
    }
    let doc = MeasurementsDoc {
        sources: m.sources.clone(),
        notes: m.notes.clone(),
        nodes: fits.nodes.clone(),
        aggregate: format!("{:?}", fits.aggregate).to_lowercase(),
        stragglers: fits
            .stragglers
            .iter()
            .map(|s| StragglerDoc {
                node: s.node.clone(),
                what: s.what.clone(),
                value: s.value,
                fleet_median: s.fleet_median,
                shortfall: s.shortfall(),
            })
            .collect(),
        excluded: fits.excluded.clone(),
        keep_cost: None,
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
        ..
    } = nominal;
    let scenario = Scenario::measured(model, training, cluster, gpus, NOMINAL, &fits);
    let mut priced = Priced {
        scenario,
        fits: Some(fits),
        doc: Some(doc),
        notes,
    };
    if let Some((all, nodes)) = keep_cost {
        priced.doc.as_mut().expect("set above").keep_cost =
            Some(keep_cost_line(&priced.scenario, &all, &nodes));
    }
    Ok(priced)
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
        NOMINAL,
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
