//! Pinned knobs written as one string, `tp=8,pp=8,dp=8,mb=1,v=1,zero=1,recompute=full,sp=true`,
//! as `compare --a` and `--b` take them.

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;

use crate::mesh::Recompute;
use crate::search::{Constraints, COUNTS};

/// A part of a mesh spec that does not read: the key it sits under (none where the part is
/// not `key=value`, or the key is unknown), the value, and what is allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// The key whose value does not read.
    pub key: Option<String>,
    /// What was written.
    pub value: String,
    /// What is allowed there.
    pub allowed: &'static str,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{key} = {}: expected {}", self.value, self.allowed),
            None => write!(f, "{}: expected {}", self.value, self.allowed),
        }
    }
}

impl std::error::Error for SpecError {}

impl FromStr for Constraints {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Constraints, SpecError> {
        let mut c = Constraints::default();
        let mut seen = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = |key: Option<&str>, value: &str, allowed| SpecError {
                key: key.map(str::to_string),
                value: value.to_string(),
                allowed,
            };
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(None, part, "key=value pairs such as tp=8"))?;
            // `tp=8,tp=4` kept the last silently (issue 31): a knob is named once, by any of
            // its keys.
            let knob = COUNTS
                .iter()
                .find(|n| n.keys.contains(&k))
                .map_or(if k == "sequence_parallel" { "sp" } else { k }, |n| n.flag);
            if seen.contains(&knob) {
                return Err(bad(
                    Some(k),
                    v,
                    "each knob once; it is already pinned in this spec",
                ));
            }
            seen.push(knob);
            let num = || {
                v.parse::<u32>()
                    .map_err(|_| bad(Some(k), v, "a positive integer"))
            };
            if let Some(count) = COUNTS.iter().find(|n| n.keys.contains(&k)) {
                *(count.field)(&mut c) = Some(num()?);
                continue;
            }
            match k {
                "zero" => {
                    let zero = v.parse::<u8>().ok().filter(|z| *z <= 3);
                    c.zero_stage = Some(zero.ok_or_else(|| bad(Some("zero"), v, "0, 1, 2 or 3"))?)
                }
                "recompute" => {
                    let r = Recompute::from_str(v, true);
                    c.recompute =
                        Some(r.map_err(|_| bad(Some("recompute"), v, "none, selective or full"))?)
                }
                "sp" | "sequence_parallel" => {
                    let sp = v.parse::<bool>();
                    c.sequence_parallel = Some(sp.map_err(|_| bad(Some("sp"), v, "true or false"))?)
                }
                _ => {
                    return Err(bad(
                        None,
                        k,
                        "keys tp, pp, dp, cp, ep, mb, m, v, zero, recompute, sp",
                    ))
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_specs() {
        let c: Constraints = "tp=8,pp=4,dp=16,mb=2,zero=1,recompute=full,sp=true"
            .parse()
            .unwrap();
        assert_eq!(
            (c.tp, c.pp, c.dp, c.microbatch_size, c.zero_stage),
            (Some(8), Some(4), Some(16), Some(2), Some(1))
        );
        assert_eq!(
            (c.recompute, c.sequence_parallel),
            (Some(Recompute::Full), Some(true))
        );
        let err = "tp=8,zero=5".parse::<Constraints>().unwrap_err();
        assert_eq!(
            (err.key.as_deref(), err.value.as_str()),
            (Some("zero"), "5")
        );
        let err = "tp=8,q=5".parse::<Constraints>().unwrap_err();
        assert_eq!((err.key.as_deref(), err.value.as_str()), (None, "q"));
        assert!("tp".parse::<Constraints>().is_err());
    }

    /// Issue 31: `compare --a tp=8,tp=4` kept the last silently.
    #[test]
    fn r31_a_knob_named_twice_is_refused() {
        for spec in [
            "tp=8,tp=4",
            "mb=1,microbatch_size=2",
            "sp=true,sequence_parallel=false",
        ] {
            let err = spec.parse::<Constraints>().unwrap_err();
            assert!(err.to_string().contains("each knob once"), "{spec}: {err}");
        }
        assert!("tp=8,pp=4".parse::<Constraints>().is_ok());
    }
}
