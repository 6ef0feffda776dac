//! What a run file leaves unsaid about training, chosen as a careful user of the run's
//! framework would have run it, and reported.

use std::collections::BTreeMap;

use super::{Attention, Run};
use crate::catalog::frameworks::{Unsaid, MEGATRON_RECIPES, TORCHTITAN};
use crate::mesh::{
    ExpertGemms, FlashKernel, Framework, LossKernel, MoeDispatch, Optimizer, ParamFetch, Precision,
    ReduceDtype, Training,
};
use record::datasheet::{Arch, GRAND_TETON_H100};

record::named_enum! {
    /// A knob a run file can leave unsaid, under which validate reports what it chose. The
    /// choices are a map ordered by this type, so the variants are declared in the order of
    /// their names: reports list the knobs alphabetically.
    Choice, "choice" {
        /// Fused or unfused attention.
        Attention => "attention",
        /// Tensor-parallel ranks of each expert.
        Etp => "etp",
        /// How the local experts' GEMMs launch.
        ExpertGemms => "expert_gemms",
        /// Which fused attention kernel.
        FlashKernel => "flash_kernel",
        /// fp8 scaling per row.
        Fp8Recipe => "fp8_recipe",
        /// The framework the run is priced as.
        Framework => "framework",
        /// Fused or eager elementwise kernels.
        FusedElementwise => "fused_elementwise",
        /// The GPU part the notes name.
        Gpu => "gpu",
        /// Number format of the gradient reduction.
        GradReduce => "grad_reduce",
        /// The loss kernels.
        Loss => "loss",
        /// Sequences per microbatch.
        MicrobatchSize => "microbatch_size",
        /// Expert routing forced into balance.
        MoeBalance => "moe_balance",
        /// How MoE tokens reach their experts.
        MoeDispatch => "moe_dispatch",
        /// Gradient reduction overlapped with backward.
        OverlapGradReduce => "overlap_grad_reduce",
        /// How ZeRO-3 gathers parameters.
        ParamFetch => "param_fetch",
        /// Per-head query and key norms.
        QkNorm => "qk_norm",
        /// Activation recomputation.
        Recompute => "recompute",
        /// Sequence parallelism.
        SequenceParallel => "sequence_parallel",
        /// Whether torch.compile ran.
        TorchCompile => "torch_compile",
        /// Tensor-parallel collectives overlapped with the GEMMs.
        TpCommOverlap => "tp_comm_overlap",
        /// Pipeline stages per rank.
        VirtualStages => "virtual_stages",
        /// The ZeRO stage.
        ZeroStage => "zero_stage",
    }
}

/// FlashAttention's first publication (Dao et al. 2022, arXiv 2205.14135). Runs published
/// before it computed the s x s attention scores through HBM.
const FLASH_ATTENTION_ARXIV: (u32, u32) = (2205, 14135);

/// Megatron-LM gained `--use-flash-attn` on 2022-12-08 (commit d693034e, "Integrate
/// FlashAttention into Megatron-LM"); Megatron runs published before then ran the unfused
/// attention.
const MEGATRON_FLASH_ARXIV: (u32, u32) = (2212, 0);

/// Megatron-DeepSpeed took that commit in with its merge of upstream on 2023-07-04 (9e72d571 in
/// microsoft/Megatron-DeepSpeed); DeepSpeed runs published before then ran the unfused
/// attention (BLOOM, arXiv 2211.05100, among them).
const DEEPSPEED_FLASH_ARXIV: (u32, u32) = (2307, 0);

/// Megatron-Core's first release with `--overlap-grad-reduce` and bf16 gradient buffers in fp32
/// (`accumulate_allreduce_grads_in_fp32`, forced under `--bf16`) came in 2023; the Megatron
/// papers before it trained in fp16 with the gradient all-reduce after backward.
const MEGATRON_CORE_ARXIV: (u32, u32) = (2301, 0);

/// DeepSpeed v0.6.0 (2022-03-07) coalesced ZeRO-3's parameter gathers and dropped the
/// device-wide synchronize before each; PyTorch's FSDP shipped the same month (PyTorch 1.11).
/// ZeRO-3 runs published before then ran DeepSpeed's per-tensor fetch.
const COALESCED_ZERO3_ARXIV: (u32, u32) = (2203, 0);

