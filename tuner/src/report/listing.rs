//! The catalog as `tuner models` and `tuner clusters` print it: documents for JSON and YAML,
//! rendered as tables by [`super::table`].

use serde::Serialize;

use crate::catalog::{self, models, ClusterPreset, CLUSTERS};
use crate::model::ModelShape;
use crate::TunerError;

/// `tuner models`: every catalog model and every alias.
#[derive(Debug, Clone, Serialize)]
pub struct ModelList {
    /// Catalog models, in catalog order.
    pub models: Vec<ModelEntry>,
    /// Short names and the catalog id each one means.
    pub aliases: Vec<Alias>,
}

/// One catalog model.
#[derive(Debug, Clone, Serialize)]
pub struct ModelEntry {
    /// Catalog id for `--model`.
    pub id: &'static str,
    /// Parameters, all experts counted.
    pub params: f64,
    /// The shape, with the keys of a `--model` YAML file.
    pub shape: ModelShape,
    /// Where the shape is published.
    pub source: &'static str,
}

/// A short name for a catalog model.
#[derive(Debug, Clone, Serialize)]
pub struct Alias {
    /// What users type.
    pub alias: &'static str,
    /// The catalog id it means.
    pub model: &'static str,
}

/// `tuner clusters`: every cluster preset with its GPU's datasheet figures.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterList {
    /// Presets, in catalog order.
    pub clusters: Vec<ClusterEntry>,
}

/// One cluster preset, its fields and its GPU's datasheet figures side by side.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterEntry {
    /// The preset.
    #[serde(flatten)]
    pub preset: &'static ClusterPreset,
    /// Dense bf16 tensor-core peak of one GPU, FLOP/s.
    pub bf16_flops: f64,
    /// HBM of one GPU, bytes.
    pub hbm_bytes: f64,
    /// NVLink bandwidth of one GPU, bytes/s per direction.
    pub nvlink_bytes_per_s: f64,
}

impl ModelList {
    /// The catalog's models and aliases.
    pub fn new() -> ModelList {
        ModelList {
            models: models::MODELS
                .iter()
                .map(|(id, m)| {
                    let shape = (m.shape)();
                    ModelEntry {
                        id,
                        params: shape.params().total(),
                        shape,
                        source: m.source,
                    }
                })
                .collect(),
            aliases: models::ALIASES
                .iter()
                .map(|&(alias, model)| Alias { alias, model })
                .collect(),
        }
    }
}

impl Default for ModelList {
    fn default() -> Self {
        ModelList::new()
    }
}

impl ClusterList {
    /// The catalog's presets; fails only if a preset names a GPU the catalog lacks.
    pub fn new() -> Result<ClusterList, TunerError> {
        let clusters = CLUSTERS
            .iter()
            .map(|c| {
                let g = catalog::gpu(c.gpu)?;
                Ok(ClusterEntry {
                    preset: c,
                    bf16_flops: g.bf16_flops,
                    hbm_bytes: g.hbm_bytes,
                    nvlink_bytes_per_s: g.nvlink_bytes_per_s,
                })
            })
            .collect::<Result<_, TunerError>>()?;
        Ok(ClusterList { clusters })
    }
}
