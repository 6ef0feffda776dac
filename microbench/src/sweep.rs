//! What to measure: message sizes as nccl-tests sweeps them, the GPU groups a TP or EP group
//! can form, GEMM shapes, and the [`Plan`] that lists every point.

use crate::discovery::Topology;
use crate::error::{Error, Result};
use crate::plan::{gemm_layouts, l2_bytes_at_most, CopyPath, Plan, Point};
use record::{Dtype, Gemm, GemmLayout, Kind};

/// Sizes from `min_bytes` to `max_bytes`, multiplied by `factor` (`-f`) or, when `factor` is
/// 1, increased by `increment` (`-i`), as nccl-tests steps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// Smallest size (`-b`).
    pub min_bytes: u64,
    /// Largest size (`-e`).
    pub max_bytes: u64,
    /// Multiplier between sizes (`-f`); 1 to step by `increment`.
    pub factor: u64,
    /// Increment between sizes when `factor` is 1 (`-i`).
    pub increment: u64,
}

impl Sweep {
    /// nccl-tests' defaults for a calibration sweep: `-b 8 -e 8G -f 2`.
    pub const DEFAULT: Sweep = Sweep {
        min_bytes: 8,
        max_bytes: 8 << 30,
        factor: 2,
        increment: 0,
    };

    /// The sizes, each rounded down to whole elements on every rank (as nccl-tests does);
    /// sizes that round to zero are dropped.
    pub fn sizes(&self, dtype: Dtype, kind: Kind, ranks: usize) -> Result<Vec<u64>> {
        if self.min_bytes == 0 || self.min_bytes > self.max_bytes {
            return Err(Error::BadValue {
                field: "-b/-e",
                value: format!("{}..{}", self.min_bytes, self.max_bytes),
                expected: "0 < minBytes <= maxBytes".into(),
            });
        }
        if self.factor == 0 || (self.factor == 1 && self.increment == 0) {
            return Err(Error::BadValue {
                field: "-f/-i",
                value: format!("{}/{}", self.factor, self.increment),
                expected: "a factor of 2 or more, or factor 1 with an increment of at least 1"
                    .into(),
            });
        }
        let per_rank = matches!(kind, Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll);
        let unit = dtype.size_bytes() * if per_rank { ranks.max(1) as u64 } else { 1 };
        let mut sizes = Vec::new();
        let mut size = self.min_bytes;
        while size <= self.max_bytes {
            let rounded = size / unit * unit;
            if rounded > 0 && sizes.last() != Some(&rounded) {
                sizes.push(rounded);
            }
            size = if self.factor > 1 {
                size.saturating_mul(self.factor)
            } else {
                size + self.increment
            };
            if size == u64::MAX {
                break;
            }
        }
        Ok(sizes)
    }
}

/// Reads an nccl-tests size: a number with an optional K, M or G, powers of 1024 as
/// nccl-tests reads them (parse-size's binary system, so `KiB`, `MB` and `1.5G` read too).
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(text.trim())
        .map_err(|_| {
            format!("size `{text}`: expected bytes with an optional K, M or G (powers of 1024), like 8, 256K or 8G")
        })
}

/// Group sizes a TP or EP group can take on `gpus` GPUs: 2, 4, 8, ... and all of them.
pub fn group_sizes(gpus: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = std::iter::successors(Some(2usize), |s| Some(s * 2))
        .take_while(|&s| s <= gpus)
        .collect();
    if gpus >= 2 && sizes.last() != Some(&gpus) {
        sizes.push(gpus);
    }
    if gpus == 1 {
        sizes.push(1);
    }
    sizes
}

/// The groups of `size` GPUs the tuner's rank order forms (TP innermost: consecutive
/// indices). Where all of them see the same links, as behind an NVSwitch, one stands for all;
/// on a hybrid cube-mesh each group is measured, since their links differ.
pub fn groups(topology: &Topology, size: usize) -> Vec<Vec<u32>> {
    let all: Vec<u32> = (0..topology.gpus.len() as u32).collect();
    let chunks: Vec<Vec<u32>> = all
        .chunks(size.max(1))
        .filter(|c| c.len() == size)
        .map(<[u32]>::to_vec)
        .collect();
    let signature = |g: &Vec<u32>| {
        let mut links: Vec<_> = g
            .iter()
            .flat_map(|&a| g.iter().map(move |&b| (a, b)))
            .map(|(a, b)| topology.link(a, b))
            .collect();
        links.sort();
        links
    };
    match chunks.first() {
        Some(first) if chunks.iter().all(|c| signature(c) == signature(first)) => {
            vec![first.clone()]
        }
        _ => chunks,
    }
}