/// The arXiv id a source names, as (yymm, number); `None` for sources without one (READMEs,
/// benchmark files, all newer than the papers above).
fn arxiv(source: &str) -> Option<(u32, u32)> {
    let rest = source.split("arXiv:").nth(1)?;
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let (a, b) = id.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The latest year a source names as a word of its own (2017 to 2030, so that GPU counts
/// such as 2048 and older figures do not count), mapped to December of that year: a source
/// counts as before a date only if its whole year is. Digits inside commit hashes and longer
/// numbers do not count.
fn year(source: &str) -> Option<(u32, u32)> {
    let bytes = source.as_bytes();
    let word = |i: usize| bytes.get(i).is_some_and(|b| b.is_ascii_alphanumeric());
    (0..bytes.len().saturating_sub(3))
        .filter_map(|i| {
            let bounded = (i == 0 || !word(i - 1)) && !word(i + 4);
            let y: u32 = source.get(i..i + 4)?.parse().ok()?;
            (bounded && (2017..=2030).contains(&y)).then_some(y)
        })
        .max()
        .map(|y| ((y - 2000) * 100 + 12, u32::MAX))
}

/// When a source was published, as an arXiv id: its own, or else the year it names.
fn published(source: &str) -> Option<(u32, u32)> {
    arxiv(source).or_else(|| year(source))
}

/// Whether a source published at `date` came before `paper`; an undated one did not.
fn before(date: Option<(u32, u32)>, paper: (u32, u32)) -> bool {
    date.is_some_and(|id| id < paper)
}

/// The framework a run names in its source or group: DeepSpeed (vTrain ran
/// Megatron-DeepSpeed), the FSDP stacks (torchtitan, llm-foundry, NeMo AutoModel), else
/// Megatron-LM. A ZeRO-3 run that names neither DeepSpeed nor an FSDP stack ran DeepSpeed's
/// if it was published before FSDP existed, Megatron-LM having none of its own then
/// (Narayanan et al. 2021 §5.2 compare against DeepSpeed's); after, it ran Megatron-Core's
/// sharding if it names Megatron, and FSDP if it names nothing. `date` is the source's
/// [`published`] date.
fn framework(run: &Run, date: Option<(u32, u32)>) -> Framework {
    let text = format!("{} {}", run.source, run.group).to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    let zero3 = run.layout.zero_stage == Some(3);
    if has(&["deepspeed", "vtrain"]) {
        Framework::Deepspeed
    } else if has(&["torchtitan", "llm-foundry", "mosaicml", "automodel", "fsdp"]) {
        Framework::Fsdp
    } else if zero3 && before(date, COALESCED_ZERO3_ARXIV) {
        Framework::Deepspeed
    } else if has(&["megatron", "nemotron", "nemo"]) || !zero3 {
        Framework::Megatron
    } else {
        Framework::Fsdp
    }
}

/// What a run's notes say, in lower case: sources state there what no layout field holds (the
/// GPU part and its power limit, whether torch.compile ran).
fn notes(run: &Run) -> String {
    run.notes.as_deref().unwrap_or_default().to_lowercase()
}

/// Whether `text` holds `word` as a word of its own: not inside a longer word or number
/// ("1500 w" is not "500 w", "compiled" is not "compile").
fn has_word(text: &str, word: &str) -> bool {
    let bounded = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
    text.match_indices(word).any(|(i, _)| {
        bounded(text[..i].chars().next_back()) && bounded(text[i + word.len()..].chars().next())
    })
}

/// The catalog GPU to price a run on, where its notes name a part other than its
/// `cluster.gpu`: an `h100-sxm` run whose notes say HBM2e at 500 W ran on Meta's Grand Teton
/// part ([`GRAND_TETON_H100`]), not the 700 W HBM3 SXM.
pub fn gpu_named_in_notes(run: &Run) -> Option<&'static str> {
    let n = notes(run);
    let at_500w = has_word(&n, "500 w") || has_word(&n, "500w");
    (run.cluster.gpu == "h100-sxm" && has_word(&n, "hbm2e") && at_500w).then_some(GRAND_TETON_H100)
}

/// Whether torch.compile ran: the layout's `torch_compile` where the file sets it, else
/// whether the run's `notes` name it and not as off.
fn compiled(run: &Run, notes: &str) -> bool {
    if let Some(on) = run.layout.torch_compile {
        return on;
    }
    let n = notes.replace("torch.compile", "compile");
    let off = [
        "compile=off",
        "compile off",
        "compile=false",
        "compile: false",
        "compile: off",
        "compile disabled",
        "compile was off",
        "without compile",
        "no compile",
    ];
    has_word(&n, "compile") && !off.iter().any(|o| n.contains(o))
}

/// Where a torchtitan run says it ran async TP (`enable_async_tensor_parallel`), which the
/// runs format has no field for: its notes, as one item of the recipe ("+ async TP"), or,
/// where the notes of a with/without pair say the same thing (they name both columns of the
/// source's table), its id ("-async-tp" against "-vanilla-tp"; the group names the study, not
/// the run, and is not read).
fn async_tp(run: &Run, notes: &str) -> Option<&'static str> {
    if notes.contains("+ async tp") {
        Some("async TP (the notes say so)")
    } else if has_word(&run.id.to_lowercase(), "async-tp") {
        Some("async TP (the run id says so)")
    } else {
        None
    }
}

