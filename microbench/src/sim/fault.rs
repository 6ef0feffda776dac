//! Faults the sim can inject, so that the tuner and agent meet broken hardware in tests.
//!
//! Written `kind:key=value,...` on the command line, e.g. `nvlink-degraded:gpu=3`,
//! `slow-gpu:gpu=5,factor=0.7`, `pcie-downtrained:gpu=2`, `nic-down:nic=1`,
//! `fabric-slow:factor=0.5`. `hang:after=N` and `panic:after=N` break the process itself
//! after N points, so the agent's handling of a calibration child that hangs or dies is
//! tested without a GPU (issue 10).

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::str::FromStr;

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Each NVLink bond of `gpu` keeps `1/divisor` of its links (default: half).
    NvlinkDegraded {
        /// The GPU.
        gpu: u32,
        /// Links are divided by this (2 = half of them down).
        divisor: u32,
    },
    /// `gpu` computes at `factor` of its speed (clocks throttled).
    SlowGpu {
        /// The GPU.
        gpu: u32,
        /// Fraction of normal speed, in (0, 1].
        factor: f64,
    },
    /// The PCIe link of `gpu` trained at `width` lanes (default: half of its maximum).
    PcieDowntrained {
        /// The GPU.
        gpu: u32,
        /// Trained width; `None` for half the maximum.
        width: Option<u32>,
    },
    /// NIC `nic` is down.
    NicDown {
        /// NIC position.
        nic: u32,
    },
    /// The scale-out fabric delivers `factor` of its healthy rate to every inter-node
    /// collective (an oversubscribed spine, a congested or mis-routed rail).
    FabricSlow {
        /// Fraction of the healthy rate, in (0, 1].
        factor: f64,
    },
    /// The point after the first `after` never returns, as a hung kernel or collective.
    Hang {
        /// Points measured before the hang.
        after: u32,
    },
    /// The point after the first `after` panics, as a library that lacks a symbol does.
    Panic {
        /// Points measured before the panic.
        after: u32,
    },
}

const KINDS: &str = "nvlink-degraded:gpu=N[,divisor=2], slow-gpu:gpu=N,factor=F, pcie-downtrained:gpu=N[,width=W], nic-down:nic=N, fabric-slow:factor=F, hang:after=N, panic:after=N";

fn bad(text: &str, expected: String) -> Error {
    Error::BadValue {
        field: "--fault",
        value: text.to_string(),
        expected,
    }
}

impl FromStr for Fault {
    type Err = Error;

    fn from_str(text: &str) -> Result<Fault> {
        let (kind, args) = text.split_once(':').unwrap_or((text, ""));
        let mut values: BTreeMap<&str, &str> = BTreeMap::new();
        for pair in args.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(text, format!("`{pair}` is not key=value")))?;
            values.insert(k.trim(), v.trim());
        }
        let allowed: &[&str] = match kind {
            "nvlink-degraded" => &["gpu", "divisor"],
            "slow-gpu" => &["gpu", "factor"],
            "pcie-downtrained" => &["gpu", "width"],
            "nic-down" => &["nic"],
            "fabric-slow" => &["factor"],
            "hang" | "panic" => &["after"],
            _ => {
                return Err(bad(
                    text,
                    format!("unknown fault `{kind}`; expected one of {KINDS}"),
                ))
            }
        };
        if let Some(k) = values.keys().find(|k| !allowed.contains(k)) {
            return Err(bad(
                text,
                format!("{kind} takes {}, not `{k}`", allowed.join(", ")),
            ));
        }
        let int = |key: &str| -> Result<Option<u32>> {
            values
                .get(key)
                .map(|v| {
                    v.parse::<u32>()
                        .map_err(|_| bad(text, format!("{key} `{v}` is not a whole number")))
                })
                .transpose()
        };
        let required =
            |key: &str| int(key)?.ok_or_else(|| bad(text, format!("{kind} needs {key}=N")));
        // One wording for every bounded whole number: the value, then the values it may take.
        let within = |key: &str, fits: fn(u32) -> bool, range: &str| -> Result<Option<u32>> {
            match int(key)? {
                Some(v) if !fits(v) => Err(bad(text, format!("{key} `{v}` must be {range}"))),
                v => Ok(v),
            }
        };
        let factor = || -> Result<f64> {
            let raw = values
                .get("factor")
                .ok_or_else(|| bad(text, format!("{kind} needs factor=F, 0 < F <= 1")))?;
            let factor: f64 = raw
                .parse()
                .map_err(|_| bad(text, format!("factor `{raw}` is not a number")))?;
            if !(factor > 0.0 && factor <= 1.0) {
                return Err(bad(text, format!("factor `{raw}` must be in (0, 1]")));
            }
            Ok(factor)
        };
        Ok(match kind {
            "nvlink-degraded" => {
                let divisor = within("divisor", |d| d >= 2, "2 or more")?.unwrap_or(2);
                Fault::NvlinkDegraded {
                    gpu: required("gpu")?,
                    divisor,
                }
            }
            "slow-gpu" => Fault::SlowGpu {
                gpu: required("gpu")?,
                factor: factor()?,
            },
            "pcie-downtrained" => {
                // A link trains at one of PCIe's widths; 0 lanes would be no link at all and
                // an infinite copy time.
                let width = within(
                    "width",
                    |w| [1, 2, 4, 8, 16].contains(&w),
                    "1, 2, 4, 8 or 16",
                )?;
                Fault::PcieDowntrained {
                    gpu: required("gpu")?,
                    width,
                }
            }
            "nic-down" => Fault::NicDown {
                nic: required("nic")?,
            },
            "hang" => Fault::Hang {
                after: int("after")?.unwrap_or(0),
            },
            "panic" => Fault::Panic {
                after: int("after")?.unwrap_or(0),
            },
            _ => Fault::FabricSlow { factor: factor()? },
        })
    }
}