/// Square GEMMs from 256 to 16384, doubling.
pub fn square_shapes() -> Vec<Gemm> {
    std::iter::successors(Some(256u64), |s| Some(s * 2))
        .take_while(|&s| s <= 16384)
        .map(|s| Gemm { m: s, n: s, k: s })
        .collect()
}

/// The four GEMMs of a transformer layer after a tensor-parallel split by `tp`, for `tokens`
/// tokens of width `hidden` and an MLP of 4 x hidden (Megatron-LM's column then row split):
/// QKV (k = h, n = 3h/tp), attention out (k = h/tp, n = h), MLP up (k = h, n = 4h/tp),
/// MLP down (k = 4h/tp, n = h); m is the token count throughout.
pub fn transformer_shapes(tokens: u64, hidden: u64, tp: u64) -> Vec<Gemm> {
    let (t, h) = (tokens, hidden);
    vec![
        Gemm {
            m: t,
            n: 3 * h / tp,
            k: h,
        },
        Gemm {
            m: t,
            n: h,
            k: h / tp,
        },
        Gemm {
            m: t,
            n: 4 * h / tp,
            k: h,
        },
        Gemm {
            m: t,
            n: h,
            k: 4 * h / tp,
        },
    ]
}

/// Squares plus the layer shapes of hidden 4096 and 8192 for 8192 tokens at TP 1, 2, 4, 8.
pub fn default_gemm_shapes() -> Vec<Gemm> {
    let mut shapes = square_shapes();
    for hidden in [4096, 8192] {
        for tp in [1, 2, 4, 8] {
            shapes.extend(transformer_shapes(8192, hidden, tp));
        }
    }
    let mut seen = Vec::with_capacity(shapes.len());
    shapes.retain(|s| {
        let new = !seen.contains(s);
        seen.push(*s);
        new
    });
    shapes
}

/// The shapes a calibration also times in the backward layouts (`nn`, `nt`; see
/// [`gemm_layouts`]): the 8192^3 square and the MLP up-projection of a hidden-8192 layer at
/// TP 8 (8192 x 4096 x 8192), one square and one not. Two shapes, so the calibration adds
/// two points per shape, type and GPU, not three times its GEMMs.
pub fn layout_shapes() -> Vec<Gemm> {
    let mlp_up = transformer_shapes(8192, 8192, 8)[2];
    vec![
        Gemm {
            m: 8192,
            n: 8192,
            k: 8192,
        },
        mlp_up,
    ]
}

impl Plan {
    /// A collective over each group of each size, each size of the sweep.
    pub fn collectives(
        kind: Kind,
        groups: &[Vec<u32>],
        sweep: &Sweep,
        dtype: Dtype,
        iters: u32,
        warmup: u32,
    ) -> Result<Plan> {
        let mut points = Vec::new();
        for group in groups {
            for bytes in sweep.sizes(dtype, kind, group.len())? {
                points.push(Point::Collective {
                    kind,
                    gpus: group.clone(),
                    bytes,
                    dtype,
                });
            }
        }
        Ok(Plan {
            points,
            iters,
            warmup,
        })
    }

    /// Every shape in every dtype and layout on every listed GPU, a shape's layouts in a row.
    /// A layout a dtype has no kernel for is kept, and fails as its point (see
    /// [`gemm_layouts`]): asked for, it is reported, not dropped.
    pub fn gemms(
        gpus: &[u32],
        shapes: &[Gemm],
        dtypes: &[Dtype],
        layouts: &[GemmLayout],
        iters: u32,
        warmup: u32,
    ) -> Plan {
        let mut points = Vec::new();
        for &gpu in gpus {
            for &dtype in dtypes {
                for &shape in shapes {
                    points.extend(layouts.iter().map(|&layout| Point::Gemm {
                        gpu,
                        shape,
                        dtype,
                        layout,
                    }));
                }
            }
        }
        Plan {
            points,
            iters,
            warmup,
        }
    }

