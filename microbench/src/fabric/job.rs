//! A rendezvous roster read as a job: which nodes take part, with how many ranks, with which
//! sim faults, and which nodes leave because a GPU there is busy (the agent's idle rule).

use crate::error::{Error, Result};
use crate::rendezvous::Roster;
use crate::sim::{self, Fault, SimBackend};

/// A node taking part.
#[derive(Debug, Clone, PartialEq)]
pub struct JobNode {
    /// Its name.
    pub name: String,
    /// Its ranks, in rank order.
    pub ranks: Vec<u32>,
    /// Sim faults its ranks were started with, each once.
    pub faults: Vec<Fault>,
}

/// The nodes that run, in order of their lowest rank, and those skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Nodes taking part; the first holds the lowest rank that runs.
    pub nodes: Vec<JobNode>,
    /// Ranks on each node taking part (the same on all of them).
    pub ranks_per_node: u32,
    /// Nodes that left because a GPU there is busy, with the ranks whose GPU it was.
    pub skipped: Vec<(String, Vec<u32>)>,
    /// Sim profile, when the backend is the sim.
    pub profile: Option<String>,
}

/// Fewest nodes `microbench fabric` needs: its pairwise pass is between nodes. A collective
/// sweep runs on one node too (several processes on one node's GPUs).
pub const FABRIC_MIN_NODES: usize = 2;

