//! Live readings of each GPU through NVML, for the agent's sampler: utilisation, memory in
//! use, power, energy, temperature, clocks, throttle reasons, PCIe throughput and NVLink
//! error counters. Every reading is optional: a GPU or driver that lacks one leaves it `None`
//! instead of failing the others.

use super::nvml::{devices, init, MAX_NVLINKS};
use super::nvml_raw;
use crate::error::Result;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The clock throttle reasons NVML reports, by bit (nvml.h `nvmlClocksThrottleReason*`), with
/// the names the agent exports.
pub const THROTTLE_REASONS: [(u64, &str); 8] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
];

/// One GPU's live readings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// GPU index.
    pub gpu: u32,
    /// Percent of the last sample period a kernel ran.
    pub utilization_percent: Option<u32>,
    /// PIDs of the compute processes on the GPU, as the driver reports them (host PIDs, in
    /// a container without the host's PID namespace), so a calibrating agent can tell a
    /// newly started job from its own calibration child.
    pub processes: Option<Vec<u32>>,
    /// Memory in use, in bytes.
    pub memory_used_bytes: Option<u64>,
    /// Power draw in watts.
    pub power_watts: Option<f64>,
    /// Energy used since the driver loaded, in joules.
    pub energy_joules: Option<f64>,
    /// GPU die temperature in degrees Celsius.
    pub temperature_celsius: Option<u32>,
    /// Current SM clock in hertz.
    pub sm_clock_hz: Option<f64>,
    /// Current memory clock in hertz.
    pub memory_clock_hz: Option<f64>,
    /// Active throttle reasons as NVML's bit mask (see [`THROTTLE_REASONS`]).
    pub throttle_reasons: Option<u64>,
    /// PCIe bytes per second sent by the GPU over NVML's last 20 ms window.
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// PCIe bytes per second received by the GPU over NVML's last 20 ms window.
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// PCIe replays since the driver loaded.
    pub pcie_replays: Option<u64>,
    /// NVLink data bytes sent, over all links, since the driver loaded.
    pub nvlink_tx_bytes: Option<u64>,
    /// NVLink data bytes received, over all links, since the driver loaded.
    pub nvlink_rx_bytes: Option<u64>,
    /// NVLink error counters summed over the active links.
    pub nvlink_errors: Option<NvlinkErrors>,
}

/// NVLink data-link error counters (nvml.h `nvmlNvLinkErrorCounter_t`), summed over the
/// active links. A counter that any active link cannot report is `None`: unavailable, never 0,
/// since a partial sum would hide that link's errors (issue 10).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvlinkErrors {
    /// Transmit replays.
    pub replay: Option<u64>,
    /// Transmit recoveries.
    pub recovery: Option<u64>,
    /// Receive flow-control digit CRC errors.
    pub crc_flit: Option<u64>,
    /// Receive data CRC errors.
    pub crc_data: Option<u64>,
}

/// The sum of `reads`, or `None` when any of them failed.
fn sum_all<E>(reads: impl IntoIterator<Item = Result<u64, E>>) -> Option<u64> {
    reads
        .into_iter()
        .try_fold(0u64, |sum, r| r.ok().map(|v| sum.saturating_add(v)))
}

/// Reads every GPU's live counters once. Fails only when NVML itself cannot be used.
pub fn counters() -> Result<Vec<Counters>> {
    LiveReader::new()?.read()
}

/// NVML kept loaded between readings: a sampler reads every few seconds, and loading NVML
/// (nvmlInit) each time would cost more than the readings.
pub struct LiveReader {
    nvml: Nvml,
}

impl LiveReader {
    /// Loads NVML; fails with [`crate::Error::NoDriver`] without a driver.
    pub fn new() -> Result<LiveReader> {
        Ok(LiveReader { nvml: init()? })
    }

    /// Reads every GPU's live counters.
    pub fn read(&self) -> Result<Vec<Counters>> {
        read(&self.nvml)
    }

