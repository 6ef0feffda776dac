//! The measurement record shared by meshfit's parts, and nccl-tests text in and out.
//!
//! - [`Record`] is one timed point (a collective at one size, a GEMM shape, a copy), serialised
//!   as one JSON line. Its fields follow `docs/design.md`: base units (bytes, seconds, bytes
//!   per second, FLOP per second) and the nccl-tests bus bandwidth convention.
//! - [`busbw_factor`] gives the nccl-tests factor from algorithm to bus bandwidth per [`Kind`].
//! - [`read_json_lines`] reads `microbench --json` output back, refusing records that cannot
//!   be measurements ([`Record::validate`], within the physical ranges of [`range`]).
//! - [`read_bounded`] reads a file of at most [`MAX_LOG_BYTES`] or [`MAX_JSON_LINES_BYTES`],
//!   so an endless or runaway input is refused by size before it is parsed;
//!   [`read_bounded_bytes`], [`read_bounded_from`] (a file opened by the caller) and
//!   [`into_text`] are its parts, for readers with limits and opening rules of their own.
//! - [`nccl_tests::parse`] reads real nccl-tests logs into records, and [`nccl_tests::write`]
//!   prints records in the nccl-tests column layout.
//! - [`tables::parse`] reads CSV tables of measurements (nccl-tests-shaped lookup tables such
//!   as vTrain's, GEMM sweeps, attention-kernel timings) into records, and [`import`] reads
//!   any file either kind of reader takes.
//! - [`summarize`] turns readers' notes into lines for people, counting repeats of a kind
//!   past the first few.
//! - [`terminal::escape_controls`] shows control characters in text from outside as escapes,
//!   so printing it cannot act on the terminal.
//! - [`datasheet`] holds the GPU datasheet figures that the tuner's catalog and the sim share.
//!
//! The crate depends on serde, csv and thiserror only, so the tuner reads measurements without
//! CUDA or NVML in its build.
#![deny(missing_docs)]

#[macro_use]
mod names;
mod busbw;
pub mod datasheet;
mod dtype;
mod families;
pub mod import;
mod input;
mod kind;
#[cfg(feature = "manual")]
pub mod manual;
pub mod nccl_tests;
mod notes;
pub mod range;
mod record;
pub mod tables;
pub mod terminal;

pub use busbw::busbw_factor;
pub use dtype::Dtype;
pub use families::Family;
pub use input::{
    into_text, open_for_reading, read_bounded, read_bounded_bytes, read_bounded_from, InputError,
    MAX_JSON_LINES_BYTES, MAX_LOG_BYTES,
};
pub use kind::{AttentionPass, Backend, Clock, GemmLayout, Kind, Scope};
pub use names::UnknownName;
pub use notes::summarize;
pub use record::{
    read_json_lines, AttentionShape, Detail, Gemm, Group, Invalid, JsonLinesError, LineError,
    Record, Timing, Versions,
};