    /// Copies along each path at each size of the sweep.
    pub fn copies(paths: &[CopyPath], sweep: &Sweep, iters: u32, warmup: u32) -> Result<Plan> {
        let mut points = Vec::new();
        for &path in paths {
            for bytes in sweep.sizes(Dtype::Uint8, path.kind(), 1)? {
                points.push(Point::Copy { path, bytes });
            }
        }
        Ok(Plan {
            points,
            iters,
            warmup,
        })
    }

    /// The points of `other` after these.
    pub fn extend(&mut self, other: Plan) {
        self.points.extend(other.points);
    }
}

/// The p2p bandwidth matrix over `gpus`: every ordered pair one way, or every unordered pair
/// both ways at once.
pub fn p2p_paths(gpus: &[u32], bidirectional: bool) -> Vec<CopyPath> {
    gpus.iter()
        .flat_map(|&src| gpus.iter().map(move |&dst| (src, dst)))
        .filter(|(s, d)| if bidirectional { s < d } else { s != d })
        .map(|(src, dst)| CopyPath::P2p {
            src,
            dst,
            bidirectional,
        })
        .collect()
}

/// Kinds of copy, as `--path` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// Every GPU to every other, one way (`p2p`).
    P2p,
    /// Every pair, both ways at once (`p2p-bidir`).
    P2pBidir,
    /// Pinned host to device (`h2d`).
    H2d,
    /// Device to pinned host (`d2h`).
    D2h,
    /// Within device memory (`hbm`).
    Hbm,
}

impl CopyKind {
    /// Every kind, with its name.
    pub const ALL: [(CopyKind, &'static str); 5] = [
        (CopyKind::P2p, "p2p"),
        (CopyKind::P2pBidir, "p2p-bidir"),
        (CopyKind::H2d, "h2d"),
        (CopyKind::D2h, "d2h"),
        (CopyKind::Hbm, "hbm"),
    ];
}

impl std::str::FromStr for CopyKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<CopyKind> {
        CopyKind::ALL
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(k, _)| *k)
            .ok_or_else(|| Error::BadValue {
                field: "--path",
                value: s.to_string(),
                expected: format!("one of {}", CopyKind::ALL.map(|(_, n)| n).join(", ")),
            })
    }
}

/// The copy paths of `kinds` among `gpus`.
pub fn copy_paths(kinds: &[CopyKind], gpus: &[u32]) -> Vec<CopyPath> {
    kinds
        .iter()
        .flat_map(|k| match k {
            CopyKind::P2p => p2p_paths(gpus, false),
            CopyKind::P2pBidir => p2p_paths(gpus, true),
            CopyKind::H2d => gpus.iter().map(|&gpu| CopyPath::H2d { gpu }).collect(),
            CopyKind::D2h => gpus.iter().map(|&gpu| CopyPath::D2h { gpu }).collect(),
            CopyKind::Hbm => gpus.iter().map(|&gpu| CopyPath::Hbm { gpu }).collect(),
        })
        .collect()
}

/// An HBM copy must be this many times the L2 cache to measure HBM: smaller ones run
/// partly or wholly out of L2 and read high (issue 10).
const PAST_L2: u64 = 8;

/// The smallest HBM copy worth a point on `topology`: [`PAST_L2`] times the largest L2 among
/// its GPUs, or 1 GiB (8 x 128 MiB, above every L2 known) where a GPU's L2 is not known.
pub fn hbm_min_bytes(topology: &Topology) -> u64 {
    topology
        .gpus
        .iter()
        .map(|g| l2_bytes_at_most(g.compute_capability).map_or(1 << 30, |l2| PAST_L2 * l2))
        .max()
        .unwrap_or(0)
}

/// What a calibration run covers: every collective over every TP/EP group size, GEMMs of the
/// default shapes on every GPU in the forward layout (`tn`) and of [`layout_shapes`] also in
/// the backward layouts the type has, and every copy path, all at the same sweep, HBM copies only
/// from [`hbm_min_bytes`] up.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Sizes of the collective and copy sweeps.
    pub sweep: Sweep,
    /// Element type of the collectives.
    pub collective_dtype: Dtype,
    /// GEMM operand types wanted; those the GPUs lack tensor cores for are left out.
    pub gemm_dtypes: Vec<Dtype>,
    /// Timed iterations per point.
    pub iters: u32,
    /// Untimed iterations per point.
    pub warmup: u32,
}

