//! DeepSpeed's log: the engine's configuration dump (`DeepSpeedEngine configuration:`, then
//! `[config.py:1003:print]   train_batch_size ............. 32` lines, then the user's
//! `json = {...}`), and the `ThroughputTimer`'s lines (`deepspeed/utils/timer.py`):
//! `epoch=0/micro_step=20/global_step=10, RunningAvgSamplesPerSec=46.98,
//! CurrSamplesPerSec=50.87, MemAllocated=5.53GB, ...` (2023 on), before it `0/10,
//! RunningAvgSamplesPerSec=428.07, CurrSamplesPerSec=431.95, ...`.
//!
//! `CurrSamplesPerSec` is `train_batch_size` over the time from the step's first forward to
//! its optimizer step, summed over its micro-steps (the timer starts in `forward` and stops in
//! `step`), so a step takes `train_batch_size / CurrSamplesPerSec`; the gaps between a step
//! and the next forward (data loading outside DeepSpeed's loader) are not in it.
//! `RunningAvgSamplesPerSec` is a running mean since step 2, not one step's, and is not read.
//! Megatron-DeepSpeed's own `samples per second` sits in Megatron's iteration line, which the
//! Megatron reader reads for its time. DeepSpeed-Chat's per-rank `Samples/sec:` lines time one
//! rank's microbatch and are not read either.
//!
//! Cannot read: the model (DeepSpeed never prints its shape; DeepSpeed-Chat's command line
//! names it, `--model_name_or_path`), tensor and pipeline parallelism under Megatron (the
//! engine's `world_size` is the data-parallel size), the GPU and the network.

use super::lines::{count, keep_first, leading_number, lines, number_after, Settings};
use super::{state, Family, Job, Measure, Step};
use crate::mesh::Precision;

/// The throughput timer's mark.
pub const MARK: &str = "SamplesPerSec=";

