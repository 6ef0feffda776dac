//! Random GEMM operands. Zeros (what a fresh allocation holds) toggle no multiplier bits, so a
//! GEMM on them draws less power, keeps its clocks high and reads faster than on training data
//! (issue 10). The values are generated on the host and copied in chunks.

use super::timer::cuda;
use crate::error::Result;
use cudarc::driver::{CudaSlice, CudaStream};
use record::Dtype;
use std::sync::Arc;

/// Host bytes generated per copy.
const CHUNK_BYTES: usize = 16 << 20;

/// The bits a random operand of `dtype` keeps fixed and the bits it draws, as `(fixed, drawn)`
/// in the element's little-endian width: a random sign and mantissa with the exponent of
/// [0.5, 1), so no value is zero, subnormal, infinite or NaN. Integer types draw every bit.
fn operand_bits(dtype: Dtype) -> (u32, u32) {
    match dtype {
        // sign 1, exponent 8 (bias 127: 126 is 2^-1), mantissa 7.
        Dtype::Bf16 => (0x3f00, 0x807f),
        // sign 1, exponent 5 (bias 15: 14 is 2^-1), mantissa 10.
        Dtype::Fp16 => (0x3800, 0x83ff),
        // sign 1, exponent 8 (bias 127), mantissa 23; tf32 GEMMs read fp32 operands.
        Dtype::Fp32 | Dtype::Tf32 => (0x3f00_0000, 0x807f_ffff),
        // sign 1, exponent 4 (bias 7: 6 is 2^-1), mantissa 3.
        Dtype::Fp8E4m3 => (0x30, 0x87),
        // sign 1, exponent 5 (bias 15: 14 is 2^-1), mantissa 2.
        Dtype::Fp8E5m2 => (0x38, 0x83),
        _ => (0, u32::MAX),
    }
}

/// Fills `out` with random operands of `dtype` drawn from `state` (xorshift64*, Vigna 2016),
/// whole elements only: a trailing partial element keeps the bytes it had.
fn random_operands(dtype: Dtype, state: &mut u64, out: &mut [u8]) {
    let (fixed, drawn) = operand_bits(dtype);
    let width = dtype.size_bytes() as usize;
    let width = width.clamp(1, 4);
    for element in out.chunks_exact_mut(width) {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let random = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32;
        let bits = (random & drawn) | fixed;
        element.copy_from_slice(&bits.to_le_bytes()[..width]);
    }
}

/// Fills the device buffer `buf` of GPU `gpu` with random operands of `dtype`; `seed` makes
/// A and B differ.
pub(super) fn fill_random(
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<u8>,
    dtype: Dtype,
    gpu: u32,
    seed: u64,
) -> Result<()> {
    // xorshift needs a non-zero state.
    let mut state = seed | 1;
    let mut host = vec![0u8; CHUNK_BYTES.min(buf.len())];
    let mut at = 0;
    while at < buf.len() {
        let len = host.len().min(buf.len() - at);
        random_operands(dtype, &mut state, &mut host[..len]);
        // A copy from pageable memory returns once the bytes are staged, so the chunk can be
        // refilled at once.
        stream
            .memcpy_htod(&host[..len], &mut buf.slice_mut(at..at + len))
            .map_err(cuda("cuMemcpyHtoDAsync", gpu))?;
        at += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bf16 and fp16 to f32 by their bit layouts.
    fn bf16(b: [u8; 2]) -> f32 {
        f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16)
    }

    fn fp16(b: [u8; 2]) -> f32 {
        let h = u16::from_le_bytes(b);
        let sign = if h & 0x8000 == 0 { 1.0 } else { -1.0 };
        let exponent = i32::from((h >> 10) & 0x1f) - 15;
        let mantissa = f32::from(h & 0x3ff) / 1024.0;
        sign * (1.0 + mantissa) * 2f32.powi(exponent)
    }

    fn e4m3(b: u8) -> f32 {
        let sign = if b & 0x80 == 0 { 1.0 } else { -1.0 };
        let exponent = i32::from((b >> 3) & 0xf) - 7;
        sign * (1.0 + f32::from(b & 0x7) / 8.0) * 2f32.powi(exponent)
    }

    fn magnitudes_in_half_to_one(values: &[f32]) {
        assert!(values.iter().all(|v| (0.5..1.0).contains(&v.abs())));
        assert!(values.iter().any(|&v| v < 0.0) && values.iter().any(|&v| v > 0.0));
        let mut distinct = values.to_vec();
        distinct.sort_by(f32::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > values.len() / 8, "{}", distinct.len());
    }

    #[test]
    fn operands_are_random_finite_and_never_zero() {
        let mut state = 7;
        let mut bytes = vec![0u8; 2048];
        random_operands(Dtype::Bf16, &mut state, &mut bytes);
        let values: Vec<f32> = bytes.chunks_exact(2).map(|c| bf16([c[0], c[1]])).collect();
        magnitudes_in_half_to_one(&values);
        random_operands(Dtype::Fp16, &mut state, &mut bytes);
        let values: Vec<f32> = bytes.chunks_exact(2).map(|c| fp16([c[0], c[1]])).collect();
        magnitudes_in_half_to_one(&values);
        random_operands(Dtype::Tf32, &mut state, &mut bytes);
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        magnitudes_in_half_to_one(&values);
        random_operands(Dtype::Fp8E4m3, &mut state, &mut bytes);
        let values: Vec<f32> = bytes.iter().map(|&b| e4m3(b)).collect();
        assert!(values.iter().all(|v| (0.5..1.0).contains(&v.abs())));
    }

    /// The next chunk continues the sequence instead of repeating it.
    #[test]
    fn chunks_differ() {
        let mut state = 1;
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        random_operands(Dtype::Bf16, &mut state, &mut a);
        random_operands(Dtype::Bf16, &mut state, &mut b);
        assert_ne!(a, b);
    }
}
