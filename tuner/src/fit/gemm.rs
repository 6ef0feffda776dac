//! GEMM efficiency curves from GEMM records: eff(m,n,k) = e_max / ((1 + d0/min(n,k))(1 + d0/m)),
//! the same form as the catalog's, fitted per GPU.

use serde::Serialize;

/// A GEMM point: m, n, k and efficiency against the datasheet peak.
pub type GemmPoint = (f64, f64, f64, f64);

/// A fitted GEMM efficiency curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GemmCurve {
    /// Efficiency of an infinitely large GEMM against the datasheet peak.
    pub peak_efficiency: f64,
    /// Dimension at which efficiency halves.
    pub half_dim: f64,
    /// Root mean square of the relative residuals.
    pub rms_rel_error: f64,
    /// Points used.
    pub points: usize,
}

impl GemmCurve {
    /// Efficiency of one shape.
    pub fn efficiency(&self, m: f64, n: f64, k: f64) -> f64 {
        self.peak_efficiency / ((1.0 + self.half_dim / n.min(k)) * (1.0 + self.half_dim / m))
    }
}

/// Fits the curve to (m, n, k, efficiency) points by a log-spaced search over d0 with the best
/// e_max in closed form for each (least squares in log space); `None` with fewer than 3 points.
pub fn fit(points: &[GemmPoint]) -> Option<GemmCurve> {
    let pts: Vec<_> = points
        .iter()
        .copied()
        .filter(|p| p.3 > 0.0 && p.0 > 0.0 && p.1 > 0.0 && p.2 > 0.0)
        .collect();
    if pts.len() < 3 {
        return None;
    }
    let shape =
        |d0: f64, (m, n, k, _): (f64, f64, f64, f64)| ((1.0 + d0 / n.min(k)) * (1.0 + d0 / m)).ln();
    let mut best: Option<(f64, f64, f64)> = None;
    for i in 0..=200 {
        let d0 = 10f64.powf(i as f64 / 50.0); // 1 .. 10^4
        let log_e: f64 =
            pts.iter().map(|&p| p.3.ln() + shape(d0, p)).sum::<f64>() / pts.len() as f64;
        let sse: f64 = pts
            .iter()
            .map(|&p| (p.3.ln() - (log_e - shape(d0, p))).powi(2))
            .sum();
        // No GEMM beats the datasheet peak.
        if log_e.exp() <= 1.0 && best.is_none_or(|b| sse < b.2) {
            best = Some((d0, log_e.exp(), sse));
        }
    }
    let (half_dim, peak_efficiency, _) = best?;
    let curve = GemmCurve {
        peak_efficiency,
        half_dim,
        rms_rel_error: 0.0,
        points: pts.len(),
    };
    let sq: f64 = pts
        .iter()
        .map(|&(m, n, k, e)| (curve.efficiency(m, n, k) / e - 1.0).powi(2))
        .sum();
    Some(GemmCurve {
        rms_rel_error: (sq / pts.len() as f64).sqrt(),
        ..curve
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_the_catalog_form() {
        let truth = GemmCurve {
            peak_efficiency: 0.8,
            half_dim: 120.0,
            rms_rel_error: 0.0,
            points: 0,
        };
        let pts: Vec<_> = [256.0, 512.0, 1024.0, 4096.0, 8192.0, 16384.0]
            .iter()
            .flat_map(|&n| [(n, n, n), (16384.0, n, 4096.0)])
            .map(|(m, n, k)| (m, n, k, truth.efficiency(m, n, k)))
            .collect();
        let c = fit(&pts).unwrap();
        assert!((c.peak_efficiency / 0.8 - 1.0).abs() < 0.02, "{c:?}");
        assert!((c.half_dim / 120.0 - 1.0).abs() < 0.06, "{c:?}");
        assert!(c.rms_rel_error < 0.01);
    }
}
