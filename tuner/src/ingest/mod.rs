//! Reading measurements: snapshot files, microbench JSON lines, nccl-tests logs and the
//! Prometheus HTTP API. Each source ends as records plus notes on what was odd.

mod file_kind;
pub mod files;
pub mod node_gpus;
mod points;
pub mod prometheus;
pub mod snapshot;
mod snapshot_stream;

use std::collections::BTreeMap;

use record::{Backend, Record};

use crate::error::TunerError;
use node_gpus::{GpuConflict, NodeGpus};

/// Records from every source, with what the user must be told about them.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// The records kept.
    pub records: Vec<Record>,
    /// Stale, simulated or unreadable data, by name.
    pub notes: Vec<String>,
    /// What was read.
    pub sources: Vec<String>,
    /// GPU model per node, where the source says: its lowest GPU index's.
    pub gpu_models: BTreeMap<String, String>,
    /// Each node's GPUs by index, over every source that lists them.
    pub gpus: NodeGpus,
    /// Where the records are a fleet's aggregate (`fleet/<model>` nodes) rather than every
    /// node's: what they stand for.
    pub fleet: Option<FleetSummary>,
}

/// A fleet reduced where its measurements live: its stragglers and exclusions, which the
/// aggregate's records cannot show, and the aggregate over every node where some were left
/// out (what keeping them would cost).
#[derive(Debug, Clone)]
pub struct FleetSummary {
    /// What the `fleet/<model>` nodes stand for.
    pub section: snapshot::FleetSection,
    /// The aggregate over every node, where some were left out; unknown when read back from
    /// a compact snapshot.
    pub all: Option<Vec<Record>>,
}

impl Measurements {
    /// Takes in the GPUs one source lists, `listed`, under [`node_gpus`]' rule, and sets the
    /// model of each node it lists. One GPU index listed as another model by a source read
    /// before is refused, naming the node, the GPU, both models and both sources, in the same
    /// words whichever was read first (issue 31, item 2); nothing is taken then.
    pub fn add_gpus(&mut self, listed: NodeGpus) -> Result<(), TunerError> {
        let named =
            self.gpus
                .merge(listed)
                .map_err(|c: Box<GpuConflict>| TunerError::BadInput {
                    field: "the measurements".into(),
                    value: c.to_string(),
                    allowed: "one model for each GPU of a node, over every source that lists it: \
                          which GPU the node's records ran on cannot be told"
                        .into(),
                })?;
        for node in named {
            if let Some(model) = self.gpus.model_of(&node) {
                let model = model.to_string();
                self.gpu_models.insert(node, model);
            }
        }
        Ok(())
    }

    /// The GPU model a record ran on, as its source names it: the record's own statement
    /// (tables, logs, microbench's records), else its node's (snapshots, Prometheus).
    pub fn gpu_model_of<'a>(&'a self, r: &'a Record) -> Option<&'a str> {
        r.detail.gpu_model.as_deref().or_else(|| {
            r.group
                .node
                .as_ref()
                .and_then(|n| self.gpu_models.get(n))
                .map(String::as_str)
        })
    }

    /// Drops records older than `max_age_s` at `now` (records without a timestamp, such as
    /// imported logs, are kept) and names what was dropped, what is simulated and the nodes
    /// whose GPUs name more than one model.
    pub fn screen(&mut self, now: f64, max_age_s: Option<f64>) {
        if let Some(max_age) = max_age_s {
            let before = self.records.len();
            let mut stale_nodes: Vec<String> = Vec::new();
            self.records.retain(|r| {
                let fresh = r.timestamp.is_none_or(|t| now - t <= max_age);
                if !fresh {
                    let node = r.group.node.clone().unwrap_or_else(|| "unknown".into());
                    if !stale_nodes.contains(&node) {
                        stale_nodes.push(node);
                    }
                }
                fresh
            });
            let dropped = before - self.records.len();
            if dropped > 0 {
                self.notes.push(format!(
                    "{dropped} records older than --max-age {max_age:.0} s dropped (nodes {}); their terms fall back to catalog figures",
                    stale_nodes.join(", ")
                ));
            }
        }
        // The same file passed twice or a series returned twice would weigh double in the
        // fits (issue 13), and of records that disagree the one kept must not depend on the
        // order they came in (issue 31, item 2).
        let resolved = points::one_per_point(&mut self.records);
        self.notes.extend(resolved);
        // Named once, over every source read.
        self.notes.extend(self.gpus.mixed_notes());
        let sim = self
            .records
            .iter()
            .filter(|r| r.backend == Backend::Sim)
            .count();
        if sim > 0 {
            self.notes.push(format!("{sim} records come from the sim backend: a model of the hardware, not a measurement of it"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{Clock, Dtype, Group, Kind, Scope, Timing};

    fn rec(ts: Option<f64>, backend: Backend) -> Record {
        let mut r = Record::transfer(
            Kind::AllReduce,
            backend,
            Group {
                node: Some("n1".into()),
                gpus: vec![0, 1],
                scope: Scope::IntraNode,
                ranks: 2,
            },
            1 << 20,
            Dtype::Bf16,
            Timing::without_spread(1e-4, Some(20), Clock::CudaEvent),
        );
        r.timestamp = ts;
        r
    }

    #[test]
    fn duplicates_count_once_and_are_named() {
        let mut m = Measurements {
            records: vec![
                rec(Some(5.0), Backend::Nccl),
                rec(Some(5.0), Backend::Nccl),
                rec(Some(6.0), Backend::Nccl),
                rec(None, Backend::Nccl),
                rec(None, Backend::Nccl),
            ],
            ..Default::default()
        };
        let mut other_run = rec(None, Backend::Nccl);
        other_run.timing.time_s = 2e-4;
        m.records.push(other_run);
        m.screen(10.0, None);
        // The point measured at 5 and again at 6 with the same value is kept once, at 6.
        assert_eq!(m.records.len(), 3, "{:?}", m.records);
        assert_eq!(m.records[0].timestamp, Some(6.0));
        assert!(
            m.notes[0].starts_with("3 duplicate records dropped"),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn stale_and_sim_records_are_named() {
        let mut m = Measurements {
            records: vec![
                rec(Some(0.0), Backend::Nccl),
                rec(Some(990.0), Backend::Nccl),
                rec(None, Backend::Sim),
            ],
            ..Default::default()
        };
        m.screen(1000.0, Some(100.0));
        assert_eq!(m.records.len(), 2);
        assert!(
            m.notes[0].contains("1 records older than --max-age 100 s")
                && m.notes[0].contains("n1"),
            "{:?}",
            m.notes
        );
        assert!(m.notes[1].contains("sim backend"), "{:?}", m.notes);
    }
}
