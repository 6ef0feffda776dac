//! The GPUs each node's sources list, by index, under one rule wherever a node is listed
//! more than once (issue 31, item 2): a snapshot that lists it twice, a Prometheus whose
//! series name its GPU twice (two agents or targets), two sources that both list it. An
//! identical listing adds nothing; one GPU index named as two models is refused, naming the
//! node, the GPU and both models in words that do not depend on which came first; a node is
//! taken as its lowest GPU index's model.

use std::collections::BTreeMap;
use std::fmt;

/// Each node's GPUs by index, with what listed them.
#[derive(Debug, Clone, Default)]
pub struct NodeGpus {
    nodes: BTreeMap<String, BTreeMap<u32, Listed>>,
}

/// One GPU's model and the source that listed it (of several that listed it so, the first
/// by name, so that nothing said of it depends on the order they were read in).
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    model: String,
    by: String,
}

/// One GPU index of a node listed as two models: the models in order, each with the source
/// that listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuConflict {
    /// The node.
    pub node: String,
    /// The GPU index.
    pub index: u32,
    /// The lesser model and its source.
    pub a: (String, String),
    /// The greater model and its source.
    pub b: (String, String),
}

impl fmt::Display for GpuConflict {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let ((a, by_a), (b, by_b)) = (&self.a, &self.b);
        write!(
            f,
            "node {} GPU {} is listed as two models, {a:?} and {b:?}",
            self.node, self.index
        )?;
        if by_a != by_b {
            write!(f, ", by {by_a} and {by_b} respectively")?;
        }
        Ok(())
    }
}

impl NodeGpus {
    /// Lists GPU `index` of `node` as `model`, as source `by` names it; refused where the
    /// GPU is listed as another model already.
    pub fn list(
        &mut self,
        node: &str,
        index: u32,
        model: &str,
        by: &str,
    ) -> Result<(), Box<GpuConflict>> {
        let gpus = match self.nodes.get_mut(node) {
            Some(gpus) => gpus,
            None => self.nodes.entry(node.to_string()).or_default(),
        };
        match gpus.get_mut(&index) {
            None => {
                gpus.insert(
                    index,
                    Listed {
                        model: model.to_string(),
                        by: by.to_string(),
                    },
                );
                Ok(())
            }
            Some(listed) => listed.take(node, index, model, by),
        }
    }

    /// Takes in the GPUs `other` lists, each as [`NodeGpus::list`] does, and returns the
    /// nodes it lists; where one GPU is refused nothing is taken.
    pub fn merge(&mut self, other: NodeGpus) -> Result<Vec<String>, Box<GpuConflict>> {
        for (node, gpus) in &other.nodes {
            let Some(ours) = self.nodes.get(node) else {
                continue;
            };
            for (index, theirs) in gpus {
                if let Some(listed) = ours.get(index) {
                    listed
                        .clone()
                        .take(node, *index, &theirs.model, &theirs.by)?;
                }
            }
        }
        let named: Vec<String> = other.nodes.keys().cloned().collect();
        for (node, gpus) in other.nodes {
            let ours = self.nodes.entry(node.clone()).or_default();
            for (index, theirs) in gpus {
                match ours.get_mut(&index) {
                    None => {
                        ours.insert(index, theirs);
                    }
                    Some(listed) => listed.take(&node, index, &theirs.model, &theirs.by)?,
                }
            }
        }
        Ok(named)
    }

    /// The nodes listed, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// The model of `node`: its lowest GPU index's.
    pub fn model_of(&self, node: &str) -> Option<&str> {
        let gpus = self.nodes.get(node)?;
        gpus.values().next().map(|l| l.model.as_str())
    }

    /// The GPUs of `node`, by index.
    pub fn gpus_of<'a>(&'a self, node: &str) -> impl Iterator<Item = (u32, &'a str)> + 'a {
        self.nodes
            .get(node)
            .into_iter()
            .flat_map(|gpus| gpus.iter().map(|(i, l)| (*i, l.model.as_str())))
    }

    /// A note for each node whose GPUs name more than one model.
    pub fn mixed_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for (node, gpus) in &self.nodes {
            let mut named = gpus.iter();
            let Some((index, first)) = named.next() else {
                continue;
            };
            if named.any(|(_, l)| l.model != first.model) {
                let each: Vec<String> = gpus
                    .iter()
                    .map(|(i, l)| format!("{i}: {}", l.model))
                    .collect();
                notes.push(format!(
                    "node {node}'s GPUs name more than one model ({}); its records that name \
                     no GPU model of their own are taken as GPU {index}'s, {}",
                    each.join(", "),
                    first.model
                ));
            }
        }
        notes
    }
}

impl Listed {
    /// Takes a second listing of this GPU, GPU `index` of `node`: the same model adds
    /// nothing (its source is kept where it is first by name), another is refused.
    fn take(
        &mut self,
        node: &str,
        index: u32,
        model: &str,
        by: &str,
    ) -> Result<(), Box<GpuConflict>> {
        if self.model != model {
            let theirs = (model.to_string(), by.to_string());
            let ours = (self.model.clone(), self.by.clone());
            let (a, b) = if ours < theirs {
                (ours, theirs)
            } else {
                (theirs, ours)
            };
            return Err(Box::new(GpuConflict {
                node: node.to_string(),
                index,
                a,
                b,
            }));
        }
        if by < self.by.as_str() {
            self.by = by.to_string();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule in either order: identical listings collapse, one GPU as two models is
    /// refused in the same words, the node is its lowest index's model.
    #[test]
    fn a_gpu_listed_twice_is_one_gpu_or_refused_in_either_order() {
        let listing = |order: &[(u32, &str, &str)]| {
            let mut g = NodeGpus::default();
            for (i, model, by) in order {
                g.list("n1", *i, model, by)?;
            }
            Ok::<_, Box<GpuConflict>>((g.model_of("n1").map(String::from), g.mixed_notes()))
        };
        let same = [(1, "H", "b.json"), (1, "H", "a.json"), (0, "A", "a.json")];
        let mut reversed = same;
        reversed.reverse();
        assert_eq!(listing(&same), listing(&reversed));
        assert_eq!(listing(&same).unwrap().0.as_deref(), Some("A"));
        let two = [(1, "H", "b.json"), (1, "A", "a.json")];
        let err = listing(&two).unwrap_err();
        assert_eq!(Err(err.clone()), listing(&[two[1], two[0]]));
        assert_eq!(
            err.to_string(),
            r#"node n1 GPU 1 is listed as two models, "A" and "H", by a.json and b.json respectively"#
        );
        let mut one = NodeGpus::default();
        one.list("n1", 1, "H", "x").unwrap();
        let mut other = NodeGpus::default();
        other.list("n1", 1, "A", "y").unwrap();
        other.list("n2", 0, "A", "y").unwrap();
        assert!(one.merge(other).is_err());
        assert_eq!(one.model_of("n2"), None, "a refused merge takes nothing");
    }
}