    /// GPU `gpu`'s SM clock and throttle reasons now: two NVML calls, cheap enough to make
    /// between a kernel's warm-up iterations.
    pub fn sm_clock(&self, gpu: u32) -> SmClock {
        match self.nvml.device_by_index(gpu) {
            Ok(d) => SmClock {
                mhz: d.clock_info(Clock::SM).ok(),
                throttle_reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
            },
            Err(_) => SmClock::default(),
        }
    }
}

/// One GPU's SM clock and what holds it back; `None` where NVML does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmClock {
    /// SM clock in MHz.
    pub mhz: Option<u32>,
    /// Active throttle reasons as NVML's bit mask (see [`THROTTLE_REASONS`]).
    pub throttle_reasons: Option<u64>,
}

impl SmClock {
    /// The SM clock in Hz, as records carry it.
    pub fn hz(&self) -> Option<f64> {
        self.mhz.map(|mhz| f64::from(mhz) * 1e6)
    }

    /// The active throttle reasons by name (see [`THROTTLE_REASONS`]), `["none"]` when there
    /// are none, as records carry them. A bit the table does not name (a newer driver's) is
    /// kept as `unknown_0x<bit>` rather than dropped.
    pub fn reason_names(&self) -> Option<Vec<String>> {
        let bits = self.throttle_reasons?;
        if bits == 0 {
            return Some(vec!["none".to_string()]);
        }
        let known: u64 = THROTTLE_REASONS.iter().map(|(bit, _)| bit).sum();
        let mut names: Vec<String> = THROTTLE_REASONS
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|(_, name)| name.to_string())
            .collect();
        names.extend(
            (0..64)
                .map(|i| 1u64 << i)
                .filter(|bit| bits & !known & bit != 0)
                .map(|bit| format!("unknown_{bit:#x}")),
        );
        Some(names)
    }

    /// What held back the slowest of several GPUs (a collective or copy runs at its slowest
    /// member's pace): the lowest clock and every reason any of them had; unknown where any
    /// GPU's reading is unknown, since the missing one may be the slowest.
    pub fn slowest(clocks: &[SmClock]) -> SmClock {
        let all =
            |f: fn(&SmClock) -> Option<u64>| -> Option<Vec<u64>> { clocks.iter().map(f).collect() };
        SmClock {
            mhz: all(|c| c.mhz.map(u64::from))
                .and_then(|v| v.into_iter().min())
                .and_then(|m| u32::try_from(m).ok()),
            throttle_reasons: all(|c| c.throttle_reasons)
                .filter(|v| !v.is_empty())
                .map(|v| v.into_iter().fold(0, |a, b| a | b)),
        }
    }
}

impl fmt::Display for SmClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mhz {
            Some(mhz) => write!(f, "SM clock {mhz} MHz")?,
            None => f.write_str("SM clock unknown")?,
        }
        match self.reason_names() {
            Some(names) if names == ["none"] => f.write_str(", no throttle reason"),
            Some(names) => write!(f, ", throttled by {}", names.join(", ")),
            None => f.write_str(", throttle reasons unknown"),
        }
    }
}

