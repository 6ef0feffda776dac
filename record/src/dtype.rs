//! Element types of GEMM operands and collective buffers.

named_enum! {
    /// An element type, spelled as in PyTorch's short names.
    Dtype, "dtype" {
        /// bfloat16.
        Bf16 => "bf16",
        /// IEEE half precision.
        Fp16 => "fp16",
        /// IEEE single precision.
        Fp32 => "fp32",
        /// TensorFloat-32: fp32 storage, 10-bit mantissa in the tensor cores.
        Tf32 => "tf32",
        /// IEEE double precision.
        Fp64 => "fp64",
        /// 8-bit float, 4 exponent and 3 mantissa bits.
        Fp8E4m3 => "fp8_e4m3",
        /// 8-bit float, 5 exponent and 2 mantissa bits.
        Fp8E5m2 => "fp8_e5m2",
        /// Signed 8-bit integer.
        Int8 => "int8",
        /// Unsigned 8-bit integer.
        Uint8 => "uint8",
        /// Signed 32-bit integer.
        Int32 => "int32",
        /// Unsigned 32-bit integer.
        Uint32 => "uint32",
        /// Signed 64-bit integer.
        Int64 => "int64",
        /// Unsigned 64-bit integer.
        Uint64 => "uint64",
    }
}

impl Dtype {
    /// The compute capability whose tensor cores first took this type (Volta fp16 7.0, Ampere
    /// bf16 and tf32 8.0, Ada and Hopper fp8 8.9); `None` for types without tensor-core GEMMs.
    pub fn tensor_core_capability(self) -> Option<[u32; 2]> {
        match self {
            Dtype::Fp16 => Some([7, 0]),
            Dtype::Bf16 | Dtype::Tf32 => Some([8, 0]),
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Some([8, 9]),
            _ => None,
        }
    }

    /// The type a GEMM of this type writes C in: bf16 for fp8 (fp8 output would need a
    /// scale per tensor, and Transformer Engine writes bf16), the type itself otherwise.
    pub fn gemm_output(self) -> Dtype {
        match self {
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Dtype::Bf16,
            other => other,
        }
    }

    /// Bytes per element in memory (tf32 is stored as fp32).
    pub fn size_bytes(self) -> u64 {
        match self {
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 | Dtype::Int8 | Dtype::Uint8 => 1,
            Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Fp32 | Dtype::Tf32 | Dtype::Int32 | Dtype::Uint32 => 4,
            Dtype::Fp64 | Dtype::Int64 | Dtype::Uint64 => 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_storage_types() {
        assert_eq!(Dtype::Bf16.size_bytes(), 2);
        assert_eq!(Dtype::Tf32.size_bytes(), 4);
        assert_eq!(Dtype::Fp8E4m3.size_bytes(), 1);
        assert_eq!(Dtype::Fp64.size_bytes(), 8);
    }

    #[test]
    fn bad_dtype_names_the_field_and_the_choices() {
        let err = "bfloat".parse::<Dtype>().unwrap_err().to_string();
        assert!(
            err.starts_with("dtype `bfloat`: expected one of bf16, fp16"),
            "{err}"
        );
    }
}