/// Whether an fp8 run scaled per row, where its notes say so ("float8-rowwise").
fn rowwise(notes: &str) -> bool {
    has_word(notes, "rowwise")
}

/// Whether a run's source is one of Megatron-Bridge's performance tables, whose MoE recipes
/// force balanced routing (`moe_router_force_load_balancing = True`) and dispatch through
/// the `flex` dispatcher with HybridEP (`perf_recipes/qwen/h100/qwen3_moe.py`) or, before
/// 2026-02-23, DeepEP (`scripts/performance/configs/qwen/qwen3_workload_base_configs.py`).
fn bridge_perf_recipe(run: &Run) -> bool {
    run.source.to_lowercase().contains("megatron-bridge")
}

/// What the run's framework runs for a ZeRO stage and recomputation the run leaves null:
/// its recipe family's defaults where the source names NeMo or Megatron-Bridge (Megatron-Core
/// recipes) or torchtitan, else its framework's.
pub fn unsaid(run: &Run, framework: Framework) -> Unsaid {
    let text = format!("{} {}", run.source, run.group).to_lowercase();
    match framework {
        Framework::Megatron if has_word(&text, "nemo") || text.contains("megatron-bridge") => {
            MEGATRON_RECIPES
        }
        Framework::Fsdp if text.contains("torchtitan") => TORCHTITAN,
        _ => framework.defaults().unsaid,
    }
}

/// The expert tensor-parallel size a run leaves null under tensor parallelism: Megatron-Bridge's
/// MoE recipes set `expert_tensor_parallel_size = 1` (`recipes/qwen/h100/qwen3_moe.py`,
/// `recipes/deepseek/h100/deepseek_v3.py` at 067f987df), folding the expert-parallel group over
/// the TP ranks; elsewhere the framework's default, the TP size.
pub fn folded_experts(run: &Run) -> bool {
    run.model.moe.is_some() && run.layout.tp > 1 && bridge_perf_recipe(run)
}

/// Why a run that leaves `model.qk_norm` out has per-head query and key norms, where it does:
/// they define the architecture, not the run, so the catalog model of the same dimensions
/// (Qwen3's) decides.
pub fn qk_norm(shape: &crate::model::ModelShape) -> Option<String> {
    let (id, catalog) = crate::catalog::same_dimensions(shape)?;
    catalog
        .qk_norm
        .then(|| format!("true (the norms of {id}, whose dimensions the run's model has)"))
}

/// Whether the run's MoE routing was forced into balance, so that no expert carries more
/// than the mean.
pub fn forced_balance(run: &Run) -> bool {
    run.model.moe.is_some() && bridge_perf_recipe(run)
}

