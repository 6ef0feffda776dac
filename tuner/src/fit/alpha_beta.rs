//! Latency-bandwidth curves: time(S) = alpha + S / beta, fitted robustly to one sweep.
//!
//! nccl-tests sweeps span nine orders of magnitude in size and have outliers (a stalled
//! iteration, a protocol change-over from LL to LL128 to Simple), so the fit minimises relative
//! residuals with Huber weights (iteratively reweighted least squares; Huber 1964), and splits
//! the sweep in two where one line cannot follow it.

use serde::Serialize;

/// One straight piece of a curve, valid from `from_bytes` up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Segment {
    /// Smallest size this piece covers, bytes.
    pub from_bytes: f64,
    /// Latency, seconds.
    pub alpha_s: f64,
    /// Algorithm bandwidth, bytes/s.
    pub beta_bytes_per_s: f64,
}

/// A fitted curve with its quality.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curve {
    /// One or two pieces, by size.
    pub segments: Vec<Segment>,
    /// Coefficient of determination of log time.
    pub r2: f64,
    /// Largest |predicted/measured - 1| over the points.
    pub max_rel_error: f64,
    /// Root mean square of the relative residuals: the curve's uncertainty.
    pub rms_rel_error: f64,
    /// Points used.
    pub points: usize,
    /// The sweep never left the latency-bound regime (time flat or falling with size): beta is
    /// the algorithm bandwidth at the largest size, a lower bound.
    pub bandwidth_lower_bound: bool,
}

impl Curve {
    /// Predicted time for `bytes`.
    pub fn time_s(&self, bytes: f64) -> f64 {
        let seg = self
            .segments
            .iter()
            .rev()
            .find(|s| bytes >= s.from_bytes)
            .unwrap_or(&self.segments[0]);
        seg.alpha_s + bytes / seg.beta_bytes_per_s
    }

    /// Latency of the small-size piece.
    pub fn alpha_s(&self) -> f64 {
        self.segments[0].alpha_s
    }

    /// Bandwidth of the large-size piece.
    pub fn beta_bytes_per_s(&self) -> f64 {
        self.segments[self.segments.len() - 1].beta_bytes_per_s
    }
}

/// Weighted least squares of t = a + b·S with weights w; returns (a, b).
fn weighted_line(points: &[(f64, f64)], w: &[f64]) -> Option<(f64, f64)> {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (&(x, y), &wi) in points.iter().zip(w) {
        sw += wi;
        sx += wi * x;
        sy += wi * y;
        sxx += wi * x * x;
        sxy += wi * x * y;
    }
    let det = sw * sxx - sx * sx;
    if det.abs() < f64::MIN_POSITIVE || sw == 0.0 {
        return None;
    }
    let b = (sw * sxy - sx * sy) / det;
    let a = (sy - b * sx) / sw;
    Some((a, b))
}

/// Huber fit of one line to (bytes, seconds) points in relative terms. Alpha and beta are kept
/// physical: alpha >= 0 and beta > 0.
fn huber_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    // Relative residuals: weight 1/t² makes each point count by its relative error.
    let base: Vec<f64> = points.iter().map(|&(_, t)| 1.0 / (t * t)).collect();
    let mut w = base.clone();
    let mut line = weighted_line(points, &w)?;
    for _ in 0..30 {
        let rel: Vec<f64> = points
            .iter()
            .map(|&(s, t)| (t - (line.0 + line.1 * s)) / t)
            .collect();
        let mut abs: Vec<f64> = rel.iter().map(|r| r.abs()).collect();
        abs.sort_by(f64::total_cmp);
        // Scale from the median absolute residual; 1.345 sigma is Huber's 95%-efficiency knee.
        let scale = (abs[abs.len() / 2] / 0.6745).max(1e-3);
        let k = 1.345 * scale;
        for (i, r) in rel.iter().enumerate() {
            w[i] = base[i] * if r.abs() <= k { 1.0 } else { k / r.abs() };
        }
        let next = weighted_line(points, &w)?;
        let done = (next.0 - line.0).abs() <= 1e-12 + 1e-9 * line.0.abs()
            && (next.1 - line.1).abs() <= 1e-9 * line.1.abs();
        line = next;
        if done {
            break;
        }
    }
    let (mut a, b) = line;
    if b <= 0.0 {
        return None;
    }
    if a < 0.0 {
        // A negative latency means the small sizes are flat at the start-up cost: take the
        // smallest measured time as alpha instead of extrapolating below zero.
        a = points
            .iter()
            .map(|p| p.1)
            .fold(f64::INFINITY, f64::min)
            .max(0.0)
            * 0.5;
    }
    Some((a, b))
}

/// A single piece is kept unless its clipped residual (see [`score`]) exceeds this; then the
/// sweep is split in two where that helps by at least half.
const SPLIT_ABOVE: f64 = 0.03;

/// Mean relative residual with each point clipped at 10%, so one outlier cannot force a split
/// but a protocol change-over, which bends many points, does.
fn score(c: &Curve, pts: &[(f64, f64)]) -> f64 {
    pts.iter()
        .map(|&(s, t)| (c.time_s(s) / t - 1.0).abs().min(0.10))
        .sum::<f64>()
        / pts.len() as f64
}

