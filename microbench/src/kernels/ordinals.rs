//! CUDA ordinals and NVML indices name GPUs differently: CUDA numbers only the GPUs
//! `CUDA_VISIBLE_DEVICES` leaves visible, in its own order, while NVML numbers every GPU of
//! the node. The two are matched by PCI address, never by number.

use super::timer::cuda;
use crate::discovery::Topology;
use crate::error::{Error, Result};
use cudarc::driver::result::device as cu_device;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;

/// The PCI address of each GPU CUDA sees, by ordinal, as `0000:18:00.0`. Needs `cuInit`
/// only: no context is made, so nothing shows on the GPUs.
pub(super) fn cuda_buses() -> Result<Vec<String>> {
    let count = CudaContext::device_count().map_err(|e| Error::CudaInit(e.to_string()))?;
    (0..count.max(0))
        .map(|ordinal| {
            // Errors here name the CUDA ordinal, which is not an NVML index.
            let at = ordinal as u32;
            let device = cu_device::get(ordinal).map_err(cuda("cuDeviceGet (CUDA ordinal)", at))?;
            let attr = |a| {
                // SAFETY: `device` came from cuDeviceGet; reading an attribute needs no context.
                unsafe { cu_device::get_attribute(device, a) }
                    .map_err(cuda("cuDeviceGetAttribute (CUDA ordinal)", at))
            };
            Ok(format!(
                "{:04x}:{:02x}:{:02x}.0",
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
            ))
        })
        .collect()
}

/// Whether NVML's bus id (`00000000:18:00.0`, an 8-digit domain) and CUDA's (`0000:18:00.0`)
/// name one GPU.
pub(super) fn same_gpu(nvml: &str, cuda: &str) -> bool {
    nvml.to_ascii_lowercase()
        .ends_with(&cuda.to_ascii_lowercase())
}

/// The NVML index of the GPU of local rank `local_rank`: CUDA device `local_rank` among
/// those this process sees, or its only one where the launcher narrowed
/// `CUDA_VISIBLE_DEVICES` to one GPU per rank (srun --gpus-per-task, torchrun with a
/// per-rank mask, a Kubernetes device plugin), matched to NVML by PCI address.
pub fn rank_gpu(local_rank: u32, topology: &Topology) -> Result<u32> {
    let nvml: Vec<&str> = topology
        .gpus
        .iter()
        .map(|g| g.pci_bus_id.as_str())
        .collect();
    pick(local_rank, &cuda_buses()?, &nvml)
}

/// [`rank_gpu`] from CUDA's PCI addresses by ordinal and NVML's by index.
fn pick(local_rank: u32, cuda: &[String], nvml: &[&str]) -> Result<u32> {
    let ordinal = match cuda.len() {
        1 => 0,
        n if (local_rank as usize) < n => local_rank as usize,
        n => {
            return Err(Error::NoSuchGpu {
                field: "local rank (among the GPUs CUDA_VISIBLE_DEVICES leaves visible)",
                gpu: local_rank,
                count: n,
            })
        }
    };
    let bus = &cuda[ordinal];
    nvml.iter()
        .position(|n| same_gpu(n, bus))
        .map(|i| i as u32)
        .ok_or_else(|| Error::Cuda {
            call: "cuDeviceGetAttribute (PCI address)",
            gpu: ordinal as u32,
            message: format!("CUDA's GPU at {bus} is none of the GPUs NVML lists"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVML: [&str; 4] = [
        "00000000:18:00.0",
        "00000000:2A:00.0",
        "00000000:3A:00.0",
        "00000000:5D:00.0",
    ];

    fn buses(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    /// srun --gpus-per-task=1 gives local rank 2 CUDA_VISIBLE_DEVICES=2: CUDA sees one GPU,
    /// at 3a:00.0, which is NVML's GPU 2 here; under a mask of 3,1 local rank 0 is NVML's 3.
    #[test]
    fn a_narrowed_mask_maps_by_pci_address_not_by_local_rank() {
        assert_eq!(pick(2, &buses(&["0000:3a:00.0"]), &NVML).unwrap(), 2);
        assert_eq!(pick(3, &buses(&["0000:18:00.0"]), &NVML).unwrap(), 0);
        let mask = buses(&["0000:5d:00.0", "0000:2a:00.0"]);
        assert_eq!(pick(0, &mask, &NVML).unwrap(), 3);
        assert_eq!(pick(1, &mask, &NVML).unwrap(), 1);
    }

    /// Every GPU visible: local rank r is CUDA device r, and (in PCI order) NVML's r.
    #[test]
    fn every_gpu_visible_gives_the_local_rank_s_gpu_and_too_few_is_an_error() {
        let all = buses(&[
            "0000:18:00.0",
            "0000:2a:00.0",
            "0000:3a:00.0",
            "0000:5d:00.0",
        ]);
        assert_eq!(pick(3, &all, &NVML).unwrap(), 3);
        let two = buses(&["0000:18:00.0", "0000:2a:00.0"]);
        let err = pick(5, &two, &NVML).unwrap_err().to_string();
        assert_eq!(
            err,
            "local rank (among the GPUs CUDA_VISIBLE_DEVICES leaves visible) 5: no such GPU; \
             this node has 2 (0-1)"
        );
        assert!(pick(0, &buses(&["0000:99:00.0"]), &NVML).is_err());
    }
}
