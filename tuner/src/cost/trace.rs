//! Which figures priced one mesh: every kernel and collective the step-time model asked for,
//! with where its figure came from (measured, extrapolated past the measurements, or the
//! catalog), so that a measured price says term by term what the measurements covered.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::Serialize;

use super::collective::{Collective, CollectiveModel, Source};
use super::compute::{linear_gemms, ComputeModel, Kernel};
use crate::placement::GroupSpan;

/// What one class of calls was priced from.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Covered {
    /// What was priced: `GEMMs`, `attention`, `HBM kernels`, `all_reduce over 8 ranks (nvlink)`.
    pub what: String,
    /// Calls priced from measurements of the same thing.
    pub measured: usize,
    /// Calls priced past what was measured (other shapes, lengths or rank counts).
    pub extrapolated: usize,
    /// Calls priced from the catalog.
    pub catalog: usize,
    /// A few of the calls past the measurements or left to the catalog, as examples.
    pub examples: Vec<String>,
}

impl Covered {
    /// One line: what, how it was priced, and where only part of it was measured, examples
    /// of the rest.
    pub fn line(&self) -> String {
        let partly = self.measured + self.extrapolated > 0 && !self.examples.is_empty();
        if partly {
            format!(
                "{} (past the measurements: {})",
                self.summary(),
                self.examples.join(", ")
            )
        } else {
            self.summary()
        }
    }

    /// What, and how it was priced.
    pub fn summary(&self) -> String {
        let total = self.measured + self.extrapolated + self.catalog;
        let how = match (self.measured, self.extrapolated, self.catalog) {
            (_, 0, 0) => "measured".to_string(),
            (0, 0, _) => "catalog (not measured)".to_string(),
            (0, _, 0) => "extrapolated from measurements".to_string(),
            (m, e, c) => {
                let mut parts = Vec::new();
                if m > 0 {
                    parts.push(format!("{m} measured"));
                }
                if e > 0 {
                    parts.push(format!("{e} extrapolated"));
                }
                if c > 0 {
                    parts.push(format!("{c} catalog"));
                }
                format!("{} of {total} calls", parts.join(", "))
            }
        };
        format!("{}: {how}", self.what)
    }
}

/// The coverage of one priced mesh, by class of call.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    classes: BTreeMap<String, Covered>,
}

/// Examples of uncovered calls kept per class.
const EXAMPLES: usize = 3;

impl Coverage {
    fn note(&mut self, what: String, source: Source, example: impl FnOnce() -> String) {
        let c = self.classes.entry(what.clone()).or_insert_with(|| Covered {
            what,
            ..Covered::default()
        });
        match source {
            Source::Measured => c.measured += 1,
            Source::Extrapolated => c.extrapolated += 1,
            Source::Nominal => c.catalog += 1,
        }
        if source != Source::Measured && c.examples.len() < EXAMPLES {
            let e = example();
            if !c.examples.contains(&e) {
                c.examples.push(e);
            }
        }
    }

    /// Every class, in name order.
    pub fn classes(&self) -> Vec<Covered> {
        self.classes.values().cloned().collect()
    }
}

/// A compute model that notes each kernel's origin as it prices it.
pub struct TracedCompute<'a> {
    inner: &'a dyn ComputeModel,
    coverage: &'a RefCell<Coverage>,
}

/// A collective model that notes each call's origin as it prices it.
pub struct TracedCollectives<'a> {
    inner: &'a dyn CollectiveModel,
    coverage: &'a RefCell<Coverage>,
}

impl<'a> TracedCompute<'a> {
    /// Wraps `inner`, noting into `coverage`.
    pub fn new(inner: &'a dyn ComputeModel, coverage: &'a RefCell<Coverage>) -> Self {
        TracedCompute { inner, coverage }
    }

    fn gemm(&self, layout: record::GemmLayout, shape: [f64; 3]) {
        let source = self.inner.origin(Kernel::Gemm { layout, shape });
        self.coverage.borrow_mut().note("GEMMs".into(), source, || {
            format!("{layout} {:.0}x{:.0}x{:.0}", shape[0], shape[1], shape[2])
        });
    }
}

impl ComputeModel for TracedCompute<'_> {
    fn gemm_s(&self, m: f64, n: f64, k: f64) -> f64 {
        self.gemm(record::GemmLayout::Tn, [n, m, k]);
        self.inner.gemm_s(m, n, k)
    }

    fn linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        for (layout, shape) in linear_gemms(t, out, inp) {
            self.gemm(layout, shape);
        }
        self.inner.linear_s(t, out, inp)
    }

    fn bf16_linear_s(&self, t: f64, out: f64, inp: f64) -> (f64, f64) {
        for (layout, shape) in linear_gemms(t, out, inp) {
            self.gemm(layout, shape);
        }
        self.inner.bf16_linear_s(t, out, inp)
    }

    fn attention_s(&self, flops: f64, seq: f64, head_dim: f64) -> f64 {
        let source = self.inner.origin(Kernel::Attention { seq, head_dim });
        self.coverage
            .borrow_mut()
            .note("attention".into(), source, || {
                format!("{seq:.0} tokens, heads {head_dim:.0} wide")
            });
        self.inner.attention_s(flops, seq, head_dim)
    }

    fn attention_bwd_s(&self, flops: f64, seq: f64, head_dim: f64) -> f64 {
        self.inner.attention_bwd_s(flops, seq, head_dim)
    }

    fn memory_s(&self, bytes: f64) -> f64 {
        let source = self.inner.origin(Kernel::Memory);
        self.coverage
            .borrow_mut()
            .note("HBM kernels".into(), source, String::new);
        self.inner.memory_s(bytes)
    }

    fn host_s_per_kernel(&self) -> f64 {
        self.inner.host_s_per_kernel()
    }

    fn source(&self) -> Source {
        self.inner.source()
    }
}

impl<'a> TracedCollectives<'a> {
    /// Wraps `inner`, noting into `coverage`.
    pub fn new(inner: &'a dyn CollectiveModel, coverage: &'a RefCell<Coverage>) -> Self {
        TracedCollectives { inner, coverage }
    }

    fn call(&self, c: Collective, group: &GroupSpan, bytes: f64) {
        if group.ranks <= 1 {
            return;
        }
        let source = self.inner.origin(c, group, bytes);
        let what = format!(
            "{} over {} ranks ({})",
            super::measured::kind_of(c),
            group.ranks,
            group.link.as_str()
        );
        self.coverage
            .borrow_mut()
            .note(what, source, || format!("{:.2} MiB", bytes / 1048576.0));
    }
}

impl CollectiveModel for TracedCollectives<'_> {
    fn time_s(&self, c: Collective, group: &GroupSpan, bytes: f64) -> f64 {
        self.call(c, group, bytes);
        self.inner.time_s(c, group, bytes)
    }

    fn calls_s(&self, c: Collective, group: &GroupSpan, bytes: f64, calls: f64) -> f64 {
        if calls > 0.0 {
            self.call(c, group, bytes / calls);
        }
        self.inner.calls_s(c, group, bytes, calls)
    }

    fn source(&self, c: Collective, group: &GroupSpan) -> Source {
        self.inner.source(c, group)
    }

    fn origin(&self, c: Collective, group: &GroupSpan, bytes: f64) -> Source {
        self.inner.origin(c, group, bytes)
    }
}
