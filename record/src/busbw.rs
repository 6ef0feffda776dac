//! Bus bandwidth factors: busbw = algbw x factor, as nccl-tests defines them.
//!
//! The factor turns the algorithm bandwidth (per-rank buffer over time) into the bandwidth each
//! link must carry, so that numbers from different rank counts compare against the hardware's
//! link rate. Source: nccl-tests doc/PERFORMANCE.md, and the `*GetBw` functions in its
//! src/*.cu files.

use crate::Kind;

/// The busbw/algbw factor for `kind` over `ranks` ranks; `None` for GEMM and attention, which
/// have no bus.
///
/// - all-reduce: 2(n-1)/n (each rank sends and receives (n-1)/n of the buffer twice);
/// - all-gather, reduce-scatter, all-to-all: (n-1)/n;
/// - send/recv, host-to-device, device-to-host: 1;
/// - peer-to-peer copy: the number of GPUs sending (1 one way, 2 both ways), because `ranks`
///   counts senders for p2p copies and each moves the whole buffer;
/// - copy within HBM: 2, counting the read and the write, as memory bandwidth figures do.
pub fn busbw_factor(kind: Kind, ranks: u32) -> Option<f64> {
    let n = f64::from(ranks);
    match kind {
        Kind::Gemm | Kind::Attention => None,
        Kind::AllReduce => Some(2.0 * (n - 1.0) / n),
        Kind::AllGather | Kind::ReduceScatter | Kind::AllToAll => Some((n - 1.0) / n),
        Kind::SendRecv | Kind::H2d | Kind::D2h => Some(1.0),
        Kind::P2pCopy => Some(n),
        Kind::HbmCopy => Some(2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factor(kind: Kind, ranks: u32) -> f64 {
        busbw_factor(kind, ranks).unwrap()
    }

    /// Worked numbers from nccl-tests doc/PERFORMANCE.md: all-reduce on 8 ranks moves
    /// 2*7/8 = 1.75 of the buffer per rank; all-gather 7/8.
    #[test]
    fn every_kind_has_its_nccl_tests_factor() {
        assert_eq!(factor(Kind::AllReduce, 8), 1.75);
        assert_eq!(factor(Kind::AllReduce, 2), 1.0);
        assert_eq!(factor(Kind::AllReduce, 1), 0.0);
        assert_eq!(factor(Kind::AllGather, 8), 0.875);
        assert_eq!(factor(Kind::ReduceScatter, 4), 0.75);
        assert_eq!(factor(Kind::AllToAll, 2), 0.5);
        assert_eq!(factor(Kind::SendRecv, 8), 1.0);
        assert_eq!(factor(Kind::H2d, 1), 1.0);
        assert_eq!(factor(Kind::D2h, 1), 1.0);
        assert_eq!(factor(Kind::P2pCopy, 1), 1.0);
        assert_eq!(factor(Kind::P2pCopy, 2), 2.0);
        assert_eq!(factor(Kind::HbmCopy, 1), 2.0);
        assert_eq!(busbw_factor(Kind::Gemm, 1), None);
    }

    #[test]
    fn every_kind_is_covered() {
        for kind in Kind::ALL {
            assert_eq!(
                busbw_factor(*kind, 4).is_none(),
                matches!(kind, Kind::Gemm | Kind::Attention),
                "{kind}"
            );
        }
    }
}