/// Reads a DeepSpeed log; `None` when no line prints [`MARK`].
pub fn read(text: &str) -> Option<Job> {
    if !text.contains(MARK) {
        return None;
    }
    let mut job = Job::new(
        Family::Deepspeed,
        Measure::SamplesPerSecond,
        "CurrSamplesPerSec (DeepSpeed's ThroughputTimer)",
    );
    let mut config = Settings::new();
    let mut json = Settings::new();
    let mut dumps = 0;
    let mut in_config = false;
    let mut launched: Option<(u32, usize)> = None;
    for line in lines(text) {
        let t: &str = &line.text;
        let n = line.number;
        if t.contains("DeepSpeedEngine configuration") {
            dumps += 1;
            in_config = dumps == 1;
            continue;
        }
        if t.contains(MARK) {
            in_config = false;
            step(t, n, line.rank, &mut job);
            continue;
        }
        if let Some(w) = number_after(t, "dist_world_size=").and_then(count) {
            launched.get_or_insert((w, n));
        }
        if let Some(at) = t.find("--model_name_or_path ") {
            let name = t[at + "--model_name_or_path ".len()..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches(['\'', '"', ',']);
            if !name.is_empty() {
                state(&mut job.model.name, name.to_string(), n);
            }
        }
        if !in_config {
            continue;
        }
        if let Some(at) = t.find(":print]") {
            // `[config.py:1003:print]   train_micro_batch_size_per_gpu  2`: no dots when the key
            // fills the column.
            let body = t[at + ":print]".len()..].trim();
            if let Some((k, v)) = body.split_once(' ') {
                let v = v.trim_start_matches([' ', '.']).trim();
                keep_first(&mut config, k, v, n);
            }
        } else if let Some((k, v)) = t.trim().split_once("\": ") {
            // The user's json: `    "train_batch_size": 32,`.
            let k = k.trim_start_matches('"');
            keep_first(&mut json, k, v.trim_end_matches(','), n);
        } else if t.contains("] [") && !t.contains("config.py") {
            in_config = t.contains("print_user_config");
        }
    }
    if dumps > 1 {
        job.notes.push(format!(
            "{dumps} engines printed their configuration (DeepSpeed-Chat's DPO and RLHF steps build several): the first one's is read"
        ));
    }
    apply(&config, &json, launched, &mut job);
    Some(job)
}

fn step(t: &str, line: usize, rank: Option<u32>, job: &mut Job) {
    let Some(at) = t.find("SamplesPerSec=") else {
        return;
    };
    // `global_step=10`, or the old `0/10,` (epoch/step) before the rates.
    let number = number_after(t, "global_step=").or_else(|| {
        let head = t[..at].trim_end().trim_end_matches("RunningAvg").trim_end();
        let head = head.trim_end_matches(',');
        let (_, step) = head.rsplit_once('/')?;
        leading_number(step)
    });
    let Some(number) = number.and_then(count) else {
        job.skipped.push(format!(
            "line {line}: samples per second without a step number"
        ));
        return;
    };
    let rate = if t.contains("CurrSamplesPerSec=") {
        number_after(t, "CurrSamplesPerSec=")
    } else if !t.contains("RunningAvgSamplesPerSec=") {
        number_after(t, "SamplesPerSec=")
    } else {
        None
    };
    let s = Step {
        number: u64::from(number),
        value: 0.0,
        line,
        rank,
        tflops: None,
        batch: None,
    };
    job.step(s, rate, "CurrSamplesPerSec");
}

fn apply(config: &Settings, json: &Settings, launched: Option<(u32, usize)>, job: &mut Job) {
    let num = |k: &str| {
        config
            .get(k)
            .or_else(|| json.get(k))
            .and_then(|(v, n)| Some((leading_number(v).and_then(count)?, *n)))
    };
    let flag = |k: &str| config.get(k).map(|(v, n)| (v == "True", *n));
    let l = &mut job.layout;
    if let Some((b, n)) = num("train_batch_size").filter(|b| b.0 > 0) {
        state(&mut l.global_batch_size, b, n);
    }
    if let Some((b, n)) = num("train_micro_batch_size_per_gpu").filter(|b| b.0 > 0) {
        state(&mut l.microbatch_size, b, n);
    }
    if let Some((z, n)) = num("zero_optimization_stage").or_else(|| num("stage")) {
        state(&mut l.zero_stage, z.min(3) as u8, n);
    }
    if let Some((true, n)) = flag("bfloat16_enabled") {
        state(&mut l.precision, Precision::Bf16, n);
    } else if let Some((true, n)) = flag("fp16_enabled") {
        job.notes.push(format!(
            "precision null: the engine trains in fp16 (line {n}), which format 1 has no value for; its GEMMs run at the bf16 rate, which validate prices for null"
        ));
    }
    // train_batch_size = micro x gradient accumulation x world_size: the engine's world_size
    // is its data-parallel size. Without Megatron (no mpu) that is every GPU, so tp = pp = 1;
    // the launcher's dist_world_size, where printed, says so or not.
    let Some((world, n)) = num("world_size").filter(|w| w.0 > 0) else {
        return;
    };
    state(&mut job.layout.dp, world, n);
    match launched {
        Some((all, _)) if all != world => job.notes.push(format!(
            "the engine's world_size {world} is less than the launcher's {all} GPUs: model parallelism it does not print"
        )),
        _ => {
            state(&mut job.layout.tp, 1, n);
            state(&mut job.layout.pp, 1, n);
            state(&mut job.layout.cp, 1, n);
            state(&mut job.layout.ep, 1, n);
            state(&mut job.cluster.gpus, world, n);
            job.notes.push(format!(
                "tp = pp = 1: the engine's data-parallel world_size ({world}, line {n}) is every GPU"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::job::value;

    #[test]
    fn engine_dump_and_both_timer_forms() {
        let log = "\
[2025-01-02 15:45:26,832] [INFO] [launch.py:164:main] dist_world_size=8
[2025-01-02 15:46:55,968] [INFO] [config.py:999:print] DeepSpeedEngine configuration:
[2025-01-02 15:46:55,970] [INFO] [config.py:1003:print]   fp16_enabled ................. True
[2025-01-02 15:46:55,969] [INFO] [config.py:733:__init__] Config mesh_device None world_size = 8
[2025-01-02 15:46:55,971] [INFO] [config.py:1003:print]   train_batch_size ............. 32
[2025-01-02 15:46:55,971] [INFO] [config.py:1003:print]   train_micro_batch_size_per_gpu  2
[2025-01-02 15:46:55,972] [INFO] [config.py:1003:print]   world_size ................... 8
[2025-01-02 15:46:55,972] [INFO] [config.py:1003:print]   zero_optimization_stage ...... 0
[2025-01-02 15:47:38,842] [INFO] [timer.py:264:stop] epoch=0/micro_step=20/global_step=10, RunningAvgSamplesPerSec=46.98, CurrSamplesPerSec=50.86, MemAllocated=5.53GB
[2022-10-31 10:59:51,436] [INFO] [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=428.07, CurrSamplesPerSec=431.95, MemAllocated=1.64GB
[2022-10-31 10:59:51,436] [INFO] [timer.py:198:stop] 0/30, RunningAvgSamplesPerSec=428.07, CurrSamp";
        let job = read(log).unwrap();
        assert_eq!(value(&job.layout.global_batch_size), Some(32));
        assert_eq!(value(&job.layout.microbatch_size), Some(2));
        assert_eq!(value(&job.layout.dp), Some(8));
        assert_eq!(value(&job.layout.tp), Some(1));
        assert_eq!(job.layout.zero_stage.as_ref().unwrap().value, 0);
        assert_eq!(job.layout.precision, None);
        assert_eq!(
            job.steps
                .iter()
                .map(|s| (s.number, s.value))
                .collect::<Vec<_>>(),
            [(10, 50.86), (20, 431.95)]
        );
        assert_eq!(job.skipped.len(), 1, "{:?}", job.skipped);
    }
}
