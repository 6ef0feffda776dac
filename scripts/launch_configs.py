"""Reads launch configs `tuner --emit` wrote with each framework's own parser.

    python launch_configs.py torchtitan-0.2 FILE
    python launch_configs.py torchtitan FILE WORLD_SIZE      (0.3's command line)
    python launch_configs.py deepspeed FILE
    python launch_configs.py megatron FILE WORLD_SIZE

Each exits non-zero with the framework's own message when it refuses the file, and checks
that what the framework read is the layout and model the file was written for. Run by
scripts/check-launch-configs.sh, which installs the frameworks.
"""

import json
import math
import os
import shlex
import sys
import typing


def fail(msg: str) -> None:
    sys.exit(f"{sys.argv[2]}: {msg}")


def batches_divide(t, p, batch_ranks: int) -> None:
    """torchtitan's Trainer asserts that the global batch is whole local batches of every
    batch rank (train.py, trainer.py), and its pipeline that a local batch is whole
    microbatches."""
    if t.global_batch_size % (t.local_batch_size * batch_ranks):
        fail(f"global batch {t.global_batch_size} is not local {t.local_batch_size} x {batch_ranks} x n")
    if p.pipeline_parallel_degree > 1 and t.local_batch_size % p.pipeline_parallel_microbatch_size:
        fail("local batch is not a whole number of pipeline microbatches")


def torchtitan(path: str) -> None:
    from torchtitan.config import ConfigManager
    from torchtitan.distributed.pipeline_parallel import generate_llm_fqn_per_model_part
    from torchtitan.protocols.train_spec import get_train_spec

    cfg = ConfigManager().parse_args(["--job.config_file", path])
    # The flavor must exist, or torchtitan trains nothing (v0.1 trained its debug model).
    spec = get_train_spec(cfg.model.name)
    if cfg.model.flavor not in spec.model_args:
        fail(f"torchtitan has no flavor {cfg.model.flavor!r} of {cfg.model.name}")
    args = spec.model_args[cfg.model.flavor]
    from torchtitan.protocols.model_converter import _registry_model_converter_cls as converters

    # build_model_converters looks each name up and fails at launch on one it lacks.
    if unknown := set(cfg.model.converters) - set(converters):
        fail(f"torchtitan registers no converter {sorted(unknown)}; it has {sorted(converters)}")
    p, t = cfg.parallelism, cfg.training
    batches_divide(t, p, p.data_parallel_replicate_degree * p.data_parallel_shard_degree)
    if p.pipeline_parallel_degree > 1:
        # torchtitan's own split (pipeline_parallel_split, v0.2.2).
        first = p.pipeline_parallel_first_stage_less_layers
        last = p.pipeline_parallel_last_stage_less_layers
        stages = math.ceil((args.n_layers + first + last) / p.pipeline_parallel_layers_per_stage)
        if stages % p.pipeline_parallel_degree:
            fail(f"{stages} stages do not divide over {p.pipeline_parallel_degree} ranks")
        parts = generate_llm_fqn_per_model_part(stages, args.n_layers, first, last)
        layers = [sum(m.startswith("layers.") for m in part) for part in parts]
        print(f"read: stages hold {layers} layers")
    print(
        f"read: {cfg.model.name} {cfg.model.flavor}: {args.n_layers} layers of width {args.dim},"
        f" converters {cfg.model.converters}"
    )


