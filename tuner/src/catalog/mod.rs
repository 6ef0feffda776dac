//! The catalogs: GPUs, node presets, model shapes and achieved efficiencies.

pub mod clusters;
pub mod efficiency;
pub mod frameworks;
pub mod gpus;
pub mod kernels;
pub mod memory;
pub mod models;

use std::path::Path;

use crate::error::{bad_input, TunerError};
use crate::model::ModelShape;
use crate::similar::similar;
pub use clusters::{ClusterPreset, CLUSTERS};
pub use efficiency::{ArchKernels, Efficiency, NOMINAL, PRIOR};
pub use gpus::{Arch, Gpu, GPUS};

/// A resolved cluster: one node design plus the GPU figures, ready for the cost model.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Preset id or a description of where the figures came from.
    pub name: String,
    /// GPU figures.
    pub gpu: Gpu,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// GPUs per NVLink domain (1 = no NVLink).
    pub nvlink_domain: u32,
    /// Scale-out NICs per node.
    pub nics_per_node: u32,
    /// Line rate of one NIC, bits/s.
    pub nic_bits_per_s: f64,
}

impl Cluster {
    /// Checks the node figures of a job on `gpus` GPUs, naming each field through `name` (the
    /// CLI's flags and the runs file's keys differ): at least one GPU per node, a NIC per node
    /// when the job crosses nodes, an NVLink domain that whole nodes or whole parts of a node
    /// make up (and none on a GPU without NVLink), and a finite positive NIC rate.
    pub fn check(&self, gpus: u32, name: impl Fn(&str) -> String) -> Result<(), TunerError> {
        if self.gpus_per_node == 0 {
            return Err(bad_input(&name("gpus_per_node"), 0, "a positive count"));
        }
        let (domain, node) = (self.nvlink_domain, self.gpus_per_node);
        if domain == 0 || (node % domain != 0 && domain % node != 0) {
            return Err(bad_input(
                &name("nvlink_domain"),
                domain,
                &format!("GPUs sharing one NVLink fabric: a divisor or a multiple of the {node} GPUs per node (72 for a GB200 NVL72 rack of 4-GPU trays)"),
            ));
        }
        if domain > 1 && self.gpu.nvlink_bytes_per_s <= 0.0 {
            return Err(bad_input(
                &name("nvlink_domain"),
                domain,
                &format!("1: the {} has no NVLink", self.gpu.id),
            ));
        }
        if self.nics_per_node == 0 && gpus > self.gpus_per_node {
            return Err(bad_input(
                &name("nics_per_node"),
                0,
                "at least 1 for a job across nodes",
            ));
        }
        check_nic_gbps(&name("nic_gbps"), self.nic_bits_per_s / 1e9)
    }

    /// Scale-out bandwidth available to one GPU, bytes/s per direction: the node's NICs shared
    /// by its GPUs.
    pub fn nic_share_bytes_per_s(&self) -> f64 {
        f64::from(self.nics_per_node) * self.nic_bits_per_s / 8.0 / f64::from(self.gpus_per_node)
    }
}

/// Slowest NIC line rate a cluster may state, Gbit/s: 1 GbE, below any training fabric; a rate
/// near 0 priced a step at infinity (issue 31, item 10).
pub const MIN_NIC_GBPS: f64 = 1.0;

/// Fastest NIC line rate a cluster may state, Gbit/s: 10 Tbit/s, over ten times ConnectX-8's 800.
pub const MAX_NIC_GBPS: f64 = 10_000.0;

/// Refuses a NIC line rate in Gbit/s outside [`MIN_NIC_GBPS`] to [`MAX_NIC_GBPS`], by `field`.
pub fn check_nic_gbps(field: &str, gbps: f64) -> Result<(), TunerError> {
    if (MIN_NIC_GBPS..=MAX_NIC_GBPS).contains(&gbps) {
        return Ok(());
    }
    Err(bad_input(
        field,
        gbps,
        &format!("a NIC line rate from {MIN_NIC_GBPS} to {MAX_NIC_GBPS} Gbit/s"),
    ))
}

/// Looks up a GPU by catalog id.
pub fn gpu(id: &str) -> Result<&'static Gpu, TunerError> {
    GPUS.iter()
        .find(|g| g.id == id)
        .ok_or_else(|| TunerError::Unknown {
            what: "gpu",
            name: id.to_string(),
            similar: similar(id, GPUS.iter().map(|g| g.id)),
        })
}

/// The catalog GPU an NVML model name (`meshfit_gpu_info{model_name}`) denotes, if any.
pub use record::datasheet::gpu_for_model_name;