/// Whether the run used fused attention: as published, else not where the source predates
/// FlashAttention or its framework's support for it.
fn flash_attention(
    attention: Option<Attention>,
    framework: Framework,
    date: Option<(u32, u32)>,
    choices: &mut BTreeMap<Choice, String>,
) -> bool {
    match attention {
        Some(a) => a == Attention::Flash,
        None => {
            let framework_flash = match framework {
                Framework::Megatron => Some(MEGATRON_FLASH_ARXIV),
                Framework::Deepspeed => Some(DEEPSPEED_FLASH_ARXIV),
                Framework::Fsdp => None,
            };
            let why = if before(date, FLASH_ATTENTION_ARXIV) {
                Some("unfused: the source predates FlashAttention")
            } else if framework_flash.is_some_and(|paper| before(date, paper)) {
                Some("unfused: the source predates its framework's FlashAttention")
            } else {
                None
            };
            choices.insert(Choice::Attention, why.unwrap_or("fused (flash)").into());
            why.is_none()
        }
    }
}

/// Whether the run overlapped its gradient reduction: as published, else the framework's
/// default.
fn overlap_grad_reduce(
    overlap: Option<bool>,
    framework: Framework,
    megatron_core: bool,
    choices: &mut BTreeMap<Choice, String>,
) -> bool {
    match overlap {
        Some(o) => o,
        None => {
            // FSDP and DDP always overlap; Megatron-Core runs turn it on in every published
            // recipe; DeepSpeed's `overlap_comm` is off by default.
            let o = match framework {
                Framework::Fsdp => true,
                Framework::Megatron => megatron_core,
                Framework::Deepspeed => false,
            };
            choices.insert(Choice::OverlapGradReduce, o.to_string());
            o
        }
    }
}

/// How ZeRO-3 fetched the parameters: tensor by tensor and blocking in DeepSpeed before
/// v0.6.0, per layer after the layer above under Composer's FSDP, else per layer and
/// prefetched; said where the run is ZeRO-3.
fn param_fetch(
    run: &Run,
    framework: Framework,
    (date, llm_foundry): (Option<(u32, u32)>, bool),
    choices: &mut BTreeMap<Choice, String>,
) -> ParamFetch {
    // DeepSpeed's ZeRO-3 fetched tensor by tensor, blocking, until v0.6.0; llm-foundry trains
    // under Composer's FSDP, whose backward prefetch defaults to BACKWARD_POST.
    let fetch = if framework == Framework::Deepspeed && before(date, COALESCED_ZERO3_ARXIV) {
        ParamFetch::PerTensor
    } else if llm_foundry {
        ParamFetch::PostBackward
    } else {
        ParamFetch::Coalesced
    };
    if run.layout.zero_stage == Some(3) {
        let why = match fetch {
            ParamFetch::PerTensor => "per tensor, blocking (DeepSpeed before v0.6.0)",
            ParamFetch::Coalesced => "per layer, prefetched",
            ParamFetch::PostBackward => {
                "per layer, gathered for backward after the layer above (Composer's BACKWARD_POST)"
            }
        };
        choices.insert(Choice::ParamFetch, why.into());
    }
    fetch
}

/// Whether the run's norms, rotary, gating and residuals run fused. torchtitan and Hugging
/// Face models (NeMo AutoModel) run eager PyTorch ops unless torch.compile fuses them (off by
/// default, so only where the notes say it ran); Megatron, Megatron-DeepSpeed and llm-foundry
/// fuse them by hand.
fn fused_elementwise(
    run: &Run,
    source: &str,
    notes: &str,
    choices: &mut BTreeMap<Choice, String>,
) -> bool {
    let eager_stack = source.contains("torchtitan") || source.contains("automodel");
    let fused = !eager_stack || compiled(run, notes);
    choices.insert(Choice::FusedElementwise, fused.to_string());
    if eager_stack {
        let compile = if fused {
            "on (the notes say so)"
        } else {
            "off (the default)"
        };
        choices.insert(Choice::TorchCompile, compile.into());
    }
    fused
}

