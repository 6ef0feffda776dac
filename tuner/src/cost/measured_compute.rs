//! Kernel times from measurements: GEMMs by shape and layout from a sweep, fused attention by
//! length and head width, HBM bandwidth from copies; the catalog's model where nothing was
//! measured, and its shape curve anchored to the nearest measurement where a kernel lies
//! outside what was.
//!
//! Anchoring, not the catalog's own figure, prices a shape past the sweep: the catalog's
//! efficiencies are a datasheet generation's, and on the measured GPU they may be off by a
//! third (a new part whose figures are extrapolated), while its shape curve (tile and wave
//! quantization, the k-loop) is what carries from the nearest measured shape to this one.

use std::sync::Arc;

use record::GemmLayout;

use super::collective::Source;
use super::compute::{linear_gemms, ComputeModel, Kernel, NominalCompute};
use crate::fit::attention_table::{AttentionLookup, AttentionTable};
use crate::fit::gemm_table::{GemmTable, Lookup};

/// A compute model priced from measurements where they exist.
#[derive(Debug)]
pub struct MeasuredCompute {
    nominal: NominalCompute,
    gemms: Option<Arc<GemmTable>>,
    attention: Option<Arc<AttentionTable>>,
    memory_bytes_per_s: Option<f64>,
    uncertainty: f64,
}

impl MeasuredCompute {
    /// The catalog's model with measured GEMMs (their efficiency against the precision's
    /// datasheet peak), attention rates and HBM bandwidth where given; `uncertainty` is the
    /// GEMM figures' relative spread.
    pub fn new(
        nominal: NominalCompute,
        gemms: Option<Arc<GemmTable>>,
        attention: Option<Arc<AttentionTable>>,
        memory_bytes_per_s: Option<f64>,
        uncertainty: f64,
    ) -> Self {
        MeasuredCompute {
            nominal,
            gemms,
            attention,
            memory_bytes_per_s,
            uncertainty,
        }
    }

    /// Efficiency of a GEMM in BLAS terms, and whether it was measured, extrapolated from the
    /// nearest measured shape or left to the catalog.
    fn gemm_efficiency(&self, layout: GemmLayout, [m, n, k]: [f64; 3]) -> (f64, Source) {
        // The catalog's tile model has the activations' rows first; BLAS terms put them in n.
        let catalog = |s: [f64; 3]| self.nominal.gemm_efficiency(s[1], s[0], s[2]);
        let Some(table) = &self.gemms else {
            return (catalog([m, n, k]), Source::Nominal);
        };
        let recipe = self.nominal.recipe();
        // tn and nt are their own transposes with m and n swapped (C^T = B^T A^T), and
        // cuBLAS runs tiles of either orientation, so their efficiency barely changes with m
        // and n exchanged: a shape outside is looked up transposed before it is called so.
        // The transpose of nn is tt, which no training GEMM runs.
        let found = match (layout, table.lookup(layout, m, n, k)) {
            (GemmLayout::Tn | GemmLayout::Nt, Lookup::Outside { .. }) => {
                match table.lookup(layout, n, m, k) {
                    inside @ Lookup::Inside(_) => inside,
                    _ => table.lookup(layout, m, n, k),
                }
            }
            (_, found) => found,
        };
        match found {
            Lookup::Inside(e) => (e * recipe, Source::Measured),
            Lookup::Outside {
                efficiency,
                nearest,
            } => (
                efficiency * recipe * catalog([m, n, k]) / catalog(nearest),
                Source::Extrapolated,
            ),
        }
    }

    fn gemm_time(&self, layout: GemmLayout, shape: [f64; 3]) -> f64 {
        let flop = 2.0 * shape[0] * shape[1] * shape[2];
        flop / (self.nominal.peak_flops() * self.gemm_efficiency(layout, shape).0)
    }

    /// FLOP/s of a fused attention pass, with the table's answer.
    fn attention_rate(&self, seq: f64, head_dim: f64, bwd: bool) -> Option<(f64, AttentionLookup)> {
        let table = self.attention.as_ref()?;
        let found = table.lookup(seq, head_dim);
        let measured = if bwd {
            found.rates.bwd
        } else {
            found.rates.fwd
        };
        let rate = match found.outside_at {
            // The catalog's length curve, from the edge of the sweep to this call.
            Some(edge) => {
                measured * self.nominal.attention_rate(seq) / self.nominal.attention_rate(edge)
            }
            None => measured,
        };
        Some((rate, found))
    }
}

impl ComputeModel for MeasuredCompute {
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64 {
        if self.gemms.is_none() {
            return self.nominal.gemm_s(m, n, k);
        }
        self.gemm_time(GemmLayout::Tn, [n, m, k])
    }

