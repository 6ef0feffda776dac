//! The backend the flags pick: this node's GPUs, or the sim of `--profile` with its faults,
//! busy GPUs, nodes and delays; and the refusal of those sim flags on real GPUs.

use crate::cli::{BackendChoice, Source};
use crate::exit::{from_flags, usage};
use anyhow::Result;
use microbench::{sim, Backend, GpuBackend, SimBackend};

use std::time::Duration;

pub(super) fn backend(src: &Source) -> Result<Box<dyn Backend>> {
    match src.backend {
        BackendChoice::Nccl => {
            reject_sim_flags(src)?;
            Ok(Box::new(GpuBackend::new()?))
        }
        BackendChoice::Sim => {
            let name = src.profile.as_deref().ok_or_else(|| {
                let names: Vec<&str> = sim::profiles().iter().map(|p| p.name).collect();
                usage(format!(
                    "--backend sim needs --profile: one of {}",
                    names.join(", ")
                ))
            })?;
            let profile = sim::profile(name).map_err(from_flags)?;
            let mut node =
                SimBackend::new(profile, src.fault.clone(), src.seed).map_err(from_flags)?;
            node.set_busy(&src.busy).map_err(from_flags)?;
            node.set_nodes(src.nodes).map_err(from_flags)?;
            node.set_point_delay(Duration::from_millis(src.sim_point_delay_ms));
            if let Some(dir) = &src.sim_processes {
                node.hold_gpus(&sim::ProcessTable::new(dir, src.sim_pid_offset))?;
            }
            Ok(Box::new(node))
        }
    }
}

pub(super) fn reject_sim_flags(src: &Source) -> Result<()> {
    if src.profile.is_some()
        || !src.fault.is_empty()
        || !src.busy.is_empty()
        || src.sim_point_delay_ms > 0
        || src.sim_processes.is_some()
    {
        return Err(usage(
            "--profile, --fault, --busy and --sim-* apply to --backend sim only",
        ));
    }
    if src.nodes != 1 {
        return Err(usage(format!(
            "--nodes {} applies to --backend sim only: for a real multi-node sweep, start \
             microbench under a launcher, one process per GPU (see microbench --help)",
            src.nodes
        )));
    }
    Ok(())
}