def torchtitan_0_3(path: str, world: str) -> None:
    """torchtitan 0.3's command line: the registry function, then the overrides."""
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import pipeline_parallel as pp_split
    from torchtitan.distributed.parallel_dims import ParallelDims

    import torchtitan.components.quantization.float8 as float8

    # Registry functions with float8 converters build them at parse time, which asks the GPU
    # whether it runs float8: answer as the Hopper the config is for.
    float8.has_cuda_capability = lambda major, minor: (9, 0) >= (major, minor)
    words = shlex.split(" ".join(line for line in open(path) if not line.startswith("#")))
    cfg = ConfigManager().parse_args(words)
    spec, p, t = cfg.model_spec, cfg.parallelism, cfg.training
    dims = ParallelDims.from_config(p, int(world))
    batches_divide(t, p, dims.dp_replicate * dims.dp_shard)
    if p.pipeline_parallel_degree > 1:
        # torchtitan 0.3's own stage count and split (pipeline_parallel.py), which raise on
        # a split the ranks cannot take.
        stages, layers, first, last = pp_split._get_pipeline_metadata(dims, p, spec.model)
        parts = pp_split._generate_llm_fqn_per_model_part(stages, layers, first, last)
        held = [sum(m.startswith("layers.") for m in part) for part in parts]
        print(f"read: stages hold {held} layers")
    print(
        f"read: {spec.name} {spec.flavor}: {len(spec.model.layers)} layers; TP {p.tensor_parallel_degree}"
        f" PP {p.pipeline_parallel_degree} EP {p.expert_parallel_degree} over {world} GPUs;"
        f" activation checkpointing {type(cfg.activation_checkpoint).__qualname__}"
    )


def deepspeed(path: str) -> None:
    import deepspeed.runtime.config as ds_config

    cfg = json.load(open(path))
    dp = cfg["meshfit"]["data_parallel"]

    class Mpu:
        """The data-parallel group Megatron-DeepSpeed hands DeepSpeed, of the layout's size."""

        @staticmethod
        def get_data_parallel_world_size() -> int:
            return dp

    # DeepSpeedConfig asks the process group for the rank first; without one it takes a world
    # of 1 and ignores the mpu.
    ds_config.dist.get_rank = lambda *a, **k: 0
    c = ds_config.DeepSpeedConfig(cfg, mpu=Mpu())
    print(
        f"read: train_batch_size {c.train_batch_size} = micro {c.train_micro_batch_size_per_gpu}"
        f" x accumulation {c.gradient_accumulation_steps} x dp {c.world_size};"
        f" ZeRO {c.zero_optimization_stage}"
    )


def megatron(path: str, world: str) -> None:
    # Megatron-LM core_v0.19 needs Python 3.12 for typing.override, a decorator that changes
    # nothing at run time.
    if not hasattr(typing, "override"):
        typing.override = lambda f: f
    text = "".join(line for line in open(path) if not line.startswith("#"))
    words = shlex.split(text.replace("\\\n", " "))
    os.environ.update(WORLD_SIZE=world, RANK="0", LOCAL_RANK="0", CUDA_DEVICE_MAX_CONNECTIONS="1")
    sys.argv = ["pretrain_gpt.py", *words]
    import torch
    import megatron.training.arguments as arguments

    # validate_args asks the GPU which checks apply; answer as the Hopper the config is for.
    arguments.get_device_arch_version = lambda: 9
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    args = arguments.parse_args()
    arguments.validate_args(args, {})
    from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding
    from megatron.core.transformer.enums import LayerType

    # The vocabulary Megatron builds, after its padding.
    vocab = vocab_size_with_padding(args.vocab_size, args, logging_enabled=False)
    print(
        f"read: dp {args.data_parallel_size}, rotary base {args.rotary_base},"
        f" dropout {args.hidden_dropout}/{args.attention_dropout}, vocabulary {vocab},"
        f" qk layernorm {args.qk_layernorm}, positions {args.position_embedding_type},"
        f" softmax {args.softmax_type}, quick geglu {args.quick_geglu}"
    )
    if args.pipeline_model_parallel_layout is not None:
        # The model config checks a layout against the layer and MTP counts (without
        # Transformer Engine it refuses fp8 MoE, so a bf16 config carries the layout check).
        config = arguments.core_transformer_config_from_args(args)
        layout = config.pipeline_model_parallel_layout.layout
        ranks = [sum(chunk.count(LayerType.decoder) for chunk in rank) for rank in layout]
        print(f"read: pipeline layout, decoder layers per rank {ranks}")


if __name__ == "__main__":
    kind, rest = sys.argv[1], sys.argv[2:]
    checks = {
        "torchtitan-0.2": torchtitan,
        "torchtitan": torchtitan_0_3,
        "deepspeed": deepspeed,
        "megatron": megatron,
    }
    checks[kind](*rest)