/// The training inputs of a run and the choices made for what it left unpublished.
pub fn training(run: &Run, arch: Arch) -> (Training, BTreeMap<Choice, String>) {
    let l = &run.layout;
    let notes = notes(run);
    let mut choices = BTreeMap::new();
    let date = published(&run.source);
    let framework = framework(run, date);
    choices.insert(Choice::Framework, framework.to_string());
    let flash_attention = flash_attention(l.attention, framework, date, &mut choices);
    let megatron_core = !before(date, MEGATRON_CORE_ARXIV);
    let overlap_grad_reduce = overlap_grad_reduce(
        l.overlap_grad_reduce,
        framework,
        megatron_core,
        &mut choices,
    );
    // Megatron-Core under bf16 reduces fp32 gradients; torchtitan's FSDP2 default
    // `mixed_precision_reduce` is float32; llm-foundry's PURE mixed precision, DeepSpeed and
    // the fp16 Megatron papers reduce in the 2-byte training type.
    let text = run.source.to_lowercase();
    let llm_foundry = text.contains("llm-foundry") || text.contains("mosaicml");
    let grad_reduce = match framework {
        Framework::Megatron if megatron_core => ReduceDtype::Fp32,
        Framework::Fsdp if !llm_foundry => ReduceDtype::Fp32,
        _ => ReduceDtype::Bf16,
    };
    choices.insert(Choice::GradReduce, grad_reduce.to_string());
    let precision = match l.precision.unwrap_or(Precision::Bf16) {
        Precision::Fp8 if rowwise(&notes) => {
            choices.insert(Choice::Fp8Recipe, "rowwise (the notes say so)".into());
            Precision::Fp8Rowwise
        }
        p => p,
    };
    // llm-foundry's benchmarks ran its Triton FlashAttention port; Megatron-Core reaches
    // cuDNN's fused attention through Transformer Engine; the rest call FlashAttention-2.
    let flash_kernel = if llm_foundry {
        FlashKernel::Flash1
    } else if framework == Framework::Megatron && megatron_core {
        FlashKernel::Newest
    } else {
        FlashKernel::Flash2
    };
    if flash_attention {
        choices.insert(
            Choice::FlashKernel,
            format!("{flash_kernel:?}").to_lowercase(),
        );
    }
    let fused_elementwise = fused_elementwise(run, &text, &notes, &mut choices);
    let param_fetch = param_fetch(run, framework, (date, llm_foundry), &mut choices);
    // llm-foundry's MPT defaults to flash-attn's fused cross-entropy (`loss_fn:
    // fused_crossentropy`); Megatron-Bridge's model providers turn Megatron-Core's fusion on.
    let bridge = bridge_perf_recipe(run);
    let loss = if llm_foundry || bridge {
        LossKernel::Fused
    } else {
        framework.defaults().loss
    };
    choices.insert(Choice::Loss, format!("{loss:?}").to_lowercase());
    // DualPipe runs in DeepSeek's own framework, whose dispatch crosses the network once per
    // node and fans out over NVLink there (DeepSeek-V3 §3.2.2).
    let dualpipe = l.schedule == Some(super::Schedule::Dualpipe);
    // Otherwise each framework's own: Megatron-Core's `moe_token_dispatcher_type` defaults to
    // `allgather` (`TransformerConfig`); DeepSpeed-MoE and torchtitan exchange by all-to-all.
    let moe_dispatch = if bridge || dualpipe {
        MoeDispatch::NodeDedup
    } else if framework == Framework::Megatron {
        MoeDispatch::AllGather
    } else {
        MoeDispatch::AllToAll
    };
    if run.model.moe.is_some() && l.ep.unwrap_or(1) > 1 {
        choices.insert(Choice::MoeDispatch, moe_dispatch.to_string());
    }
    // DeepSeek's framework runs DeepGEMM's grouped kernels (DeepSeek-V3 §3.3); otherwise the
    // framework's own ([`ExpertGemms`]).
    let (expert_gemms, why) = if dualpipe {
        (
            ExpertGemms::Grouped,
            "grouped (DeepGEMM, DeepSeek's framework)",
        )
    } else {
        let own = framework.defaults().expert_gemms;
        let why = match own {
            ExpertGemms::Grouped => "grouped (torch._grouped_mm)",
            ExpertGemms::PerExpertStreams => "per-expert (Transformer Engine's GroupedLinear)",
            ExpertGemms::Looped => "looped (DeepSpeed-MoE)",
        };
        (own, why)
    };
    if run.model.moe.is_some() {
        choices.insert(Choice::ExpertGemms, why.into());
    }
    // Megatron-Core recipes on Hopper turn on --tp-comm-overlap with sequence parallelism
    // (Transformer Engine userbuffers need sm_90); torchtitan's async TP is opt-in.
    let async_tp = async_tp(run, &notes).filter(|_| l.tp > 1 && framework == Framework::Fsdp);
    if let Some(why) = async_tp {
        choices.insert(Choice::TpCommOverlap, why.into());
    }
    let defaults = Training::for_framework(framework, arch, run.model.seq_len, l.global_batch_size);
    let tp_comm_overlap =
        async_tp.is_some() || defaults.tp_comm_overlap && megatron_core && l.tp > 1;
    (
        Training {
            precision,
            optimizer: Optimizer::Adam,
            flash_attention,
            overlap_grad_reduce,
            flash_kernel,
            tp_comm_overlap,
            fused_elementwise,
            framework,
            grad_reduce,
            param_fetch,
            loss,
            moe_dispatch,
            expert_gemms,
            ..defaults
        },
        choices,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_order_as_their_names() {
        // The JSON and the table list the choices in the map's order, which was that of the
        // names when the keys were strings.
        assert!(Choice::ALL
            .windows(2)
            .all(|w| w[0].as_str() < w[1].as_str()));
    }

    #[test]
    fn null_knobs_take_the_defaults_of_the_recipe_family_the_source_names() {
        let mut run = table2().remove(6);
        let family = |run: &Run| unsaid(run, framework(run, published(&run.source))).name;
        assert_eq!(family(&run), "Megatron-LM");
        run.source = "NeMo 2.0 recipe llama3_70b, 2025".into();
        assert_eq!(family(&run), "NeMo and Megatron-Bridge recipes");
        // Nemotron is a model, not NeMo: trained with Megatron-LM.
        run.source = "Parmar et al. 2024, 'Nemotron-4 15B Technical Report'".into();
        assert_eq!(family(&run), "Megatron-LM");
        run.source = "torchtitan benchmarks, 2024".into();
        assert_eq!(unsaid(&run, Framework::Fsdp), TORCHTITAN);
        assert_eq!(unsaid(&run, Framework::Fsdp).recompute, None);
        run.source = "vTrain (Bang et al. 2024)".into();
        assert_eq!(family(&run), "DeepSpeed");
        assert_eq!(unsaid(&run, Framework::Deepspeed).zero_stage, 0);
    }

    #[test]
    fn flash_attention_by_publication_date() {
        let b = |s| before(published(s), FLASH_ATTENTION_ARXIV);
        assert!(b("Narayanan et al. 2021, arXiv:2104.04473 (SC'21)"));
        assert!(b("Korthikanti et al. 2022, arXiv:2205.05198 (MLSys 2023)"));
        assert!(!b("Dao 2023, arXiv:2307.08691"));
        assert!(!b("MosaicML llm-foundry benchmarking README (2024)"));
        // Megatron reached FlashAttention in December 2022, Megatron-DeepSpeed in July 2023.
        assert!(before(
            published("BLOOM, arXiv:2211.05100"),
            MEGATRON_FLASH_ARXIV
        ));
        assert!(!before(published("arXiv:2302.00001"), MEGATRON_FLASH_ARXIV));
        assert!(before(published("arXiv:2302.00001"), DEEPSPEED_FLASH_ARXIV));
        // Without an arXiv id the year decides, where it can.
        let zero3 = |s| before(published(s), COALESCED_ZERO3_ARXIV);
        assert!(zero3("Narayanan et al., SC'21 (2021), Table 2"));
        assert!(!zero3("a 2022 report"));
        assert!(!zero3("commit f2e5db4020c44, 2024-07-15"));
        assert!(!zero3("commit 2013a4dd6, 2026-04-10"));
        assert!(!zero3("no date at all"));
        // The latest year counts, and GPU counts are not years.
        assert!(!zero3("a 2025 summary of Narayanan et al. 2021"));
        assert!(zero3("Narayanan et al. 2021 on 2048 GPUs"));
    }

    /// Narayanan et al.'s Table 2 runs: ZeRO-3 first, PTD-P from the seventh.
    fn table2() -> Vec<Run> {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/narayanan2021-table2.yaml"
        ))
        .unwrap();
        crate::validate::parse_runs(&text, "table2").unwrap().runs
    }

    #[test]
    fn zero3_before_coalesced_fetch_ran_deepspeed_tensor_by_tensor() {
        let mut runs = table2();
        let (t, choices) = training(&runs[0], Arch::Hopper);
        assert_eq!(
            (t.framework, t.param_fetch),
            (Framework::Deepspeed, ParamFetch::PerTensor)
        );
        assert!(choices[&Choice::ParamFetch].contains("before v0.6.0"));
        assert_eq!(
            training(&runs[6], Arch::Hopper).0.framework,
            Framework::Megatron
        );
        // The same ZeRO-3 run published after FSDP and DeepSpeed's coalesced fetch: FSDP, or
        // Megatron-Core's own sharding where the source names Megatron.
        runs[0].source = "a 2024 benchmark README".into();
        let (t, _) = training(&runs[0], Arch::Hopper);
        assert_eq!(
            (t.framework, t.param_fetch),
            (Framework::Fsdp, ParamFetch::Coalesced)
        );
        runs[0].source = "NVIDIA-NeMo/Megatron-Bridge performance summary, 2025".into();
        assert_eq!(
            training(&runs[0], Arch::Hopper).0.framework,
            Framework::Megatron
        );
        // llm-foundry's benchmarks ran Composer's FSDP, gathering for backward after the
        // layer above (BACKWARD_POST).
        runs[0].source = "MosaicML llm-foundry, scripts/train/benchmarking/README.md".into();
        let (t, choices) = training(&runs[0], Arch::Hopper);
        assert_eq!(
            (t.framework, t.param_fetch),
            (Framework::Fsdp, ParamFetch::PostBackward)
        );
        assert!(choices[&Choice::ParamFetch].contains("BACKWARD_POST"));
    }

    #[test]
    fn the_notes_name_the_gpu_part_and_torch_compile() {
        let mut run = table2().swap_remove(6);
        run.source = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md".into();
        run.cluster.gpu = "h100-sxm".into();
        let fused = |run: &Run| training(run, Arch::Hopper).0.fused_elementwise;
        let with = |run: &mut Run, notes: &str| run.notes = Some(notes.into());
        // Without notes: the SXM part, and torchtitan's default, eager.
        assert_eq!(gpu_named_in_notes(&run), None);
        assert!(!fused(&run));
        with(
            &mut run,
            "96GB HBM2e H100s at the default 500 W limit (the catalog's h100-sxm is 80GB HBM3, \
             700 W). BF16. FSDP2, torch.compile=off",
        );
        assert_eq!(gpu_named_in_notes(&run), Some(GRAND_TETON_H100));
        assert!(!fused(&run));
        assert_eq!(
            training(&run, Arch::Hopper).1[&Choice::TorchCompile],
            "off (the default)"
        );
        with(
            &mut run,
            "96GB HBM2e at 500W; fp8 (Float8 linears) + torch.compile",
        );
        assert_eq!(gpu_named_in_notes(&run), Some(GRAND_TETON_H100));
        assert!(fused(&run));
        with(&mut run, "H100 HBM2e, 500 W limit; FSDP + compile");
        assert!(fused(&run));
        // Words inside longer words and numbers, and compile said to be off, do not count.
        for notes in [
            "H100 HBM2e; 1500 W per host; compiled from the 2024 tables",
            "HBM2e, 500 warm-up steps, torch.compile: false",
            "H100 at 500 W (HBM3); run without torch.compile",
            "HBM2e H100 at 500 W, compile disabled",
        ] {
            with(&mut run, notes);
            let part = gpu_named_in_notes(&run);
            assert!(part.is_none() || notes.contains("disabled"), "{notes}");
            assert!(!fused(&run), "{notes}");
        }
        // The layout's own field wins over the notes.
        run.layout.torch_compile = Some(true);
        assert!(fused(&run));
        run.layout.torch_compile = None;
        // Only an H100 SXM run is another part; Megatron fuses by hand whatever the notes say.
        with(&mut run, "96GB HBM2e at 500 W, torch.compile=off");
        run.cluster.gpu = "h200-sxm".into();
        assert_eq!(gpu_named_in_notes(&run), None);
        run.source = "Megatron-LM README (2024)".into();
        assert!(fused(&run));
        assert!(!training(&run, Arch::Hopper)
            .1
            .contains_key(&Choice::TorchCompile));
    }

    #[test]
    fn async_tp_and_rowwise_scaling_come_from_what_the_run_says() {
        let mut run = table2().swap_remove(6);
        run.source =
            "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md".into();
        run.layout.precision = Some(Precision::Fp8);
        assert!(run.layout.tp > 1);
        let priced = |run: &Run| {
            let (t, choices) = training(run, Arch::Hopper);
            (t.tp_comm_overlap, t.precision, choices)
        };
        // Both columns of the source's table named in the notes of both runs say nothing.
        let table = "fp8 (float8-tensorwise). FSDP 32 x TP 8, torch.compile (file: 'Vanilla TP \
                     tokens/sec' / 'Async TP tokens/sec')";
        run.notes = Some(table.into());
        run.id = "torchtitan2025-h100-70b-256gpu-float8-tensorwise-vanilla-tp".into();
        let (overlap, precision, choices) = priced(&run);
        assert!(!overlap && precision == Precision::Fp8);
        assert!(!choices.contains_key(&Choice::TpCommOverlap));
        run.id = "torchtitan2025-h100-70b-256gpu-float8-tensorwise-async-tp".into();
        let (overlap, _, choices) = priced(&run);
        assert!(overlap);
        assert_eq!(
            choices[&Choice::TpCommOverlap],
            "async TP (the run id says so)"
        );
        // The recipe list in the notes; a group or an id that merely contains "asynctp"
        // does not count.
        run.id = "torchtitan2024-h100-70b-256gpu-2d-asynctp-fp8".into();
        run.group = "torchtitan-h100-asynctp-llama3-70b-fp8".into();
        assert!(!priced(&run).0);
        run.notes = Some("fp8 (Float8) + torch.compile + async TP. FSDP 8 x TP 8 x PP 8".into());
        assert_eq!(
            priced(&run).2[&Choice::TpCommOverlap],
            "async TP (the notes say so)"
        );
        // Without TP there is nothing to overlap.
        run.layout.tp = 1;
        assert!(!priced(&run).0);
        // Rowwise only where the notes say so, and only for an fp8 run.
        run.notes = Some("fp8 (float8-rowwise). FSDP 8 x TP 8".into());
        let (_, precision, choices) = priced(&run);
        assert_eq!(precision, Precision::Fp8Rowwise);
        assert_eq!(choices[&Choice::Fp8Recipe], "rowwise (the notes say so)");
        run.layout.precision = Some(Precision::Bf16);
        assert_eq!(priced(&run).1, Precision::Bf16);
    }

    #[test]
    fn the_loss_runs_as_the_source_s_framework_runs_it() {
        let mut run = table2().swap_remove(6);
        let loss = |run: &Run| training(run, Arch::Hopper).0.loss;
        assert_eq!(loss(&run), LossKernel::Megatron);
        run.source = "NVIDIA-NeMo/Megatron-Bridge performance summary, 2025".into();
        assert_eq!(loss(&run), LossKernel::Fused);
        run.source = "mosaicml/llm-foundry benchmarking README (2024)".into();
        assert_eq!(loss(&run), LossKernel::Fused);
        run.source = "pytorch/torchtitan benchmarks (2024-12)".into();
        assert_eq!(loss(&run), LossKernel::Eager);
    }
}