/// The catalog GPU a name denotes: a catalog id (`a100-sxm-80gb`) or an NVML model name
/// (`NVIDIA A100-SXM4-80GB`).
pub fn gpu_named(name: &str) -> Option<&'static str> {
    // Not through `gpu`, whose error ranks every id by edit distance: this runs per record.
    GPUS.iter()
        .find(|g| g.id == name)
        .or_else(|| gpu_for_model_name(name))
        .map(|g| g.id)
}

/// Resolves a preset into a cluster.
pub fn cluster(id: &str) -> Result<Cluster, TunerError> {
    let preset = CLUSTERS
        .iter()
        .find(|c| c.id == id)
        .ok_or_else(|| TunerError::Unknown {
            what: "cluster",
            name: id.to_string(),
            similar: similar(id, CLUSTERS.iter().map(|c| c.id)),
        })?;
    Ok(Cluster {
        name: preset.id.to_string(),
        gpu: gpu(preset.gpu)?.clone(),
        gpus_per_node: preset.gpus_per_node,
        nvlink_domain: preset.nvlink_domain,
        nics_per_node: preset.nics_per_node,
        nic_bits_per_s: preset.nic_bits_per_s,
    })
}

/// What a `--model` argument resolved to.
#[derive(Debug)]
pub struct ResolvedModel {
    /// The shape.
    pub shape: ModelShape,
    /// A note for the user when an alias or a file was used.
    pub note: Option<String>,
}

/// Resolves `--model`: a catalog id, an alias (`70b`), or a path to a YAML file.
pub fn model(name: &str) -> Result<ResolvedModel, TunerError> {
    let key = name.to_ascii_lowercase();
    if let Some((_, m)) = models::MODELS.iter().find(|(id, _)| *id == key) {
        return Ok(ResolvedModel {
            shape: (m.shape)(),
            note: None,
        });
    }
    if let Some((alias, id)) = models::ALIASES.iter().find(|(alias, _)| *alias == key) {
        let (_, m) = models::MODELS
            .iter()
            .find(|(mid, _)| mid == id)
            .expect("aliases name catalog models");
        return Ok(ResolvedModel {
            shape: (m.shape)(),
            note: Some(format!("model `{alias}` resolves to {id}")),
        });
    }
    let path = Path::new(name);
    if name.ends_with(".yaml") || name.ends_with(".yml") || path.exists() {
        let shape = model_from_yaml_file(path)?;
        return Ok(ResolvedModel {
            note: Some(format!("model {} read from {}", shape.name, path.display())),
            shape,
        });
    }
    let names = models::MODELS
        .iter()
        .map(|(id, _)| *id)
        .chain(models::ALIASES.iter().map(|(a, _)| *a));
    Err(TunerError::Unknown {
        what: "model",
        name: name.to_string(),
        similar: similar(name, names),
    })
}

/// What defines a catalog model beyond its shape, when `shape` is that catalog model (same
/// id and dimensions; the sequence length is the job's to choose). A model read from a file
/// carries none of it.
pub fn architecture(shape: &ModelShape) -> Option<models::Architecture> {
    let (_, m) = models::MODELS.iter().find(|(id, _)| *id == shape.name)?;
    let catalog = ModelShape {
        seq_len: shape.seq_len,
        ..(m.shape)()
    };
    (catalog == *shape).then_some(m.arch)
}

/// The catalog model with `shape`'s dimensions, whatever its name, sequence length and
/// per-head norms: the architecture a shape from elsewhere (a runs file) most likely is.
pub fn same_dimensions(shape: &ModelShape) -> Option<(&'static str, ModelShape)> {
    models::MODELS
        .iter()
        .map(|(id, m)| (*id, (m.shape)()))
        .find(|(_, c)| {
            let alike = ModelShape {
                name: c.name.clone(),
                seq_len: c.seq_len,
                qk_norm: c.qk_norm,
                ..shape.clone()
            };
            alike == *c
        })
}

/// Reads a custom model from a YAML file with the fields of [`ModelShape`]; `kv_heads` may be
/// left out for multi-head attention.
pub fn model_from_yaml_file(path: &Path) -> Result<ModelShape, TunerError> {
    let text = crate::input::read_text(path, crate::input::MODEL)?;
    model_from_yaml(&text, &path.display().to_string())
}

