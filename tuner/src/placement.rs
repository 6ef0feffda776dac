//! Where a parallel group's ranks land. Ranks are ordered TP innermost, then CP, then DP (with
//! EP groups carved out of consecutive DP ranks), then PP outermost, as Megatron-LM orders them;
//! a group's spread over nodes and NVLink domains follows from its size and stride.

use serde::Serialize;

use crate::catalog::Cluster;
use crate::mesh::Mesh;

/// The fastest link class that connects every member of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// One NVLink domain.
    Nvlink,
    /// One node without NVLink between the members: PCIe switches and the host bridge.
    Pcie,
    /// More than one node (or NVLink domain): the scale-out fabric.
    Network,
}

impl LinkClass {
    /// The name JSON spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::Nvlink => "nvlink",
            LinkClass::Pcie => "pcie",
            LinkClass::Network => "network",
        }
    }
}

/// How one communicator spreads over the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupSpan {
    /// Ranks in the group.
    pub ranks: u32,
    /// Members that share one node.
    pub members_per_node: u32,
    /// Nodes the group touches.
    pub nodes: u32,
    /// Link class its collectives cross.
    pub link: LinkClass,
}

/// Places a group of `ranks` members whose ranks are `stride` apart.
pub fn span(ranks: u32, stride: u32, cluster: &Cluster) -> GroupSpan {
    let per = |unit: u32| {
        if stride >= unit {
            1
        } else {
            ranks.min(unit / stride).max(1)
        }
    };
    let members_per_node = per(cluster.gpus_per_node);
    let members_per_domain = per(cluster.nvlink_domain);
    let nodes = ranks.div_ceil(members_per_node);
    let domains = ranks.div_ceil(members_per_domain);
    let link = if ranks <= 1 || (domains == 1 && cluster.nvlink_domain > 1) {
        LinkClass::Nvlink
    } else if nodes == 1 {
        LinkClass::Pcie
    } else {
        LinkClass::Network
    };
    GroupSpan {
        ranks,
        members_per_node,
        nodes,
        link,
    }
}

/// The communicators of one mesh.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Placement {
    /// Tensor parallel group.
    pub tp: GroupSpan,
    /// Context parallel group.
    pub cp: GroupSpan,
    /// Expert parallel group (all-to-all).
    pub ep: GroupSpan,
    /// Data parallel group of the dense weights.
    pub dp: GroupSpan,
    /// Gradient-reduction group of the dense weights: DP x CP ranks, since context-parallel
    /// ranks hold the same weights (Megatron reduces over the DP x CP group).
    pub grad: GroupSpan,
    /// Tensor-parallel group of one expert's weights ([`Mesh::etp`] neighbouring ranks).
    pub expert_tp: GroupSpan,
    /// Data parallel group of the expert weights ([`Mesh::expert_dp`] ranks).
    pub expert_dp: GroupSpan,
    /// Two neighbouring pipeline stages.
    pub pp: GroupSpan,
}

impl Placement {
    /// Places every group of `mesh` on `cluster`.
    pub fn of(mesh: &Mesh, cluster: &Cluster) -> Placement {
        let inner = mesh.tp * mesh.cp;
        // Megatron-Core orders the expert ranks `tp-ep-dp` with ETP in TP's place and CP
        // folded into the expert data-parallel ranks (`RankGenerator` of the expert groups,
        // `parallel_state.py`): EP ranks sit ETP apart.
        let ep_stride = mesh.etp();
        Placement {
            tp: span(mesh.tp, 1, cluster),
            cp: span(mesh.cp, mesh.tp, cluster),
            ep: span(mesh.ep, ep_stride, cluster),
            dp: span(mesh.dp, inner, cluster),
            grad: span(mesh.dp * mesh.cp, mesh.tp, cluster),
            expert_tp: span(mesh.etp(), 1, cluster),
            expert_dp: span(mesh.expert_dp(), ep_stride * mesh.ep, cluster),
            pp: span(if mesh.pp > 1 { 2 } else { 1 }, inner * mesh.dp, cluster),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    #[test]
    fn tp8_stays_in_a_dgx_and_dp_crosses_nodes() {
        let c = catalog::cluster("dgx-h100").unwrap();
        let tp = span(8, 1, &c);
        assert_eq!((tp.nodes, tp.link), (1, LinkClass::Nvlink));
        let tp16 = span(16, 1, &c);
        assert_eq!(
            (tp16.nodes, tp16.members_per_node, tp16.link),
            (2, 8, LinkClass::Network)
        );
        let dp = span(64, 8, &c);
        assert_eq!(
            (dp.nodes, dp.members_per_node, dp.link),
            (64, 1, LinkClass::Network)
        );
        let dp_tp2 = span(32, 2, &c);
        assert_eq!((dp_tp2.nodes, dp_tp2.members_per_node), (8, 4));
    }

    #[test]
    fn nvl72_keeps_tp16_on_nvlink_across_trays() {
        let c = catalog::cluster("gb200-nvl72").unwrap();
        let tp = span(16, 1, &c);
        assert_eq!((tp.nodes, tp.link), (4, LinkClass::Nvlink));
        assert_eq!(span(144, 1, &c).link, LinkClass::Network);
    }

    #[test]
    fn expert_groups_fold_over_tp_and_take_cp_into_their_data_parallel_ranks() {
        // Mixtral-style layout on 16 H100: TP 2, CP 2, DP 4, EP 8 with whole experts. The EP
        // group is 8 neighbouring ranks, one node; the 16 / 8 = 2 ranks holding the same
        // experts, CP's among them, reduce their gradients across the two nodes.
        let c = catalog::cluster("dgx-h100").unwrap();
        let mesh = Mesh {
            tp: 2,
            pp: 1,
            dp: 4,
            cp: 2,
            ep: 8,
            microbatch_size: 1,
            virtual_stages: 1,
            zero_stage: 1,
            recompute: crate::mesh::Recompute::None,
            sequence_parallel: true,
            schedule: crate::mesh::Schedule::OneFOneB,
            edge_stages: None,
            expert_tp: Some(1),
        };
        let p = Placement::of(&mesh, &c);
        assert_eq!((p.ep.ranks, p.ep.nodes), (8, 1));
        assert_eq!(mesh.expert_dp(), 2);
        assert_eq!((p.expert_dp.ranks, p.expert_dp.nodes), (2, 2));
        // Split over the TP pair, EP 4 sits two ranks apart: 8 GPUs, one node.
        let split = Mesh {
            ep: 4,
            expert_tp: None,
            ..mesh
        };
        let p = Placement::of(&split, &c);
        assert_eq!((p.ep.ranks, p.ep.members_per_node), (4, 4));
        assert_eq!(split.expert_dp(), 2);
    }

    #[test]
    fn pcie_node_has_no_nvlink() {
        let c = catalog::cluster("l40s-pcie").unwrap();
        assert_eq!(span(8, 1, &c).link, LinkClass::Pcie);
        assert_eq!(span(2, 1, &c).link, LinkClass::Pcie);
        assert_eq!(span(1, 1, &c).link, LinkClass::Nvlink);
    }
}