/// The command-line spelling, which parses back to the same fault: how a rank hands its
/// faults to rank 0 in a multi-node sim job (issue 12).
impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Fault::NvlinkDegraded { gpu, divisor } => {
                write!(f, "nvlink-degraded:gpu={gpu},divisor={divisor}")
            }
            Fault::SlowGpu { gpu, factor } => write!(f, "slow-gpu:gpu={gpu},factor={factor}"),
            Fault::PcieDowntrained { gpu, width } => {
                write!(f, "pcie-downtrained:gpu={gpu}")?;
                width.map_or(Ok(()), |w| write!(f, ",width={w}"))
            }
            Fault::NicDown { nic } => write!(f, "nic-down:nic={nic}"),
            Fault::FabricSlow { factor } => write!(f, "fabric-slow:factor={factor}"),
            Fault::Hang { after } => write!(f, "hang:after={after}"),
            Fault::Panic { after } => write!(f, "panic:after={after}"),
        }
    }
}

impl Fault {
    /// Checks the fault's device against the node: `gpus` GPUs and `nics` NICs.
    pub fn check(&self, gpus: u32, nics: u32) -> Result<()> {
        let (field, index, count) = match *self {
            Fault::NvlinkDegraded { gpu, .. }
            | Fault::SlowGpu { gpu, .. }
            | Fault::PcieDowntrained { gpu, .. } => ("gpu", gpu, gpus),
            Fault::NicDown { nic } => ("nic", nic, nics),
            Fault::FabricSlow { .. } | Fault::Hang { .. } | Fault::Panic { .. } => return Ok(()),
        };
        if index >= count {
            return Err(Error::BadValue {
                field: "--fault",
                value: format!("{field}={index}"),
                expected: format!(
                    "the profile has {count} {field}s (0-{})",
                    count.saturating_sub(1)
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_from_the_issue_examples() {
        assert_eq!(
            "nvlink-degraded:gpu=3".parse::<Fault>().unwrap(),
            Fault::NvlinkDegraded { gpu: 3, divisor: 2 }
        );
        assert_eq!(
            "slow-gpu:gpu=5,factor=0.7".parse::<Fault>().unwrap(),
            Fault::SlowGpu {
                gpu: 5,
                factor: 0.7
            }
        );
        assert_eq!(
            "pcie-downtrained:gpu=2".parse::<Fault>().unwrap(),
            Fault::PcieDowntrained {
                gpu: 2,
                width: None
            }
        );
        assert_eq!(
            "nic-down:nic=1".parse::<Fault>().unwrap(),
            Fault::NicDown { nic: 1 }
        );
        assert_eq!(
            "fabric-slow:factor=0.5".parse::<Fault>().unwrap(),
            Fault::FabricSlow { factor: 0.5 }
        );
        assert_eq!(
            "hang:after=3".parse::<Fault>().unwrap(),
            Fault::Hang { after: 3 }
        );
        assert_eq!("panic".parse::<Fault>().unwrap(), Fault::Panic { after: 0 });
    }

    #[test]
    fn faults_print_as_they_parse() {
        for text in [
            "nvlink-degraded:gpu=3,divisor=2",
            "slow-gpu:gpu=5,factor=0.7",
            "pcie-downtrained:gpu=2",
            "pcie-downtrained:gpu=2,width=4",
            "nic-down:nic=1",
            "fabric-slow:factor=0.5",
            "hang:after=2",
            "panic:after=0",
        ] {
            let fault: Fault = text.parse().unwrap();
            assert_eq!(fault.to_string(), text);
        }
    }

    #[test]
    fn bad_faults_say_what_is_allowed() {
        let msg = |t: &str| t.parse::<Fault>().unwrap_err().to_string();
        assert!(msg("gpu-on-fire:gpu=1").starts_with("--fault `gpu-on-fire:gpu=1`: unknown fault `gpu-on-fire`; expected one of nvlink-degraded"));
        assert_eq!(
            msg("slow-gpu:gpu=5,factor=1.5"),
            "--fault `slow-gpu:gpu=5,factor=1.5`: factor `1.5` must be in (0, 1]"
        );
        assert_eq!(
            msg("slow-gpu:gpu=5"),
            "--fault `slow-gpu:gpu=5`: slow-gpu needs factor=F, 0 < F <= 1"
        );
        assert_eq!(
            msg("fabric-slow:factor=0"),
            "--fault `fabric-slow:factor=0`: factor `0` must be in (0, 1]"
        );
        assert_eq!(
            msg("fabric-slow"),
            "--fault `fabric-slow`: fabric-slow needs factor=F, 0 < F <= 1"
        );
        assert_eq!(
            msg("nic-down:gpu=1"),
            "--fault `nic-down:gpu=1`: nic-down takes nic, not `gpu`"
        );
        assert_eq!(
            msg("pcie-downtrained:gpu=2,width=0"),
            "--fault `pcie-downtrained:gpu=2,width=0`: width `0` must be 1, 2, 4, 8 or 16"
        );
        assert_eq!(
            msg("nvlink-degraded:gpu=x"),
            "--fault `nvlink-degraded:gpu=x`: gpu `x` is not a whole number"
        );
        let range = Fault::NvlinkDegraded { gpu: 9, divisor: 2 }
            .check(8, 8)
            .unwrap_err()
            .to_string();
        assert_eq!(range, "--fault `gpu=9`: the profile has 8 gpus (0-7)");
    }
}
