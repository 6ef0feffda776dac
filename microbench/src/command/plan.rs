//! The points a single-node command measures: a collective sweep over its GPU groups, GEMM
//! shapes, copy paths, or the whole calibration, from the flags and the node's topology.

use crate::cli::{Command, SweepArgs};
use crate::exit::{from_flags, usage};
use anyhow::{bail, Result};
use microbench::discovery::Topology;
use microbench::plan::Plan;
use microbench::sweep::{self, Calibration, Sweep};

pub(super) fn sweep_of(args: &SweepArgs) -> Sweep {
    Sweep {
        min_bytes: args.min_bytes,
        max_bytes: args.max_bytes,
        factor: args.factor,
        increment: args.increment,
    }
}

fn check_group(size: usize, found: usize, what: &str) -> Result<()> {
    if size == 0 {
        return Err(usage(format!("-g 0: expected 1 to {found} GPUs")));
    }
    if size > found {
        return Err(microbench::Error::TooFewGpus {
            what: format!("{what} -g {size}"),
            needed: size,
            found,
        }
        .into());
    }
    Ok(())
}

fn all_gpus(t: &Topology, chosen: &[u32]) -> Vec<u32> {
    if chosen.is_empty() {
        (0..t.gpus.len() as u32).collect()
    } else {
        chosen.to_vec()
    }
}

pub(super) fn plan(command: &Command, t: &Topology) -> Result<Plan> {
    let n = t.gpus.len();
    if let Some((kind, args)) = command.collective() {
        let sizes = if args.all_groups {
            sweep::group_sizes(n)
        } else {
            vec![args.gpus.unwrap_or(n)]
        };
        for &size in &sizes {
            check_group(size, n, kind.as_str())?;
        }
        let groups: Vec<Vec<u32>> = sizes.iter().flat_map(|&s| sweep::groups(t, s)).collect();
        return Plan::collectives(
            kind,
            &groups,
            &sweep_of(&args.sweep),
            args.dtype,
            args.sweep.iters,
            args.sweep.warmup,
        )
        .map_err(from_flags);
    }
    Ok(match command {
        Command::Gemm(args) => {
            let shapes = if args.shapes.is_empty() {
                sweep::default_gemm_shapes()
            } else {
                args.shapes.clone()
            };
            Plan::gemms(
                &all_gpus(t, &args.gpus),
                &shapes,
                &args.dtypes,
                &args.layouts,
                args.iters,
                args.warmup,
            )
        }
        Command::Copy(args) => Plan::copies(
            &sweep::copy_paths(&args.paths, &all_gpus(t, &args.gpus)),
            &sweep_of(&args.sweep),
            args.sweep.iters,
            args.sweep.warmup,
        )
        .map_err(from_flags)?,
        Command::Calibrate(args) => {
            let calibration = Calibration {
                sweep: sweep_of(&args.sweep),
                collective_dtype: args.dtype,
                gemm_dtypes: args.gemm_dtypes.clone(),
                iters: args.sweep.iters,
                warmup: args.sweep.warmup,
            };
            let (plan, lacking) = calibration.plan(t).map_err(from_flags)?;
            for d in lacking {
                eprintln!("microbench: calibrate: no {d} tensor cores on these GPUs; {d} GEMMs not measured");
            }
            plan
        }
        // Collectives returned above; topo and import do not measure.
        _ => bail!("not a measurement command"),
    })
}
