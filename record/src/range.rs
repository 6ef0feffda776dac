//! Physical ranges of what a record states (issue 31, item 10): a value outside them is a
//! broken writer, a unit slip or a hand edit, never hardware, and once fitted it moves every
//! curve (a `time_s` of 1e-300 made NaN curves; m = n = k = 2^63 a step of 65.1 +-1294.9 s).
//! Every reader (JSON lines, snapshots, Prometheus, nccl-tests logs, CSV tables) refuses it
//! through [`Record::validate`].
//!
//! [`Record::validate`]: crate::Record::validate

/// Shortest time a record may state, in seconds: 100 ns, below any kernel launch (about 2 us)
/// or NCCL call on any GPU, so only a unit slip reaches it.
pub const MIN_TIME_S: f64 = 1e-7;

/// Longest time a record may state, in seconds: 10^4 s (2.8 h); one timed call of any sweep
/// (8 GiB over a 1 Gbit/s link takes 69 s) ends long before.
pub const MAX_TIME_S: f64 = 1e4;

/// Most ranks a record may state: 2^20, well above the largest jobs run (about 10^5 GPUs).
pub const MAX_RANKS: u32 = 1 << 20;

/// Largest GEMM or attention dimension a record may state: 2^24 (16 Mi); a bf16 operand of
/// 2^24 x 2^24 would take 512 TiB, more than any node holds.
pub const MAX_DIM: u64 = 1 << 24;

/// Earliest timestamp a record may carry, seconds since the Unix epoch: 2000-01-01T00:00:00Z,
/// before any GPU meshfit measures was built.
pub const EARLIEST_TIMESTAMP_S: f64 = 946_684_800.0;

/// How far past the reader's clock a timestamp may lie, in seconds: one day, for clocks set
/// to the wrong time zone or drifting; a later one would count as fresh under `--max-age`
/// forever.
pub const CLOCK_SKEW_S: f64 = 86_400.0;
