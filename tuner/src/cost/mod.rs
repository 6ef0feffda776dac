//! The cost model: memory per GPU and step time of one mesh on one cluster.

pub mod collective;
pub mod compute;
mod data_parallel;
mod inputs;
mod layer;
mod loss;
pub mod measured;
pub mod measured_compute;
pub mod memory;
#[cfg(test)]
mod mocks;
pub mod pipeline;
mod recompute;
mod term;
pub mod timing;
pub mod trace;

use serde::Serialize;

use crate::catalog::{Cluster, Efficiency};
use crate::mesh::{ExpertGemms, Mesh, Training};
use crate::model::ModelShape;
use crate::placement::{LinkClass, Placement};
use crate::warnings::{Pitfall, SpreadReason};
use collective::{CollectiveModel, NominalCollectives, Source};
use compute::{ComputeModel, NominalCompute};
use measured_compute::MeasuredCompute;
use memory::MemoryBreakdown;
use timing::{Breakdown, TermKind};

/// The average layers of the meshes one [`Scenario`] has priced, by what a layer's terms
/// depend on; valid for that scenario only.
#[derive(Default)]
pub struct LayerCache(std::collections::HashMap<timing::LayerKey, layer::Layer>);

/// A job to place: model, training inputs, cluster, and the models of its kernels and links.
pub struct Scenario {
    /// Model shape.
    pub model: ModelShape,
    /// Training inputs.
    pub training: Training,
    /// Cluster figures.
    pub cluster: Cluster,
    /// GPUs the job gets.
    pub gpus: u32,
    /// Efficiencies for elementwise traffic and optimizer bytes.
    pub efficiency: Efficiency,
    /// Kernel times.
    pub compute: Box<dyn ComputeModel + Sync>,
    /// Collective times.
    pub collectives: Box<dyn CollectiveModel + Sync>,
}

impl Scenario {
    /// A scenario priced from the catalog alone.
    pub fn nominal(
        model: ModelShape,
        training: Training,
        cluster: Cluster,
        gpus: u32,
        efficiency: Efficiency,
    ) -> Self {
        let compute = NominalCompute::new(
            &cluster.gpu,
            training.precision,
            training.flash_kernel,
            &efficiency,
        );
        let collectives = NominalCollectives::new(&cluster, &efficiency);
        Scenario {
            model,
            training,
            cluster,
            gpus,
            efficiency,
            compute: Box::new(compute),
            collectives: Box::new(collectives),
        }
    }

    /// A scenario priced from fitted measurements where they exist and the catalog elsewhere.
    /// Measured HBM bandwidth counts reads and writes, which the memory-bound kernels of the
    /// cost model also do.
    pub fn measured(
        model: ModelShape,
        training: Training,
        cluster: Cluster,
        gpus: u32,
        efficiency: Efficiency,
        fits: &crate::fit::Fits,
    ) -> Self {
        let mut s = Self::nominal(model, training, cluster, gpus, efficiency);
        let nominal = NominalCompute::new(
            &s.cluster.gpu,
            s.training.precision,
            s.training.flash_kernel,
            &s.efficiency,
        );
        s.compute = Box::new(MeasuredCompute::new(
            nominal,
            fits.gemm_table.clone(),
            fits.attention_table.clone(),
            fits.fleet_memory,
            fits.gemm_table.as_ref().map_or(0.0, |g| g.rms_rel_error),
        ));
        s.collectives = Box::new(measured::MeasuredCollectives::new(
            NominalCollectives::new(&s.cluster, &s.efficiency),
            &fits.fleet,
            fits.fleet_nic.as_ref().map(|n| n.busbw_bytes_per_s),
        ));
        s
    }

    /// Where each step-time term's figures come from: measured, extrapolated or nominal.
    pub fn term_sources(&self, e: &Evaluation) -> Vec<(TermKind, Source)> {
        e.breakdown
            .terms()
            .iter()
            .map(|(name, _)| {
                let source = match name.collective(&e.mesh, &e.placement) {
                    Some((c, g)) => self.collectives.source(c, &g),
                    None => self.compute.source(),
                };
                (*name, source)
            })
            .collect()
    }

