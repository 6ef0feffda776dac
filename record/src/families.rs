//! The Prometheus families that carry measurements from the agent to the tuner: the agent
//! writes them and the tuner reads them back (docs/design.md, "Metrics"), so their names live
//! here, once. The agent's other families (its own health, NVML counters) stay the agent's.

named_enum! {
    /// A family the agent exports and the tuner reads.
    Family, "family" {
        /// Median time of a collective at one size.
        CollectiveTime => "meshfit_collective_time_seconds",
        /// Achieved GEMM throughput at one shape.
        GemmFlops => "meshfit_gemm_flops_per_second",
        /// Copy bandwidth, peer to peer, host to device and within HBM.
        MemoryBandwidth => "meshfit_memory_bandwidth_bytes_per_second",
        /// End of the last calibration that measured every point.
        CalibrationLastSuccess => "meshfit_calibration_last_success_timestamp_seconds",
        /// One series per GPU, its model in a label.
        GpuInfo => "meshfit_gpu_info",
        /// One series per GPU pair, its link in a label.
        GpuLinkInfo => "meshfit_gpu_link_info",
        /// Send/recv bus bandwidth of one NIC rail to another node.
        FabricPairBusbw => "meshfit_fabric_pair_busbw_bytes_per_second",
        /// End of the last fabric run.
        FabricLastRun => "meshfit_fabric_last_run_timestamp_seconds",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_names_every_family() {
        let design = include_str!("../../docs/design.md");
        for f in Family::ALL {
            assert!(design.contains(f.as_str()), "{f} is not in docs/design.md");
        }
    }
}
