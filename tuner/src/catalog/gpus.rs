//! GPU datasheet figures: the shared table of `record::datasheet`, which the sim's node
//! profiles read too.

pub use record::datasheet::{pcie_x16_bytes_per_s, Arch, Gpu, GPUS};