impl Calibration {
    /// The plan for `topology`, and the GEMM types left out because its GPUs lack them.
    pub fn plan(&self, topology: &Topology) -> Result<(Plan, Vec<Dtype>)> {
        let (iters, warmup) = (self.iters, self.warmup);
        let all: Vec<u32> = (0..topology.gpus.len() as u32).collect();
        let groups: Vec<Vec<u32>> = group_sizes(all.len())
            .iter()
            .flat_map(|&s| groups(topology, s))
            .collect();
        let mut plan = Plan {
            points: Vec::new(),
            iters,
            warmup,
        };
        for kind in Kind::COLLECTIVES {
            plan.extend(Plan::collectives(
                kind,
                &groups,
                &self.sweep,
                self.collective_dtype,
                iters,
                warmup,
            )?);
        }
        let (dtypes, lacking): (Vec<Dtype>, Vec<Dtype>) =
            self.gemm_dtypes.iter().partition(|&&d| {
                d.tensor_core_capability()
                    .is_some_and(|min| topology.gpus.iter().all(|g| g.compute_capability >= min))
            });
        plan.extend(Plan::gemms(
            &all,
            &default_gemm_shapes(),
            &dtypes,
            &[GemmLayout::Tn],
            iters,
            warmup,
        ));
        for &dtype in &dtypes {
            let backward: Vec<GemmLayout> = gemm_layouts(dtype)
                .iter()
                .copied()
                .filter(|&l| l != GemmLayout::Tn)
                .collect();
            plan.extend(Plan::gemms(
                &all,
                &layout_shapes(),
                &[dtype],
                &backward,
                iters,
                warmup,
            ));
        }
        let kinds = CopyKind::ALL.map(|(k, _)| k);
        let mut copies = Plan::copies(&copy_paths(&kinds, &all), &self.sweep, iters, warmup)?;
        let hbm_min = hbm_min_bytes(topology);
        copies.points.retain(
            |p| !matches!(p, Point::Copy { path: CopyPath::Hbm { .. }, bytes } if *bytes < hbm_min),
        );
        plan.extend(copies);
        Ok((plan, lacking))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_step_like_nccl_tests() {
        let s = Sweep {
            min_bytes: 8,
            max_bytes: 64,
            factor: 2,
            increment: 0,
        };
        assert_eq!(
            s.sizes(Dtype::Fp32, Kind::AllReduce, 8).unwrap(),
            vec![8, 16, 32, 64]
        );
        // all-gather needs whole elements on each of 8 ranks: 32 bytes is the smallest.
        assert_eq!(
            s.sizes(Dtype::Fp32, Kind::AllGather, 8).unwrap(),
            vec![32, 64]
        );
        let linear = Sweep {
            min_bytes: 100,
            max_bytes: 300,
            factor: 1,
            increment: 100,
        };
        assert_eq!(
            linear.sizes(Dtype::Uint8, Kind::H2d, 1).unwrap(),
            vec![100, 200, 300]
        );
        assert_eq!(
            Sweep::DEFAULT
                .sizes(Dtype::Fp32, Kind::AllReduce, 8)
                .unwrap()
                .len(),
            31
        );
    }

    #[test]
    fn bad_sweeps_name_the_flags() {
        let err = Sweep {
            min_bytes: 64,
            max_bytes: 8,
            factor: 2,
            increment: 0,
        }
        .sizes(Dtype::Fp32, Kind::AllReduce, 2)
        .unwrap_err();
        assert_eq!(err.to_string(), "-b/-e `64..8`: 0 < minBytes <= maxBytes");
        assert!(Sweep {
            factor: 1,
            ..Sweep::DEFAULT
        }
        .sizes(Dtype::Fp32, Kind::AllReduce, 2)
        .is_err());
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("256K"), Ok(256 << 10));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("8g"), Ok(8 << 30));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        for bad in ["8X", "", "-8", "K"] {
            let err = parse_size(bad).unwrap_err();
            assert!(
                err.starts_with(&format!("size `{bad}`: expected bytes")),
                "{err}"
            );
        }
    }

    #[test]
    fn group_sizes_cover_tp_and_ep() {
        assert_eq!(group_sizes(8), vec![2, 4, 8]);
        assert_eq!(group_sizes(6), vec![2, 4, 6]);
        assert_eq!(group_sizes(1), vec![1]);
    }

    /// Megatron-LM's split of a GPT-3 175B layer (h = 12288) over TP 8: QKV is 12288 x 4608.
    #[test]
    fn transformer_shapes_split_by_tp() {
        let s = transformer_shapes(2048, 12288, 8);
        assert_eq!(
            s[0],
            Gemm {
                m: 2048,
                n: 4608,
                k: 12288
            }
        );
        assert_eq!(
            s[3],
            Gemm {
                m: 2048,
                n: 12288,
                k: 6144
            }
        );
        assert_eq!(square_shapes().len(), 7);
    }

    /// Issue 10: the main bf16 shape in all three training layouts, fp8 in `tn` only, the
    /// other shapes forward only; on an H100 (which has fp8) with one GPU's worth of points.
    #[test]
    fn calibration_times_the_main_shapes_in_the_training_layouts() {
        use crate::kernels::Backend;
        let h100 = crate::SimBackend::new(crate::sim::profile("dgx-h100").unwrap(), vec![], 1)
            .unwrap()
            .topology()
            .unwrap();
        let calibration = Calibration {
            sweep: Sweep {
                min_bytes: 1 << 20,
                max_bytes: 1 << 20,
                factor: 2,
                increment: 0,
            },
            collective_dtype: Dtype::Bf16,
            gemm_dtypes: vec![Dtype::Bf16, Dtype::Fp8E4m3],
            iters: 2,
            warmup: 0,
        };
        let (plan, lacking) = calibration.plan(&h100).unwrap();
        assert!(lacking.is_empty());
        let layouts = |want: Dtype, want_shape: Gemm| -> Vec<GemmLayout> {
            plan.points
                .iter()
                .filter_map(|p| match *p {
                    Point::Gemm {
                        gpu: 0,
                        shape,
                        dtype,
                        layout,
                    } if dtype == want && shape == want_shape => Some(layout),
                    _ => None,
                })
                .collect()
        };
        let main = Gemm {
            m: 8192,
            n: 8192,
            k: 8192,
        };
        let all = vec![GemmLayout::Tn, GemmLayout::Nn, GemmLayout::Nt];
        assert_eq!(layouts(Dtype::Bf16, main), all);
        assert_eq!(
            layout_shapes()[1],
            Gemm {
                m: 8192,
                n: 4096,
                k: 8192
            }
        );
        assert_eq!(layouts(Dtype::Bf16, layout_shapes()[1]), all);
        assert_eq!(layouts(Dtype::Fp8E4m3, main), vec![GemmLayout::Tn]);
        let square_1024 = Gemm {
            m: 1024,
            n: 1024,
            k: 1024,
        };
        assert_eq!(layouts(Dtype::Bf16, square_1024), vec![GemmLayout::Tn]);
        // Bounded: the backward layouts add 2 shapes x 2 layouts for bf16 only, per GPU.
        let gemms_on_0 = plan
            .points
            .iter()
            .filter(|p| matches!(p, Point::Gemm { gpu: 0, .. }))
            .count();
        assert_eq!(gemms_on_0, 2 * default_gemm_shapes().len() + 4);
    }

    #[test]
    fn gemm_plans_keep_every_layout_asked_for() {
        let shape = Gemm {
            m: 64,
            n: 32,
            k: 16,
        };
        let plan = Plan::gemms(
            &[0, 1],
            &[shape],
            &[Dtype::Fp8E4m3],
            &[GemmLayout::Tn, GemmLayout::Nt],
            5,
            1,
        );
        assert_eq!(plan.points.len(), 4);
        assert_eq!(
            plan.points[1].to_string(),
            "gemm fp8_e4m3 nt 64x32x16 on GPU 0"
        );
    }

    #[test]
    fn p2p_matrix_pairs() {
        assert_eq!(p2p_paths(&[0, 1, 2], false).len(), 6);
        assert_eq!(p2p_paths(&[0, 1, 2], true).len(), 3);
    }
}