/// Fits a curve to (bytes, seconds) points of one sweep; `None` with fewer than 3 usable points.
pub fn fit(points: &[(f64, f64)]) -> Option<Curve> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(s, t)| s > 0.0 && t > 0.0 && t.is_finite())
        .collect();
    if pts.len() < 3 {
        return None;
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some((a, b)) = huber_line(&pts) else {
        // Flat or falling times: only latency is visible.
        let alpha = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let (s_max, t_max) = pts[pts.len() - 1];
        let seg = vec![Segment {
            from_bytes: 0.0,
            alpha_s: alpha,
            beta_bytes_per_s: s_max / t_max,
        }];
        return Some(Curve {
            bandwidth_lower_bound: true,
            ..quality(seg, &pts)
        });
    };
    let single = quality(
        vec![Segment {
            from_bytes: 0.0,
            alpha_s: a,
            beta_bytes_per_s: 1.0 / b,
        }],
        &pts,
    );
    let single_score = score(&single, &pts);
    if single_score <= SPLIT_ABOVE || pts.len() < 6 {
        return Some(anchor_bandwidth(single, &pts));
    }
    let mut best = (single_score, single);
    for cut in 3..=pts.len() - 3 {
        let (lo, hi) = pts.split_at(cut);
        let (Some((a0, b0)), Some((a1, b1))) = (huber_line(lo), huber_line(hi)) else {
            continue;
        };
        let c = quality(
            vec![
                Segment {
                    from_bytes: 0.0,
                    alpha_s: a0,
                    beta_bytes_per_s: 1.0 / b0,
                },
                Segment {
                    from_bytes: hi[0].0,
                    alpha_s: a1,
                    beta_bytes_per_s: 1.0 / b1,
                },
            ],
            &pts,
        );
        let sc = score(&c, &pts);
        if sc < best.0 && sc < 0.5 * single_score {
            best = (sc, c);
        }
    }
    Some(anchor_bandwidth(best.1, &pts))
}

/// Re-estimates the last piece's bandwidth from the three largest sizes, where bandwidth is
/// measured best: the median of S / (t - alpha), with the latency of the small sizes. A line
/// through the whole piece lets its intercept trade against its slope; the plateau does not.
fn anchor_bandwidth(curve: Curve, pts: &[(f64, f64)]) -> Curve {
    let last = curve.segments[curve.segments.len() - 1];
    let alpha = curve.segments[0].alpha_s;
    let mut plateau: Vec<f64> = pts
        .iter()
        .rev()
        .take(3)
        .filter(|&&(s, t)| s >= last.from_bytes && t > alpha)
        .map(|&(s, t)| s / (t - alpha))
        .collect();
    if plateau.len() < 3 {
        return curve;
    }
    plateau.sort_by(f64::total_cmp);
    let mut segments = curve.segments;
    let n = segments.len();
    segments[n - 1].beta_bytes_per_s = plateau[1];
    quality(segments, pts)
}

fn quality(segments: Vec<Segment>, pts: &[(f64, f64)]) -> Curve {
    let mut c = Curve {
        segments,
        r2: 0.0,
        max_rel_error: 0.0,
        rms_rel_error: 0.0,
        points: pts.len(),
        bandwidth_lower_bound: false,
    };
    let logs: Vec<f64> = pts.iter().map(|p| p.1.ln()).collect();
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let (mut ss_res, mut ss_tot, mut sq) = (0.0, 0.0, 0.0);
    for (&(s, t), &lt) in pts.iter().zip(&logs) {
        let p = c.time_s(s);
        let rel = p / t - 1.0;
        c.max_rel_error = c.max_rel_error.max(rel.abs());
        sq += rel * rel;
        ss_res += (p.max(f64::MIN_POSITIVE).ln() - lt).powi(2);
        ss_tot += (lt - mean).powi(2);
    }
    c.rms_rel_error = (sq / pts.len() as f64).sqrt();
    c.r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_clean_line() {
        // 20 us latency, 100 GB/s.
        let pts: Vec<(f64, f64)> = (3..34)
            .map(|i| 2f64.powi(i))
            .map(|s| (s, 20e-6 + s / 100e9))
            .collect();
        let c = fit(&pts).unwrap();
        assert_eq!(c.segments.len(), 1);
        assert!((c.alpha_s() / 20e-6 - 1.0).abs() < 1e-6);
        assert!((c.beta_bytes_per_s() / 100e9 - 1.0).abs() < 1e-6);
        assert!(c.r2 > 0.999999 && c.max_rel_error < 1e-6);
    }

    #[test]
    fn shrugs_off_an_outlier() {
        let mut pts: Vec<(f64, f64)> = (10..34)
            .map(|i| 2f64.powi(i))
            .map(|s| (s, 20e-6 + s / 100e9))
            .collect();
        pts[20].1 *= 5.0;
        let c = fit(&pts).unwrap();
        assert_eq!(c.segments.len(), 1, "{c:?}");
        assert!((c.beta_bytes_per_s() / 100e9 - 1.0).abs() < 0.01, "{c:?}");
    }

    #[test]
    fn splits_at_a_protocol_change() {
        // Low-latency protocol up to 64 KiB (5 us, 10 GB/s), then Simple (30 us, 200 GB/s).
        let pts: Vec<(f64, f64)> = (3..34)
            .map(|i| 2f64.powi(i))
            .map(|s| {
                (
                    s,
                    if s <= 65536.0 {
                        5e-6 + s / 10e9
                    } else {
                        30e-6 + s / 200e9
                    },
                )
            })
            .collect();
        let c = fit(&pts).unwrap();
        assert_eq!(c.segments.len(), 2, "{c:?}");
        assert!((c.beta_bytes_per_s() / 200e9 - 1.0).abs() < 0.01);
        assert!(c.max_rel_error < 0.05);
    }
}