    /// Low and high step time from the fit residuals of the figures each term uses, added in
    /// quadrature (independent errors): step -/+ sqrt(sum (exposed_i x u_i)^2).
    pub fn band(&self, e: &Evaluation) -> (f64, f64) {
        let var: f64 = e
            .breakdown
            .terms()
            .iter()
            .map(|(name, t)| {
                let u = match name.collective(&e.mesh, &e.placement) {
                    Some((c, g)) => self.collectives.uncertainty(c, &g),
                    None => self.compute.uncertainty(),
                };
                (t.exposed_s * u).powi(2)
            })
            .sum();
        (e.step_time_s - var.sqrt(), e.step_time_s + var.sqrt())
    }

    /// Peak FLOP/s of one GPU at the training precision, the MFU denominator.
    pub fn peak_flops(&self) -> f64 {
        match self.training.precision {
            crate::mesh::Precision::Fp8
            | crate::mesh::Precision::Fp8Rowwise
            | crate::mesh::Precision::Fp8Blockwise => self
                .cluster
                .gpu
                .fp8_flops
                .unwrap_or(self.cluster.gpu.bf16_flops),
            crate::mesh::Precision::Bf16 => self.cluster.gpu.bf16_flops,
        }
    }

    /// Memory per GPU of one mesh, without its step time: what decides whether it fits.
    pub fn memory(&self, mesh: &Mesh) -> MemoryBreakdown {
        memory::memory_per_gpu(&self.model, &self.training, mesh)
    }

    /// Whether `memory` fits the GPU, as [`Evaluation::fits`] says it.
    pub fn fits(&self, memory: &MemoryBreakdown) -> bool {
        memory.total <= self.cluster.gpu.hbm_bytes
    }

    /// Prices one mesh.
    pub fn evaluate(&self, mesh: &Mesh) -> Evaluation {
        self.evaluate_with(mesh, self.memory(mesh), None)
    }

    /// Prices one mesh whose memory is known, with the layers of meshes priced before it:
    /// a search prices many meshes alike in what a layer costs.
    pub fn evaluate_cached(
        &self,
        mesh: &Mesh,
        memory: MemoryBreakdown,
        layers: &mut LayerCache,
    ) -> Evaluation {
        self.evaluate_with(mesh, memory, Some(layers))
    }

    fn evaluate_with(
        &self,
        mesh: &Mesh,
        memory: MemoryBreakdown,
        layers: Option<&mut LayerCache>,
    ) -> Evaluation {
        let placement = Placement::of(mesh, &self.cluster);
        let x = timing::Inputs {
            model: &self.model,
            training: &self.training,
            mesh,
            placement: &placement,
            compute: self.compute.as_ref(),
            collectives: self.collectives.as_ref(),
            efficiency: &self.efficiency,
        };
        let avg = match layers {
            Some(cache) => *cache
                .0
                .entry(timing::LayerKey::of(mesh))
                .or_insert_with(|| timing::average_layer(&x)),
            None => timing::average_layer(&x),
        };
        let breakdown = timing::step_time_of(&x, avg);
        let step = breakdown.step_time_s();
        let tokens = self.training.tokens_per_step();
        let m = mesh.microbatches(self.training.global_batch);
        let flops = self.model.model_flops_per_token() * tokens;
        Evaluation {
            mesh: *mesh,
            placement,
            memory,
            capacity_bytes: self.cluster.gpu.hbm_bytes,
            breakdown,
            step_time_s: step,
            tokens_per_s: tokens / step,
            mfu: flops / (step * f64::from(mesh.gpus()) * self.peak_flops()),
            microbatches: m,
            bubble_fraction: if mesh.pp > 1 {
                pipeline::bubble_fraction(mesh, m)
            } else {
                0.0
            },
        }
    }

    /// Which figures price `mesh`: each kernel and collective of its step, by class, with
    /// where its figure comes from.
    pub fn coverage(&self, mesh: &Mesh) -> Vec<trace::Covered> {
        let placement = Placement::of(mesh, &self.cluster);
        let coverage = std::cell::RefCell::new(trace::Coverage::default());
        let compute = trace::TracedCompute::new(self.compute.as_ref(), &coverage);
        let collectives = trace::TracedCollectives::new(self.collectives.as_ref(), &coverage);
        timing::step_time(&timing::Inputs {
            model: &self.model,
            training: &self.training,
            mesh,
            placement: &placement,
            compute: &compute,
            collectives: &collectives,
            efficiency: &self.efficiency,
        });
        coverage.into_inner().classes()
    }

