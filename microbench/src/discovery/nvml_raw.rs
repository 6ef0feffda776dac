//! NVML calls that nvml-wrapper 0.13 lacks or gets wrong, made through its loaded library.
//!
//! - `NvLink::remote_device_type` writes NVML's answer into a temporary and always returns
//!   `Unknown`, so an NVSwitch could never be told from it (issue 10).
//! - The NVLink byte counters are field values whose scope id must name the links, which
//!   `Device::field_values_for` always sets to 0.
//! - `nvmlDeviceGetGpuMaxPcieLinkGeneration` has no wrapper.
//! - `nvmlDeviceGetGpuFabricInfo` (which NVLink domain a GPU is in) has none either.

use super::NvlinkFabric;
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
};
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings as sys;

/// What the far end of an NVLink is, as NVML reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RemoteType {
    /// A GPU.
    Gpu,
    /// An NVSwitch.
    Switch,
    /// An IBM NPU, or a device NVML calls unknown.
    Other,
}

/// `nvmlDeviceGetNvLinkRemoteDeviceType` for one link of `device`.
pub(super) fn remote_type(device: &Device, link: u32) -> Result<RemoteType, NvmlError> {
    let sym = nvml_sym(
        device
            .nvml()
            .lib()
            .nvmlDeviceGetNvLinkRemoteDeviceType
            .as_ref(),
    )?;
    let mut kind: sys::nvmlIntNvLinkDeviceType_t =
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    // SAFETY: the handle lives as long as `device`, and `kind` is a valid place for NVML to
    // write one enum value.
    nvml_try(unsafe { sym(device.handle(), link, &mut kind) })?;
    Ok(match kind {
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU => RemoteType::Gpu,
        sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH => RemoteType::Switch,
        _ => RemoteType::Other,
    })
}

/// `nvmlDeviceGetGpuMaxPcieLinkGeneration`: the highest PCIe generation the GPU itself
/// supports, whatever its slot allows.
pub(super) fn gpu_max_pcie_generation(device: &Device) -> Result<u32, NvmlError> {
    let sym = nvml_sym(
        device
            .nvml()
            .lib()
            .nvmlDeviceGetGpuMaxPcieLinkGeneration
            .as_ref(),
    )?;
    let mut generation = 0;
    // SAFETY: the handle lives as long as `device`; `generation` is a valid out pointer.
    nvml_try(unsafe { sym(device.handle(), &mut generation) })?;
    Ok(generation)
}

/// `nvmlDeviceGetGpuFabricInfo`: the NVLink fabric `device` registered with, read by
/// [`fabric_of`]. A driver without the call predates multi-node NVLink (R525), so none of its
/// GPUs is on a fabric beyond the node.
pub(super) fn nvlink_fabric(device: &Device) -> Option<NvlinkFabric> {
    let Ok(sym) = nvml_sym(device.nvml().lib().nvmlDeviceGetGpuFabricInfo.as_ref()) else {
        return Some(NvlinkFabric::Node);
    };
    // SAFETY: nvmlGpuFabricInfo_t is plain C data (bytes and integers), for which all zero
    // bytes are a valid value.
    let mut info: sys::nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the handle lives as long as `device`; `info` is a valid place for one struct.
    let ret = unsafe { sym(device.handle(), &mut info) };
    fabric_of(ret, &info)
}

/// What NVML's fabric info says of a GPU's NVLink domain. A GPU registered with a fabric
/// that spans nodes has a cluster UUID; one whose fabric stays inside the node (an HGX
/// H100's NVSwitches) registers with an all-zero UUID, and a GPU without a fabric answers
/// not supported. A registration not finished or failed says nothing.
fn fabric_of(ret: sys::nvmlReturn_t, info: &sys::nvmlGpuFabricInfo_t) -> Option<NvlinkFabric> {
    const COMPLETED: sys::nvmlGpuFabricState_t = sys::NVML_GPU_FABRIC_STATE_COMPLETED as _;
    const NOT_SUPPORTED: sys::nvmlGpuFabricState_t = sys::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED as _;
    match ret {
        sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED => return Some(NvlinkFabric::Node),
        sys::nvmlReturn_enum_NVML_SUCCESS => {}
        _ => return None,
    }
    match info.state {
        NOT_SUPPORTED => Some(NvlinkFabric::Node),
        COMPLETED if info.status != sys::nvmlReturn_enum_NVML_SUCCESS => None,
        COMPLETED if info.clusterUuid.iter().all(|&b| b == 0) => Some(NvlinkFabric::Node),
        COMPLETED => Some(NvlinkFabric::Shared {
            cluster_uuid: uuid_text(&info.clusterUuid),
            clique_id: info.cliqueId,
        }),
        _ => None,
    }
}

