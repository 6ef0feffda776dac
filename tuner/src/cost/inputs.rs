//! Everything the step-time model reads, in one borrow.

use super::collective::CollectiveModel;
use super::compute::ComputeModel;
use crate::catalog::Efficiency;
use crate::mesh::{Mesh, Training};
use crate::model::ModelShape;
use crate::placement::Placement;

/// Everything the step-time model reads.
pub struct Inputs<'a> {
    /// Model shape.
    pub model: &'a ModelShape,
    /// Training inputs.
    pub training: &'a Training,
    /// Layout.
    pub mesh: &'a Mesh,
    /// Where the groups land.
    pub placement: &'a Placement,
    /// Kernel times.
    pub compute: &'a dyn ComputeModel,
    /// Collective times.
    pub collectives: &'a dyn CollectiveModel,
    /// Elementwise traffic and optimizer bytes.
    pub efficiency: &'a Efficiency,
}