    /// With no GEMM measured, exactly the catalog's price, which times the backward at twice
    /// the forward; with a sweep, each of the three GEMMs at its own shape and layout.
    fn linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        if self.gemms.is_none() {
            return self.nominal.linear_s(t, out, inp);
        }
        let [fwd, dgrad, wgrad] = linear_gemms(t, out, inp).map(|(l, s)| self.gemm_time(l, s));
        (fwd, dgrad + wgrad)
    }

    /// A sweep measures the training precision's GEMMs: each of the three is scaled by the
    /// catalog's bf16 time over its time at that precision for the same shape.
    fn bf16_linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        if self.gemms.is_none() {
            return self.nominal.bf16_linear_s(t, out, inp);
        }
        let (fwd, bwd) = self.linear_s(t, out, inp);
        let (nominal_fwd, nominal_bwd) = self.nominal.linear_s(t, out, inp);
        let (bf16_fwd, bf16_bwd) = self.nominal.bf16_linear_s(t, out, inp);
        (fwd * bf16_fwd / nominal_fwd, bwd * bf16_bwd / nominal_bwd)
    }

    fn attention_s(&self, flops: f64, seq: f64, head_dim: f64) -> f64 {
        match self.attention_rate(seq, head_dim, false) {
            Some((rate, _)) => flops / rate,
            None => self.nominal.attention_s(flops, seq, head_dim),
        }
    }

    fn attention_bwd_s(&self, flops: f64, seq: f64, head_dim: f64) -> f64 {
        match self.attention_rate(seq, head_dim, true) {
            Some((rate, _)) => crate::catalog::kernels::FLASH_BACKWARD * flops / rate,
            None => self.nominal.attention_bwd_s(flops, seq, head_dim),
        }
    }

    fn memory_s(&self, bytes: f64) -> f64 {
        bytes
            / self
                .memory_bytes_per_s
                .unwrap_or(self.nominal.memory_bytes_per_s())
    }

    fn host_s_per_kernel(&self) -> f64 {
        self.nominal.host_s_per_kernel()
    }

    fn source(&self) -> Source {
        if self.gemms.is_some() || self.attention.is_some() || self.memory_bytes_per_s.is_some() {
            Source::Measured
        } else {
            Source::Nominal
        }
    }

    fn origin(&self, kernel: Kernel) -> Source {
        match kernel {
            Kernel::Gemm { layout, shape } => self.gemm_efficiency(layout, shape).1,
            Kernel::Attention { seq, head_dim } => {
                match self.attention_rate(seq, head_dim, false) {
                    None => Source::Nominal,
                    // A full-mask sweep prices causal calls: causal kernels run the
                    // diagonal blocks half-empty, so their rate is not the full mask's.
                    Some((_, f))
                        if f.outside_at.is_some()
                            || f.other_head_dim.is_some()
                            || !self.attention.as_ref().is_some_and(|t| t.causal) =>
                    {
                        Source::Extrapolated
                    }
                    Some(_) => Source::Measured,
                }
            }
            Kernel::Memory if self.memory_bytes_per_s.is_some() => Source::Measured,
            Kernel::Memory => Source::Nominal,
        }
    }

    fn uncertainty(&self) -> f64 {
        self.uncertainty
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, NOMINAL};
    use crate::fit::fleet::Aggregate;
    use crate::mesh::{FlashKernel, Precision};
    use record::{Backend, Clock, Dtype, Gemm, Group, Record, Scope, Timing};

    fn nominal() -> NominalCompute {
        let a100 = catalog::gpu("a100-sxm-80gb").unwrap();
        NominalCompute::new(a100, Precision::Bf16, FlashKernel::Flash2, &NOMINAL)
    }

    fn gemm(m: u64, n: u64, k: u64, layout: GemmLayout, tflops: f64) -> Record {
        let shape = Gemm { m, n, k };
        let group = Group {
            node: None,
            gpus: vec![],
            scope: Scope::IntraNode,
            ranks: 1,
        };
        let mut r = Record::gemm(
            Backend::Cuda,
            group,
            shape,
            Dtype::Bf16,
            Timing::without_spread(shape.flop() / (tflops * 1e12), None, Clock::Imported),
        );
        r.detail.layout = Some(layout);
        r
    }

    /// A linear layer of 4096 tokens from 1024 to 3072 features on an A100 (312 TFLOP/s): the
    /// forward is cuBLAS's tn 3072 x 4096 x 1024, measured at 156 TFLOP/s (2 x 3072 x 4096 x
    /// 1024 / 156e12 = 165.2 us); the input gradient nn 1024 x 4096 x 3072 at 124.8 (206.5 us),
    /// the weight gradient nt 1024 x 3072 x 4096 at 104 (247.8 us): backward 454.3 us where one
    /// rate would say 330.4.
    #[test]
    fn each_gemm_of_a_linear_layer_is_priced_by_its_own_layout_and_shape() {
        let recs = [
            gemm(3072, 4096, 1024, GemmLayout::Tn, 156.0),
            gemm(1024, 4096, 3072, GemmLayout::Nn, 124.8),
            gemm(1024, 3072, 4096, GemmLayout::Nt, 104.0),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let peak = 312e12;
        let table = GemmTable::new(&refs, peak, Aggregate::Slowest).map(Arc::new);
        let c = MeasuredCompute::new(nominal(), table, None, None, 0.0);
        let (fwd, bwd) = c.linear_s(4096.0, 3072.0, 1024.0);
        let flop = 2.0 * 3072.0 * 4096.0 * 1024.0;
        assert!((fwd - flop / 156e12).abs() < 1e-12, "{fwd}");
        assert!((fwd / 165.2e-6 - 1.0).abs() < 1e-3);
        let expected = flop / 124.8e12 + flop / 104e12;
        assert!((bwd - expected).abs() < 1e-12, "{bwd}");
        assert!((bwd / 454.3e-6 - 1.0).abs() < 1e-3);
        assert_eq!(
            c.origin(Kernel::Gemm {
                layout: GemmLayout::Nt,
                shape: [1024.0, 3072.0, 4096.0]
            }),
            Source::Measured
        );
    }

    /// A sweep of an fp8 run's GEMMs prices a linear left in bf16 (the output layer) at the
    /// measured time scaled by the catalog's bf16 time over its fp8 time for the same GEMMs.
    #[test]
    fn a_bf16_linear_scales_the_measured_fp8_gemms_by_the_catalog_s_ratio() {
        let recs = [
            gemm(3072, 4096, 1024, GemmLayout::Tn, 900.0),
            gemm(1024, 4096, 3072, GemmLayout::Nn, 800.0),
            gemm(1024, 3072, 4096, GemmLayout::Nt, 700.0),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let fp8 = NominalCompute::new(h100, Precision::Fp8, FlashKernel::Newest, &NOMINAL);
        let table = GemmTable::new(&refs, 1978.9e12, Aggregate::Slowest).map(Arc::new);
        let c = MeasuredCompute::new(fp8.clone(), table, None, None, 0.0);
        let (t, out, inp) = (4096.0, 3072.0, 1024.0);
        let (fwd, bwd) = c.linear_s(t, out, inp);
        let (hf, hb) = c.bf16_linear_s(t, out, inp);
        let ((nf, nb), (bf, bb)) = (fp8.linear_s(t, out, inp), fp8.bf16_linear_s(t, out, inp));
        assert!((hf / fwd - bf / nf).abs() < 1e-12 && (hb / bwd - bb / nb).abs() < 1e-12);
        // k = 1024 is a short fp8 k-loop: bf16 takes 1.25x, not the 1.74x of long ones.
        assert!((bf / nf - 1.246).abs() < 1e-3, "{}", bf / nf);
    }

    /// Past the sweep the catalog's shape curve carries the measured level: a shape twice as
    /// large in every dimension keeps the measured 0.5 times the catalog's ratio between the
    /// two shapes, and is called extrapolated.
    #[test]
    fn past_the_sweep_the_catalog_curve_is_anchored_to_the_nearest_measurement() {
        let recs = [gemm(4096, 4096, 4096, GemmLayout::Tn, 156.0)];
        let refs: Vec<&Record> = recs.iter().collect();
        let table = GemmTable::new(&refs, 312e12, Aggregate::Slowest).map(Arc::new);
        let catalog_model = nominal();
        let ratio = catalog_model.gemm_efficiency(8192.0, 8192.0, 8192.0)
            / catalog_model.gemm_efficiency(4096.0, 4096.0, 4096.0);
        let c = MeasuredCompute::new(catalog_model, table, None, None, 0.0);
        let (e, source) = c.gemm_efficiency(GemmLayout::Tn, [8192.0; 3]);
        assert!((e - 0.5 * ratio).abs() < 1e-12, "{e}");
        assert_eq!(source, Source::Extrapolated);
        // Not a cube: the catalog's tile model takes the activations' rows first, BLAS puts
        // them in n, so the anchor reads tn [m = 8192 out, n = 384 tokens] as 384 rows.
        let recs = [gemm(4096, 1024, 4096, GemmLayout::Tn, 156.0)];
        let refs: Vec<&Record> = recs.iter().collect();
        let table = GemmTable::new(&refs, 312e12, Aggregate::Slowest).map(Arc::new);
        let c = MeasuredCompute::new(nominal(), table, None, None, 0.0);
        let n = nominal();
        let swapped =
            n.gemm_efficiency(384.0, 8192.0, 4096.0) / n.gemm_efficiency(1024.0, 4096.0, 4096.0);
        let unswapped =
            n.gemm_efficiency(8192.0, 384.0, 4096.0) / n.gemm_efficiency(4096.0, 1024.0, 4096.0);
        assert!((swapped - unswapped).abs() > 1e-3, "{swapped} {unswapped}");
        let (e, _) = c.gemm_efficiency(GemmLayout::Tn, [8192.0, 384.0, 4096.0]);
        assert!((e - 0.5 * swapped).abs() < 1e-12, "{e}");
        // Nothing measured: the catalog.
        let plain = MeasuredCompute::new(nominal(), None, None, Some(1.5e12), 0.0);
        assert_eq!(
            plain.gemm_s(8192.0, 8192.0, 8192.0),
            nominal().gemm_s(8192.0, 8192.0, 8192.0)
        );
        assert_eq!(plain.origin(Kernel::Memory), Source::Measured);
        assert!((plain.memory_s(3e12) - 2.0).abs() < 1e-12);
    }
}