/// A 16-byte UUID in its usual 8-4-4-4-12 hex spelling.
fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Scope id that asks a per-link NVLink field for the sum over all links (nvml.h: UINT_MAX).
const ALL_LINKS: u32 = u32::MAX;

/// NVLink data bytes sent and received over all links since the driver loaded, as
/// `[tx, rx]`; each `None` when NVML does not report it. NVML counts KiB.
pub(super) fn nvlink_data_bytes(device: &Device) -> Result<[Option<u64>; 2], NvmlError> {
    let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetFieldValues.as_ref())?;
    // Field ids 138 and 139 lie outside the range newer drivers renumber (251-273), so they
    // need no translation for the driver's field id scheme.
    let mut fields = [
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
    ]
    .map(|id| {
        // SAFETY: nvmlFieldValue_t is plain C data (integers and a union of numbers), for
        // which all zero bytes are a valid value.
        let mut field: sys::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        field.fieldId = id;
        field.scopeId = ALL_LINKS;
        field
    });
    // SAFETY: the handle lives as long as `device`; `fields` holds exactly the count passed.
    nvml_try(unsafe { sym(device.handle(), fields.len() as i32, fields.as_mut_ptr()) })?;
    Ok(fields.map(|f| counter(&f).map(|kib| kib.saturating_mul(1024))))
}

/// A field's value as a whole number, `None` when NVML failed to read it or gave a type no
/// counter has.
fn counter(field: &sys::nvmlFieldValue_t) -> Option<u64> {
    if field.nvmlReturn != sys::nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    // SAFETY: NVML wrote the union member that `valueType` names.
    unsafe {
        match field.valueType {
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT => {
                Some(u64::from(field.value.uiVal))
            }
            sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG => Some(field.value.ullVal),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(
        result: sys::nvmlReturn_t,
        value_type: sys::nvmlValueType_t,
        v: u64,
    ) -> sys::nvmlFieldValue_t {
        // SAFETY: all zero bytes are a valid nvmlFieldValue_t.
        let mut f: sys::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        f.nvmlReturn = result;
        f.valueType = value_type;
        f.value.ullVal = v;
        f
    }

    /// A GB200 tray registered with its rack's fabric names the rack's cluster and clique;
    /// an HGX H100 registers its node-local NVSwitch fabric with an all-zero UUID, and an
    /// A100 answers not supported: both are their node's domain. A registration still in
    /// progress, or completed with an error, says nothing.
    #[test]
    fn fabric_info_names_the_domain_only_when_registration_completed() {
        let ok = sys::nvmlReturn_enum_NVML_SUCCESS;
        let info = |state: u32, status, uuid: [u8; 16]| sys::nvmlGpuFabricInfo_t {
            clusterUuid: uuid,
            status,
            cliqueId: 32766,
            state: state as sys::nvmlGpuFabricState_t,
        };
        let rack: [u8; 16] = std::array::from_fn(|i| 0xa0 + i as u8);
        let done = sys::NVML_GPU_FABRIC_STATE_COMPLETED;
        assert_eq!(
            fabric_of(ok, &info(done, ok, rack)),
            Some(NvlinkFabric::Shared {
                cluster_uuid: "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf".into(),
                clique_id: 32766
            })
        );
        assert_eq!(
            fabric_of(ok, &info(done, ok, [0; 16])),
            Some(NvlinkFabric::Node)
        );
        let unsupported = sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        assert_eq!(
            fabric_of(unsupported, &info(0, ok, [0; 16])),
            Some(NvlinkFabric::Node)
        );
        let pending = sys::NVML_GPU_FABRIC_STATE_IN_PROGRESS;
        assert_eq!(fabric_of(ok, &info(pending, ok, rack)), None);
        let failed = sys::nvmlReturn_enum_NVML_ERROR_UNKNOWN;
        assert_eq!(fabric_of(ok, &info(done, failed, rack)), None);
        assert_eq!(fabric_of(failed, &info(done, ok, rack)), None);
    }

    /// A field NVML could not read is unavailable, never 0 (issue 10).
    #[test]
    fn unread_fields_are_unavailable_not_zero() {
        let ok = sys::nvmlReturn_enum_NVML_SUCCESS;
        let ull = sys::nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        assert_eq!(counter(&field(ok, ull, 7)), Some(7));
        assert_eq!(counter(&field(ok, ull, 0)), Some(0));
        let not_supported = sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        assert_eq!(counter(&field(not_supported, ull, 0)), None);
        let double = sys::nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE;
        assert_eq!(counter(&field(ok, double, 0)), None);
    }
}