    /// The pitfalls of an evaluated mesh.
    pub fn warnings(&self, e: &Evaluation) -> Vec<Pitfall> {
        let mut w = Vec::new();
        let mesh = &e.mesh;
        if mesh.tp > 1 && e.placement.tp.link != LinkClass::Nvlink {
            w.push(Pitfall::TpBeyondNvlink {
                tp: mesh.tp,
                domain: self.cluster.nvlink_domain,
                link: e.placement.tp.link,
            });
        }
        if e.bubble_fraction > 0.10 {
            w.push(Pitfall::LargeBubble {
                fraction: e.bubble_fraction,
                pp: mesh.pp,
                microbatches: e.microbatches,
            });
        }
        if mesh.pp > 1 && e.microbatches < mesh.pp {
            w.push(Pitfall::BatchTooSmall {
                microbatches: e.microbatches,
                pp: mesh.pp,
            });
        }
        let headroom = 1.0 - e.memory.total / e.capacity_bytes;
        if e.fits() && headroom < 0.05 {
            w.push(Pitfall::LowHeadroom { headroom });
        }
        if let Some(moe) = &self.model.moe {
            if mesh.ep > 1 && e.placement.ep.link == LinkClass::Network {
                w.push(Pitfall::MoeSpread(SpreadReason::EpAcrossNodes {
                    ep: mesh.ep,
                    nodes: e.placement.ep.nodes,
                    dispatch: self.training.moe_dispatch,
                }));
            }
            let per_expert = layer::tokens_per_expert(
                moe,
                layer::tokens_per_microbatch(mesh, self.training.seq_len),
                (
                    f64::from(mesh.tp),
                    f64::from(mesh.etp()),
                    f64::from(mesh.ep),
                ),
            );
            // The classic MoE pitfall: the busiest expert sets the pace of both all-to-alls
            // and of the expert GEMMs; when the all-to-all dominates, so does the imbalance.
            let a2a = e.breakdown.ep_all_to_all.exposed_s / e.step_time_s;
            if a2a > 0.2 {
                w.push(Pitfall::MoeSpread(SpreadReason::AllToAllBound {
                    share: a2a,
                    imbalance: moe.load(self.efficiency.moe_imbalance),
                }));
            }
            if per_expert < 256.0 {
                w.push(Pitfall::MoeSpread(SpreadReason::StarvedExperts {
                    tokens_per_expert: per_expert,
                }));
            }
            // Launches that raising EP would cut: one per local expert, where the framework
            // does not group them.
            let launches = e.breakdown.launch.exposed_s / e.step_time_s;
            let local_experts = moe.experts / mesh.ep;
            let per_expert_launch = self.training.expert_gemms != ExpertGemms::Grouped;
            if per_expert_launch && local_experts > 1 && launches > 0.1 {
                w.push(Pitfall::MoeSpread(SpreadReason::ExpertLaunches {
                    local_experts,
                    share: launches,
                }));
            }
            w.push(Pitfall::MoeOptimistic);
        }
        if mesh.cp > 1 {
            w.push(Pitfall::ContextParallel { cp: mesh.cp });
        }
        if self.training.precision.is_fp8() && self.cluster.gpu.fp8_flops.is_none() {
            w.push(Pitfall::NoFp8 {
                gpu: self.cluster.gpu.id,
            });
        }
        w
    }
}

/// One priced mesh.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    /// The layout.
    pub mesh: Mesh,
    /// Where its groups land.
    pub placement: Placement,
    /// Memory per GPU.
    pub memory: MemoryBreakdown,
    /// GPU memory capacity, bytes.
    pub capacity_bytes: f64,
    /// Step time by term.
    pub breakdown: Breakdown,
    /// Predicted seconds per step.
    pub step_time_s: f64,
    /// Tokens per second, whole job.
    pub tokens_per_s: f64,
    /// Model FLOPs utilisation against the dense peak at the training precision.
    pub mfu: f64,
    /// Microbatches per step.
    pub microbatches: u32,
    /// Share of the step lost to the pipeline bubble.
    pub bubble_fraction: f64,
}

impl Evaluation {
    /// Whether the memory fits the GPU.
    pub fn fits(&self) -> bool {
        self.memory.total <= self.capacity_bytes
    }
}
