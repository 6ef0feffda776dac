//! NVML calls that nvml-wrapper 0.13 lacks or gets wrong, made through its loaded library.
//!
//! - `NvLink::remote_device_type` writes NVML's answer into a temporary and always returns
//!   `Unknown`, so an NVSwitch could never be told from it (issue 10).
//! - The NVLink byte counters are field values whose scope id must name the links, which
//!   `Device::field_values_for` always sets to 0.
//! - `nvmlDeviceGetGpuMaxPcieLinkGeneration` has no wrapper.

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