fn read(nvml: &Nvml) -> Result<Vec<Counters>> {
    devices(nvml)?
        .iter()
        .zip(0..)
        .map(|(d, gpu)| {
            let links: Vec<_> = (0..MAX_NVLINKS)
                .map(|l| d.link_wrapper_for(l))
                // Links a GPU does not have answer with an error; they are not active.
                .filter(|link| link.is_active().unwrap_or(false))
                .collect();
            let errors = |c: ErrorCounter| sum_all(links.iter().map(|l| l.error_counter(c)));
            let nvlink_errors = (!links.is_empty()).then(|| NvlinkErrors {
                replay: errors(ErrorCounter::DlReplay),
                recovery: errors(ErrorCounter::DlRecovery),
                crc_flit: errors(ErrorCounter::DlCrcFlit),
                crc_data: errors(ErrorCounter::DlCrcData),
            });
            let [nvlink_tx_bytes, nvlink_rx_bytes] = if links.is_empty() {
                [None, None]
            } else {
                nvml_raw::nvlink_data_bytes(d).unwrap_or([None, None])
            };
            // NVML reports PCIe throughput in KB/s (1000 bytes).
            let pcie = |c| d.pcie_throughput(c).ok().map(|kb| f64::from(kb) * 1e3);
            Ok(Counters {
                gpu,
                utilization_percent: d.utilization_rates().ok().map(|u| u.gpu),
                processes: d
                    .running_compute_processes()
                    .ok()
                    .map(|p| p.iter().map(|p| p.pid).collect()),
                memory_used_bytes: d.memory_info().ok().map(|m| m.used),
                power_watts: d.power_usage().ok().map(|mw| f64::from(mw) / 1e3),
                energy_joules: d.total_energy_consumption().ok().map(|mj| mj as f64 / 1e3),
                temperature_celsius: d.temperature(TemperatureSensor::Gpu).ok(),
                sm_clock_hz: d.clock_info(Clock::SM).ok().map(|m| f64::from(m) * 1e6),
                memory_clock_hz: d.clock_info(Clock::Memory).ok().map(|m| f64::from(m) * 1e6),
                throttle_reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
                pcie_tx_bytes_per_s: pcie(PcieUtilCounter::Send),
                pcie_rx_bytes_per_s: pcie(PcieUtilCounter::Receive),
                pcie_replays: d.pcie_replay_counter().ok().map(u64::from),
                nvlink_tx_bytes,
                nvlink_rx_bytes,
                nvlink_errors,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error counter one link cannot report is unavailable, not 0 (issue 10).
    #[test]
    fn sm_clocks_print_with_their_throttle_reasons() {
        let capped = SmClock {
            mhz: Some(1755),
            throttle_reasons: Some(0x4 | 0x20),
        };
        assert_eq!(
            capped.to_string(),
            "SM clock 1755 MHz, throttled by sw_power_cap, sw_thermal_slowdown"
        );
        assert_eq!(
            SmClock::default().to_string(),
            "SM clock unknown, throttle reasons unknown"
        );
    }

    /// Records carry NVML's reasons by name, `none` when there are none (issue 10).
    #[test]
    fn sm_clocks_name_their_reasons_for_records() {
        let capped = SmClock {
            mhz: Some(1755),
            throttle_reasons: Some(0x4 | 0x80 | 0x100),
        };
        assert_eq!(capped.hz(), Some(1.755e9));
        assert_eq!(
            capped.reason_names().unwrap(),
            ["sw_power_cap", "hw_power_brake_slowdown", "unknown_0x100"]
        );
        let free = SmClock {
            mhz: Some(1980),
            throttle_reasons: Some(0),
        };
        assert_eq!(free.reason_names().unwrap(), ["none"]);
        assert_eq!(free.to_string(), "SM clock 1980 MHz, no throttle reason");
        assert_eq!(SmClock::default().reason_names(), None);
        let both = SmClock::slowest(&[free, capped]);
        assert_eq!((both.mhz, both.throttle_reasons), (Some(1755), Some(0x184)));
        let unknown = SmClock::slowest(&[free, SmClock::default()]);
        assert_eq!((unknown.mhz, unknown.throttle_reasons), (None, None));
    }

    #[test]
    fn a_counter_any_link_cannot_read_is_unavailable() {
        assert_eq!(sum_all::<()>([Ok(2), Ok(0), Ok(5)]), Some(7));
        assert_eq!(sum_all::<()>([Ok(0), Ok(0)]), Some(0));
        assert_eq!(sum_all([Ok(2), Err(()), Ok(5)]), None);
        assert_eq!(sum_all::<()>([Ok(u64::MAX), Ok(1)]), Some(u64::MAX));
    }
}
