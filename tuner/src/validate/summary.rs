//! Scores of a validation: overall, per group, and per bucket (GPU, scale, framework,
//! precision, file), each beside the constant-MFU baseline.

use std::collections::BTreeMap;

use serde::Serialize;

use super::RunPrediction;
use crate::stats::{median, spearman};

/// Accuracy over a set of runs.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    /// What the runs share: a group, a GPU, a scale band, a framework, a precision or a file.
    pub name: String,
    /// Runs in it.
    pub runs: usize,
    /// Median |error|.
    pub median_abs_error: f64,
    /// Mean signed error: below zero the model is too fast (optimistic).
    pub mean_signed_error: f64,
    /// Median |error| of the constant-MFU baseline on the same runs.
    pub baseline_median_abs_error: f64,
    /// Spearman rank correlation between predicted and observed throughput; `None` with
    /// fewer than 3 runs, or when every prediction ties (runs that differ only in what the
    /// runs file does not carry).
    pub spearman: Option<f64>,
}

/// Accuracy over every priced run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Runs predicted.
    pub runs: usize,
    /// Median |error|.
    pub median_abs_error: f64,
    /// Mean signed error.
    pub mean_signed_error: f64,
    /// Largest |error|.
    pub max_abs_error: f64,
    /// Runs with |error| <= 10%.
    pub within_10pct: usize,
    /// The naive baseline: one MFU per runs file, step = FLOPs / (GPUs x peak x MFU), the MFU
    /// that minimises the file's median |error|.
    pub baseline_mfu: BTreeMap<String, f64>,
    /// Its median |error| over every run.
    pub baseline_median_abs_error: f64,
    /// Per group.
    pub groups: Vec<Bucket>,
    /// Per runs file.
    pub by_file: Vec<Bucket>,
    /// Per GPU.
    pub by_gpu: Vec<Bucket>,
    /// Per scale: GPUs <= 8, <= 512, <= 4096, more.
    pub by_scale: Vec<Bucket>,
    /// Per framework.
    pub by_framework: Vec<Bucket>,
    /// Per GEMM precision.
    pub by_precision: Vec<Bucket>,
}

/// The scale band of a GPU count.
fn scale(gpus: u32) -> &'static str {
    match gpus {
        0..=8 => "<= 8 GPUs",
        9..=512 => "9-512 GPUs",
        513..=4096 => "513-4096 GPUs",
        _ => "> 4096 GPUs",
    }
}

/// Scores `runs`.
pub fn summarize(runs: &[RunPrediction]) -> Summary {
    let mut per_file: BTreeMap<String, Vec<&RunPrediction>> = BTreeMap::new();
    for r in runs {
        per_file.entry(r.file.clone()).or_default().push(r);
    }
    let baseline_mfu: BTreeMap<String, f64> = per_file
        .into_iter()
        .map(|(f, rs)| (f, baseline_mfu(&rs)))
        .collect();
    let baseline = |r: &RunPrediction| {
        let mfu = baseline_mfu.get(&r.file).copied().unwrap_or(0.5);
        (r.ideal_iteration_time_s / mfu / r.observed_iteration_time_s - 1.0).abs()
    };
    let bucket = |name: String, rs: &[&RunPrediction]| Bucket {
        name,
        runs: rs.len(),
        median_abs_error: median(rs.iter().map(|r| r.error.abs()).collect()),
        mean_signed_error: rs.iter().map(|r| r.error).sum::<f64>() / rs.len().max(1) as f64,
        baseline_median_abs_error: median(rs.iter().map(|r| baseline(r)).collect()),
        spearman: (rs.len() >= 3)
            .then(|| {
                spearman(
                    &rs.iter()
                        .map(|r| r.predicted_tokens_per_s)
                        .collect::<Vec<_>>(),
                    &rs.iter()
                        .map(|r| r.observed_tokens_per_s)
                        .collect::<Vec<_>>(),
                )
            })
            .flatten(),
    };
    let by = |key: &dyn Fn(&RunPrediction) -> String| {
        let mut m: BTreeMap<String, Vec<&RunPrediction>> = BTreeMap::new();
        for r in runs {
            m.entry(key(r)).or_default().push(r);
        }
        m.into_iter()
            .map(|(k, rs)| bucket(k, &rs))
            .collect::<Vec<_>>()
    };
    let abs: Vec<f64> = runs.iter().map(|r| r.error.abs()).collect();
    Summary {
        runs: runs.len(),
        median_abs_error: median(abs.clone()),
        mean_signed_error: runs.iter().map(|r| r.error).sum::<f64>() / runs.len().max(1) as f64,
        max_abs_error: abs.iter().cloned().fold(0.0, f64::max),
        within_10pct: abs.iter().filter(|&&e| e <= 0.10).count(),
        baseline_median_abs_error: median(runs.iter().map(baseline).collect()),
        baseline_mfu: baseline_mfu.clone(),
        groups: by(&|r| r.group.clone()),
        by_file: by(&|r| r.file.clone()),
        by_gpu: by(&|r| r.gpu.clone()),
        by_scale: by(&|r| scale(r.gpus).to_string()),
        by_framework: by(&|r| r.framework.to_string()),
        by_precision: by(&|r| r.precision.to_string()),
    }
}

/// The one MFU, in steps of 0.001, that minimises the median |error| of step = ideal / MFU.
fn baseline_mfu(runs: &[&RunPrediction]) -> f64 {
    let score = |mfu: f64| {
        median(
            runs.iter()
                .map(|r| (r.ideal_iteration_time_s / mfu / r.observed_iteration_time_s - 1.0).abs())
                .collect(),
        )
    };
    (50..=800)
        .map(|i| f64::from(i) / 1000.0)
        .min_by(|a, b| score(*a).total_cmp(&score(*b)))
        .unwrap_or(0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_bands_follow_the_issue() {
        assert_eq!(scale(8), "<= 8 GPUs");
        assert_eq!(scale(512), "9-512 GPUs");
        assert_eq!(scale(4096), "513-4096 GPUs");
        assert_eq!(scale(6144), "> 4096 GPUs");
    }
}
