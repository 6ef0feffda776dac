//! Measurement flags: where measurements come from and how they are screened and aggregated.
//! The pricing itself is the library's (`tuner::measure`).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::bail;
use clap::Args;

use crate::exit::bad_flag;
use tuner::cost::Scenario;
use tuner::fit::fleet::Aggregate;
use tuner::fit::FitOptions;
use tuner::ingest::prometheus::fleet::{FleetOptions, FleetQuery};
use tuner::ingest::prometheus::PromSource;
use tuner::ingest::snapshot::Snapshot;
use tuner::ingest::{files, Measurements};
use tuner::measure::{self, Priced};
use tuner::mesh::Precision;

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
    /// Prometheus request timeout, e.g. 30s: one deadline per query for connecting, the
    /// headers and the whole reply.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Snapshot files, microbench JSON lines, nccl-tests logs, CSV tables (nccl-tests-shaped,
    /// GEMM sweeps, attention timings) or directories of them.
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
    /// How Prometheus is read: every node's series (raw), reduced in Prometheus at query time
    /// to the fleet's figures per GPU model and the stragglers by name (reduced), or the same
    /// figures as the chart's meshfit.fleet.curves rules record them (recorded); auto reads
    /// raw up to 128 nodes, past that recorded where the curves stand for the fleet asked for
    /// and reduced where not.
    #[arg(long, value_enum, default_value_t = FleetQuery::Auto)]
    pub fleet_query: FleetQuery,
}

/// Parses a positive duration: humantime's syntax (90s, 30m, 24h, 7d, 1h30m, 250ms) or plain
/// seconds (90, 0.5).
pub fn parse_duration(flag: &str, s: &str) -> anyhow::Result<Duration> {
    let t = s.trim();
    let d = match t.parse::<f64>() {
        Ok(secs) if secs > 0.0 => Duration::try_from_secs_f64(secs).ok(),
        Ok(_) => None,
        Err(_) => humantime::parse_duration(t).ok(),
    };
    match d {
        Some(d) if !d.is_zero() => Ok(d),
        _ => bail!(bad_flag(
            flag,
            s,
            "a positive duration such as 90s, 30m, 24h, 7d or 1h30m, or plain seconds"
        )),
    }
}

/// A duration as PromQL writes one: whole seconds, else milliseconds (humantime reads `1h 30m`
/// and `2days`, which a PromQL range does not).
fn promql_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis().max(1))
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
        let window = self
            .window
            .as_deref()
            .map(|w| parse_duration("--window", w).map(promql_duration))
            .transpose()?;
        let basic = match (&self.prometheus_user, &self.prometheus_password) {
            (Some(u), Some(p)) => Some((u.clone(), p.clone())),
            (None, None) => None,
            _ => bail!(bad_flag(
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
            window,
        }))
    }

    /// Reads every source, screens stale and simulated data, and returns what is left with a
    /// snapshot of the Prometheus part.
    pub fn load(&self) -> anyhow::Result<(Measurements, Option<Snapshot>)> {
        self.load_as(self.fleet_query)
    }

    /// [`MeasureArgs::load`], reading Prometheus as `mode` says.
    pub fn load_as(&self, mode: FleetQuery) -> anyhow::Result<(Measurements, Option<Snapshot>)> {
        if !(0.0..1.0).contains(&self.straggler_threshold) {
            bail!(bad_flag(
                "--straggler-threshold",
                self.straggler_threshold,
                "a fraction between 0 and 1"
            ));
        }
        let max_age_s = self
            .max_age
            .as_deref()
            .map(|a| parse_duration("--max-age", a))
            .transpose()?
            .map(|d| d.as_secs_f64());
        let mut m = Measurements::default();
        let mut snapshot = None;
        if let Some(src) = self.prom()? {
            let opts = FleetOptions {
                mode,
                aggregate: self.aggregate,
                threshold: self.straggler_threshold,
                exclude: self.exclude.clone(),
                exclude_degraded: self.exclude_degraded,
                max_age_s,
            };
            let (pm, snap) = src.fetch_fleet(now(), &opts)?;
            m.records.extend(pm.records);
            m.notes.extend(pm.notes);
            m.sources.extend(pm.sources);
            // The files after it list their GPUs against its, by one rule (issue 31, item 2).
            m.add_gpus(pm.gpus)?;
            m.fleet = pm.fleet;
            snapshot = Some(snap);
        }
        for path in &self.measurements {
            files::read_path(path, &mut m)?;
        }
        m.screen(now(), max_age_s);
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
                Precision::Fp8 | Precision::Fp8Rowwise | Precision::Fp8Blockwise => {
                    record::Dtype::Fp8E4m3
                }
            },
            // Set by the pricing, which knows the GPU.
            attention_peak_flops: None,
        }
    }
}

/// The catalog GPU `--measurements-gpu` names.
pub(crate) fn measurements_gpu_id(id: Option<&str>) -> anyhow::Result<Option<&'static str>> {
    let Some(id) = id else { return Ok(None) };
    match tuner::catalog::gpu(id) {
        Ok(g) => Ok(Some(g.id)),
        Err(_) => Err(bad_flag(
            "--measurements-gpu",
            id,
            "a catalog GPU id (tuner clusters lists them)",
        )
        .into()),
    }
}

/// The scenario priced from the flags' measurements, or the nominal one when none were given.
pub fn price(nominal: Scenario, args: &MeasureArgs) -> anyhow::Result<Priced> {
    if !args.any() {
        return Ok(Priced::nominal(nominal));
    }
    let (m, _) = args.load()?;
    let opts = args.fit_options(nominal.training.precision);
    Ok(measure::price(nominal, m, &opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_units_compounds_and_plain_seconds() {
        let d = |s| parse_duration("--max-age", s).unwrap();
        assert_eq!(d("90s"), Duration::from_secs(90));
        assert_eq!(d("30m"), Duration::from_secs(1800));
        assert_eq!(d("24h"), Duration::from_secs(86_400));
        assert_eq!(d("7d"), Duration::from_secs(7 * 86_400));
        assert_eq!(d("1h30m"), Duration::from_secs(5400));
        assert_eq!(d("250ms"), Duration::from_millis(250));
        assert_eq!(d(" 90 "), Duration::from_secs(90));
        assert_eq!(d("0.5"), Duration::from_millis(500));
        assert_eq!(d("1.5h"), Duration::from_secs(5400));
    }

    #[test]
    fn a_bad_duration_names_the_flag_the_value_and_the_syntax() {
        for bad in ["", "0", "0s", "-5", "5x", "inf", "NaN", "h"] {
            let err = parse_duration("--window", bad).unwrap_err().to_string();
            assert!(
                err.contains(&format!("--window = {bad}"))
                    && err.contains("90s, 30m, 24h, 7d or 1h30m"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_window_reaches_promql_in_its_own_units() {
        let window = |s| promql_duration(parse_duration("--window", s).unwrap());
        assert_eq!(window("1h 30m"), "5400s");
        assert_eq!(window("2days"), "172800s");
        assert_eq!(window("1500ms"), "1500ms");
    }
}
