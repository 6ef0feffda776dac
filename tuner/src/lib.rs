//! meshfit tuner: ranks hybrid-parallel training layouts (DP x TP x PP x CP x EP, ZeRO stage,
//! microbatches, recomputation) for a model on a cluster.
//!
//! - [`catalog`]: datasheet figures of GPUs and nodes, published model shapes, achieved
//!   efficiencies.
//! - [`model`]: parameter and FLOP counts of a [`model::ModelShape`].
//! - [`mesh`]: a layout ([`mesh::Mesh`]) and the training inputs ([`mesh::Training`]).
//! - [`placement`]: where each parallel group lands (NVLink, PCIe, network).
//! - [`cost`]: memory per GPU and step time term by term, behind the
//!   [`cost::collective::CollectiveModel`] and [`cost::compute::ComputeModel`] interfaces.
//! - [`fit`]: alpha-beta curves, GEMM efficiency and the fleet view, from measurement records.
//! - [`ingest`]: measurements from snapshot files, JSON lines, nccl-tests logs and Prometheus.
//! - [`input`]: files read within a stated bound, and YAML within a node budget.
//! - [`search`]: enumerate valid meshes, prune by memory, rank by step time.
//! - [`stats`]: medians and rank correlation.
//! - [`validate`]: predict published runs and score the predictions, from the catalog and
//!   from each run's own measurements.
//! - [`calibrate`]: refit the fitted knobs to a cluster's own jobs into a profile.
//! - [`jobs`]: runs files (format 1) from the training logs of a cluster's own jobs.
//! - [`report`]: tables, JSON/YAML documents, explanations and launch configs.
//! - [`output`]: files written whole or not at all, never over a device, FIFO or directory.

#![deny(missing_docs)]

pub mod calibrate;
pub mod catalog;
pub mod cost;
pub mod error;
pub mod fit;
pub mod ingest;
pub mod input;
pub mod jobs;
pub mod measure;
pub mod mesh;
pub mod mesh_spec;
pub mod model;
pub mod output;
pub mod placement;
pub mod report;
pub mod search;
pub mod similar;
pub mod stats;
pub mod validate;
pub mod warnings;

pub use error::TunerError;