/// Parses a custom model. `origin` names the source in errors.
pub fn model_from_yaml(text: &str, origin: &str) -> Result<ModelShape, TunerError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        name: String,
        layers: u32,
        hidden: u32,
        heads: u32,
        kv_heads: Option<u32>,
        #[serde(default)]
        head_dim: Option<u32>,
        ffn_hidden: u32,
        ffn_act: crate::model::FfnAct,
        vocab: u32,
        seq_len: u32,
        #[serde(default)]
        tied_embeddings: bool,
        #[serde(default)]
        moe: Option<crate::model::Moe>,
        #[serde(default)]
        mla: Option<crate::model::Mla>,
        #[serde(default)]
        mtp_layers: u32,
        #[serde(default)]
        sliding_window: Option<u32>,
        #[serde(default)]
        layer_types: Option<Vec<crate::model::AttentionType>>,
        #[serde(default)]
        qk_norm: bool,
    }
    let f: File = crate::input::yaml(text, origin, crate::input::MODEL)?;
    let shape = ModelShape {
        name: f.name,
        layers: f.layers,
        hidden: f.hidden,
        heads: f.heads,
        kv_heads: f.kv_heads.unwrap_or(f.heads),
        head_dim: f.head_dim,
        ffn_hidden: f.ffn_hidden,
        ffn_act: f.ffn_act,
        vocab: f.vocab,
        seq_len: f.seq_len,
        tied_embeddings: f.tied_embeddings,
        moe: f.moe,
        mla: f.mla,
        mtp_layers: f.mtp_layers,
        sliding_window: f.sliding_window,
        layer_types: f.layer_types,
        qk_norm: f.qk_norm,
    };
    shape.validate()?;
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_model_is_valid_and_sized_as_published() {
        // Published totals, in billions: Llama 2 (Table 1), Llama 3 (Table 3), Mixtral (46.7B,
        // 141B), DeepSeek-V3 (671B), GPT-3 (175B), Qwen3 (the model cards: 30.5B and 235B), gpt-oss (its
        // card, Table 1: 20.91B and 116.83B).
        let expected = [
            ("gpt3-175b", 174.6),
            ("llama2-7b", 6.74),
            ("llama2-13b", 13.0),
            ("llama2-70b", 69.0),
            ("llama3-8b", 8.03),
            ("llama3-70b", 70.6),
            ("llama3-405b", 405.8),
            ("mixtral-8x7b", 46.7),
            ("mixtral-8x22b", 140.6),
            ("deepseek-v3", 671.0),
            ("qwen3-30b-a3b", 30.5),
            ("qwen3-235b-a22b", 235.0),
            ("gpt-oss-20b", 20.91),
            ("gpt-oss-120b", 116.83),
        ];
        for (id, billions) in expected {
            let m = model(id).unwrap().shape;
            m.validate().unwrap();
            let got = m.params().total() / 1e9;
            assert!(
                (got / billions - 1.0).abs() < 0.015,
                "{id}: {got:.2}B, published {billions}B"
            );
        }
    }

    #[test]
    fn nvlink_domains_are_whole_nodes_or_whole_parts_of_one() {
        let check = |preset: &str, domain: u32| {
            let mut c = cluster(preset).unwrap();
            c.nvlink_domain = domain;
            c.check(576, |f| f.to_string()).map_err(|e| e.to_string())
        };
        // GB200 NVL72: 18 trays of 4; a DGX H100 split in two halves; a single GPU.
        assert!(check("gb200-nvl72", 72).is_ok());
        assert!(check("dgx-h100", 4).is_ok());
        assert!(check("dgx-h100", 1).is_ok());
        let err = check("gb200-nvl72", 6).unwrap_err();
        assert!(err.starts_with("nvlink_domain = 6: expected GPUs sharing one NVLink fabric: a divisor or a multiple of the 4 GPUs per node"), "{err}");
        assert!(check("dgx-h100", 0).is_err());
        let err = check("h100-pcie", 8).unwrap_err();
        assert!(err.contains("the h100-pcie has no NVLink"), "{err}");
    }

    #[test]
    fn every_preset_names_a_datasheet_gpu_and_passes_the_node_checks() {
        for p in CLUSTERS {
            let c = cluster(p.id).unwrap_or_else(|e| panic!("{}: {e}", p.id));
            let across_nodes = 4 * c.gpus_per_node.max(c.nvlink_domain);
            c.check(across_nodes, |f| f.to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", p.id));
            assert!(
                CLUSTERS.iter().filter(|q| q.id == p.id).count() == 1,
                "{}",
                p.id
            );
        }
    }

    #[test]
    fn issue_27_presets_give_each_gpu_its_nic() {
        // Scale-out bytes/s per GPU and direction: one NIC per GPU at the line rate / 8.
        // A800 on HDR 200 Gb/s, GH200 on Slingshot-11 200 Gb/s (CSCS: "200Gb/s (25GB/s)"),
        // B300 and GB300 on ConnectX-8 800 Gb/s.
        for (id, gpu, bytes_per_s) in [
            ("hgx-a800", "a800-sxm-80gb", 25e9),
            ("hgx-h20", "h20", 50e9),
            ("cray-ex254n-gh200", "gh200-96gb", 25e9),
            ("dgx-b300", "b300", 100e9),
            ("gb300-nvl72", "gb300", 100e9),
        ] {
            let c = cluster(id).unwrap();
            assert_eq!(c.gpu.id, gpu, "{id}");
            assert_eq!(c.nic_share_bytes_per_s(), bytes_per_s, "{id}");
        }
        // GB300 NVL72: 18 trays of 4 in one NVLink domain, as GB200's.
        let (gb300, gb200) = (
            cluster("gb300-nvl72").unwrap(),
            cluster("gb200-nvl72").unwrap(),
        );
        assert_eq!((gb300.gpus_per_node, gb300.nvlink_domain), (4, 72));
        assert_eq!(
            (gb200.gpus_per_node, gb200.nvlink_domain),
            (gb300.gpus_per_node, gb300.nvlink_domain)
        );
    }

    #[test]
    fn nvml_names_map_to_catalog_gpus() {
        let id = |n: &str| gpu_for_model_name(n).map(|g| g.id);
        assert_eq!(id("NVIDIA H100 80GB HBM3"), Some("h100-sxm"));
        assert_eq!(id("NVIDIA H100 PCIe"), Some("h100-pcie"));
        assert_eq!(id("NVIDIA A100-SXM4-80GB"), Some("a100-sxm-80gb"));
        assert_eq!(id("NVIDIA A100-SXM4-40GB"), Some("a100-sxm-40gb"));
        assert_eq!(id("NVIDIA L40S"), Some("l40s"));
        assert_eq!(id("NVIDIA H200"), Some("h200-sxm"));
        assert_eq!(id("Tesla V100-SXM2-32GB"), None);
        // Issue 27: names that hold other names (`NVIDIA GH200 480GB` used to read as an H200).
        assert_eq!(id("NVIDIA A800-SXM4-80GB"), Some("a800-sxm-80gb"));
        assert_eq!(id("NVIDIA H20"), Some("h20"));
        assert_eq!(id("NVIDIA H20-3e"), None);
        assert_eq!(id("NVIDIA GH200 480GB"), Some("gh200-96gb"));
        assert_eq!(id("NVIDIA GH200 120GB"), Some("gh200-96gb"));
        assert_eq!(id("NVIDIA GH200 144G HBM3e"), None);
        assert_eq!(id("NVIDIA B200"), Some("b200"));
        assert_eq!(id("NVIDIA B300 SXM6 AC"), Some("b300"));
        assert_eq!(id("NVIDIA GB200"), Some("gb200"));
        assert_eq!(id("NVIDIA GB300"), Some("gb300"));
    }

    #[test]
    fn alias_resolves_and_says_so() {
        let r = model("70b").unwrap();
        assert_eq!(r.shape.name, "llama3-70b");
        assert_eq!(
            r.note.as_deref(),
            Some("model `70b` resolves to llama3-70b")
        );
    }

    #[test]
    fn unknown_model_lists_close_names() {
        let err = model("llama3-7b").unwrap_err().to_string();
        assert!(err.contains("unknown model `llama3-7b`"), "{err}");
        assert!(
            err.contains("llama3-8b") && err.contains("llama2-7b"),
            "{err}"
        );
    }

    #[test]
    fn yaml_model_errors_name_line_and_field() {
        let text = "name: tiny\nlayers: 2\nhidden: 64\nheads: 4\nffn_hidden: 256\nffn_act: relu\nvocab: 100\nseq_len: 128\n";
        let err = model_from_yaml(text, "tiny.yaml").unwrap_err().to_string();
        assert!(err.contains("tiny.yaml") && err.contains("line 6"), "{err}");
        let typo = "name: tiny\nlayers: 2\nhiden: 64\n";
        let err = model_from_yaml(typo, "t.yaml").unwrap_err().to_string();
        assert!(err.contains("hiden"), "{err}");
    }

    #[test]
    fn yaml_model_checks_divisibility() {
        let text = "name: odd\nlayers: 2\nhidden: 100\nheads: 3\nffn_hidden: 256\nffn_act: gelu\nvocab: 100\nseq_len: 128\n";
        let err = model_from_yaml(text, "odd.yaml").unwrap_err().to_string();
        assert!(
            err.contains("heads") && err.contains("3") && err.contains("divisor of hidden"),
            "{err}"
        );
    }

    #[test]
    fn yaml_model_reads_per_head_query_and_key_norms() {
        let text = "name: tiny\nlayers: 2\nhidden: 64\nheads: 4\nffn_hidden: 256\nffn_act: swiglu\nvocab: 100\nseq_len: 128\n";
        assert!(!model_from_yaml(text, "t.yaml").unwrap().qk_norm);
        let normed = format!("{text}qk_norm: true\n");
        assert!(model_from_yaml(&normed, "t.yaml").unwrap().qk_norm);
    }
}