impl Job {
    /// Reads `roster`. A node with a busy GPU leaves whole, so every node left has the same
    /// ranks and rails; the job needs `min_nodes` nodes after that, the same backend and
    /// profile on every rank, and local ranks 0 to n-1 on each node (they pick the GPUs).
    pub fn from_roster(roster: &Roster, min_nodes: usize) -> Result<Job> {
        let first = roster
            .members
            .first()
            .ok_or_else(|| Error::Job("no ranks in the roster".into()))?;
        if let Some(m) = roster
            .members
            .iter()
            .find(|m| m.backend != first.backend || m.profile != first.profile)
        {
            return Err(Error::Job(format!(
                "rank {} on {} runs backend {} profile {}, rank 0 backend {} profile {}: \
                 start every rank with the same --backend and --profile",
                m.rank,
                m.host,
                m.backend,
                m.profile.as_deref().unwrap_or("none"),
                first.backend,
                first.profile.as_deref().unwrap_or("none"),
            )));
        }
        let mut nodes: Vec<JobNode> = Vec::new();
        let mut busy: Vec<(String, Vec<u32>)> = Vec::new();
        for m in &roster.members {
            let i = match nodes.iter().position(|n| n.name == m.node) {
                Some(i) => i,
                None => {
                    nodes.push(JobNode {
                        name: m.node.clone(),
                        ranks: Vec::new(),
                        faults: Vec::new(),
                    });
                    nodes.len() - 1
                }
            };
            let node = &mut nodes[i];
            node.ranks.push(m.rank);
            for text in &m.faults {
                let fault: Fault = text
                    .parse()
                    .map_err(|e| Error::Job(format!("rank {} on {}: {e}", m.rank, m.host)))?;
                if !node.faults.contains(&fault) {
                    node.faults.push(fault);
                }
            }
            if m.busy {
                match busy.iter_mut().find(|(n, _)| *n == m.node) {
                    Some((_, ranks)) => ranks.push(m.rank),
                    None => busy.push((m.node.clone(), vec![m.rank])),
                }
            }
        }
        nodes.retain(|n| !busy.iter().any(|(b, _)| *b == n.name));
        if nodes.len() < min_nodes {
            let skipped: Vec<&str> = busy.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::Job(format!(
                "{} node{} left, {min_nodes} or more needed (skipped for busy GPUs: {})",
                nodes.len(),
                if nodes.len() == 1 { "" } else { "s" },
                if skipped.is_empty() {
                    "none".to_string()
                } else {
                    skipped.join(", ")
                }
            )));
        }
        let ranks_per_node = nodes[0].ranks.len() as u32;
        for n in &nodes {
            if n.ranks.len() as u32 != ranks_per_node {
                return Err(Error::Job(format!(
                    "node {} has {} ranks, node {} has {ranks_per_node}: start the same number \
                     of ranks on every node",
                    n.name,
                    n.ranks.len(),
                    nodes[0].name
                )));
            }
            let mut local: Vec<u32> = n
                .ranks
                .iter()
                .map(|&r| roster.members[r as usize].local_rank)
                .collect();
            local.sort_unstable();
            if local != (0..ranks_per_node).collect::<Vec<_>>() {
                return Err(Error::Job(format!(
                    "node {} has local ranks {local:?}: expected 0 to {} (each drives that GPU)",
                    n.name,
                    ranks_per_node - 1
                )));
            }
        }
        Ok(Job {
            nodes,
            ranks_per_node,
            skipped: busy,
            profile: first.profile.clone(),
        })
    }

    /// Whether `rank` runs (its node was not skipped).
    pub fn includes(&self, rank: u32) -> bool {
        self.nodes.iter().any(|n| n.ranks.contains(&rank))
    }

    /// The sim of the job: every node of the profile, each with its own faults; `seed` fixes
    /// the noise as `--seed` does in one process.
    pub fn sim(&self, seed: u64) -> Result<SimBackend> {
        let name = self
            .profile
            .as_deref()
            .ok_or_else(|| Error::Job("--backend sim needs --profile on every rank".into()))?;
        let mut node = SimBackend::new(sim::profile(name)?, self.nodes[0].faults.clone(), seed)?;
        let nodes: Vec<(String, Vec<Fault>)> = self
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.faults.clone()))
            .collect();
        node.set_job(&nodes)?;
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::tests::hello_on;
    use crate::rendezvous::Hello;

    fn roster(nodes: usize, per_node: u32, tweak: impl Fn(&mut Hello)) -> Roster {
        let members = (0..nodes as u32 * per_node)
            .map(|rank| {
                let mut h = hello_on(rank, nodes as u32 * per_node, per_node);
                tweak(&mut h);
                h
            })
            .collect();
        Roster {
            members,
            nccl_id: None,
        }
    }

    #[test]
    fn nodes_in_rank_order_with_their_faults() {
        let job = Job::from_roster(
            &roster(3, 2, |h| {
                if h.node == "n1" {
                    h.faults = vec!["nic-down:nic=1".into()];
                }
            }),
            FABRIC_MIN_NODES,
        )
        .unwrap();
        assert_eq!(job.ranks_per_node, 2);
        assert_eq!(job.nodes[1].ranks, vec![2, 3]);
        assert_eq!(job.nodes[1].faults, vec![Fault::NicDown { nic: 1 }]);
        assert!(job.nodes[0].faults.is_empty() && job.skipped.is_empty());
    }

    #[test]
    fn a_busy_gpu_takes_its_node_out() {
        let job =
            Job::from_roster(&roster(3, 2, |h| h.busy = h.rank == 5), FABRIC_MIN_NODES).unwrap();
        assert_eq!(job.skipped, vec![("n2".to_string(), vec![5])]);
        assert_eq!(job.nodes.len(), 2);
        assert!(!job.includes(4) && !job.includes(5) && job.includes(3));
        let err = Job::from_roster(&roster(2, 2, |h| h.busy = h.rank == 0), FABRIC_MIN_NODES)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "job: 1 node left, 2 or more needed (skipped for busy GPUs: n0)"
        );
    }

    #[test]
    fn uneven_nodes_and_mixed_profiles_are_refused() {
        let uneven = roster(2, 2, |h| {
            if h.rank == 1 {
                h.node = "n1".into();
                h.local_rank = 2;
            }
        });
        assert!(Job::from_roster(&uneven, FABRIC_MIN_NODES)
            .unwrap_err()
            .to_string()
            .contains("node n1 has 3 ranks, node n0 has 1"));
        let mixed = roster(2, 1, |h| {
            if h.rank == 1 {
                h.profile = Some("dgx-a100".into());
            }
        });
        assert!(Job::from_roster(&mixed, FABRIC_MIN_NODES)
            .unwrap_err()
            .to_string()
            .contains("rank 1 on localhost runs backend sim profile dgx-a100"));
    }
}
