//! The `nvidia-smi topo -m` table: printing a [`Topology`] like nvidia-smi does, and reading
//! one back from a log (tests use the 8 x V100 hybrid cube-mesh printed in nccl-tests issue 37;
//! the sim's DGX-1 profile is built from it).

use super::{Link, Topology};
use std::fmt::Write as _;

/// The table's content: GPU and NIC rows, affinities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    /// `gpu_links[i][j]`, with [`Link::Itself`] on the diagonal; `None` for a pair discovery
    /// could not place, printed `N/A` (nvidia-smi itself always names a path).
    pub gpu_links: Vec<Vec<Option<Link>>>,
    /// `CPU Affinity` per GPU.
    pub cpu_affinity: Vec<String>,
    /// `NUMA Affinity` per GPU, when the table has that column.
    pub numa_affinity: Option<Vec<String>>,
    /// NIC names in column order (`NIC0` is the first).
    pub nics: Vec<String>,
    /// `gpu_nic[g][n]`: how GPU g reaches NIC n.
    pub gpu_nic: Vec<Vec<Link>>,
    /// `nic_nic[a][b]`.
    pub nic_nic: Vec<Vec<Link>>,
}

/// A `topo -m` table that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    /// No header line (`<tab>GPU0<tab>GPU1...`).
    #[error("no `nvidia-smi topo -m` header (a line of GPU0, GPU1, ... columns) found")]
    NoHeader,
    /// A row does not fit the header.
    #[error("topo -m line {line}: {reason}")]
    BadRow {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

const LEGEND: &str = "
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
";

impl From<&Topology> for Matrix {
    fn from(t: &Topology) -> Matrix {
        let numa: Vec<Option<u32>> = t.gpus.iter().map(|g| g.numa_node).collect();
        Matrix {
            gpu_links: t.links.clone(),
            cpu_affinity: t.gpus.iter().map(|g| g.cpu_affinity.clone()).collect(),
            numa_affinity: numa.iter().any(Option::is_some).then(|| {
                numa.iter()
                    .map(|n| n.map_or("N/A".to_string(), |n| n.to_string()))
                    .collect()
            }),
            nics: t.nics.iter().map(|n| n.name.clone()).collect(),
            gpu_nic: (0..t.gpus.len())
                .map(|g| t.nics.iter().map(|n| n.gpu_links[g]).collect())
                .collect(),
            nic_nic: t.nics.iter().map(|n| n.nic_links.clone()).collect(),
        }
    }
}

fn cell(link: Option<Link>) -> String {
    match link {
        Some(Link::Itself) => " X ".to_string(),
        Some(other) => other.to_string(),
        None => "N/A".to_string(),
    }
}

impl Matrix {
    /// The table alone, tab-separated exactly as nvidia-smi prints it.
    pub fn render_table(&self) -> String {
        let mut out = String::new();
        for g in 0..self.gpu_links.len() {
            let _ = write!(out, "\tGPU{g}");
        }
        for n in 0..self.nics.len() {
            let _ = write!(out, "\tNIC{n}");
        }
        out.push_str("\tCPU Affinity");
        if self.numa_affinity.is_some() {
            out.push_str("\tNUMA Affinity");
        }
        out.push('\n');
        for (g, row) in self.gpu_links.iter().enumerate() {
            let _ = write!(out, "GPU{g}");
            for link in row
                .iter()
                .copied()
                .chain(self.gpu_nic[g].iter().map(|&l| Some(l)))
            {
                let _ = write!(out, "\t{}", cell(link));
            }
            let _ = write!(out, "\t{}", self.cpu_affinity[g]);
            if let Some(numa) = &self.numa_affinity {
                let _ = write!(out, "\t{}", numa[g]);
            }
            out.push('\n');
        }
        for (n, row) in self.nic_nic.iter().enumerate() {
            let _ = write!(out, "NIC{n}");
            for &link in self.gpu_nic.iter().map(|r| &r[n]).chain(row) {
                let _ = write!(out, "\t{}", cell(Some(link)));
            }
            out.push('\n');
        }
        out
    }

    /// The table followed by nvidia-smi's legend and NIC legend.
    pub fn render(&self) -> String {
        let mut out = self.render_table();
        out.push_str(LEGEND);
        if !self.nics.is_empty() {
            out.push_str("\nNIC Legend:\n\n");
            for (n, name) in self.nics.iter().enumerate() {
                let _ = writeln!(out, "  NIC{n}: {name}");
            }
        }
        out
    }

    /// Reads the first `topo -m` table in `text` (other lines are ignored).
    pub fn parse(text: &str) -> Result<Matrix, MatrixError> {
        let lines: Vec<&str> = text.lines().collect();
        let header_at = lines
            .iter()
            .position(|l| l.trim_start().starts_with("GPU0") && l.contains('\t'))
            .ok_or(MatrixError::NoHeader)?;
        let columns: Vec<&str> = lines[header_at]
            .split('\t')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let gpus = columns.iter().filter(|c| is_device(c, "GPU")).count();
        let nics = columns.iter().filter(|c| is_device(c, "NIC")).count();
        let has_numa = columns.contains(&"NUMA Affinity");
        let mut m = Matrix {
            gpu_links: Vec::new(),
            cpu_affinity: Vec::new(),
            numa_affinity: has_numa.then(Vec::new),
            nics: (0..nics).map(|n| format!("NIC{n}")).collect(),
            gpu_nic: Vec::new(),
            nic_nic: Vec::new(),
        };
        for (i, line) in lines.iter().enumerate().skip(header_at + 1) {
            let line_no = i + 1;
            let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
            let bad = |reason: String| MatrixError::BadRow {
                line: line_no,
                reason,
            };
            let Some(name) = cells.first() else { continue };
            let is_gpu = is_device(name, "GPU");
            if !is_gpu && !is_device(name, "NIC") {
                if let Some(nic) = line
                    .trim()
                    .strip_prefix("NIC")
                    .and_then(|r| r.split_once(':'))
                {
                    // NIC legend: `NIC0: mlx5_0`.
                    if let Ok(n) = nic.0.parse::<usize>() {
                        if n < m.nics.len() {
                            m.nics[n] = nic.1.trim().to_string();
                        }
                    }
                }
                continue;
            }
            let links: Vec<Link> = cells[1..]
                .iter()
                .take(gpus + nics)
                .map(|c| c.parse::<Link>().map_err(|e| bad(e.to_string())))
                .collect::<Result<_, _>>()?;
            if links.len() < gpus + nics {
                return Err(bad(format!(
                    "{} link columns, the header has {}",
                    links.len(),
                    gpus + nics
                )));
            }
            if is_gpu {
                let rest = &cells[1 + gpus + nics..];
                let affinity = rest
                    .first()
                    .ok_or_else(|| bad("no CPU Affinity column".into()))?;
                m.cpu_affinity.push((*affinity).to_string());
                if let Some(numa) = &mut m.numa_affinity {
                    numa.push(
                        rest.get(1)
                            .ok_or_else(|| bad("no NUMA Affinity column".into()))?
                            .to_string(),
                    );
                }
                m.gpu_nic.push(links[gpus..].to_vec());
                m.gpu_links
                    .push(links[..gpus].iter().copied().map(Some).collect());
            } else {
                m.nic_nic.push(links[gpus..].to_vec());
            }
        }
        if m.gpu_links.len() != gpus {
            return Err(MatrixError::BadRow {
                line: header_at + 1,
                reason: format!(
                    "header has {gpus} GPU columns but {} GPU rows follow",
                    m.gpu_links.len()
                ),
            });
        }
        Ok(m)
    }
}

fn is_device(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V100_LOG: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/nccl-tests/nccl-tests-37_v100-sxm2-x8-nvlink_all_gather.txt"
    ));

    /// The table as printed in the log, from its header line on.
    fn printed_table() -> String {
        let from = V100_LOG.find("\tGPU0").unwrap();
        V100_LOG[from..].lines().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn v100_hybrid_cube_mesh_renders_as_recorded() {
        let m = Matrix::parse(V100_LOG).unwrap();
        assert_eq!(m.gpu_links.len(), 8);
        // The cube-mesh: GPU0 has NV1 to 1 and 2, NV2 to 3 and 6, and no NVLink to 4, 5, 7.
        assert_eq!(m.gpu_links[0][3], Some(Link::NvLink(2)));
        assert_eq!(m.gpu_links[0][4], Some(Link::Sys));
        assert_eq!(m.render_table(), printed_table());
        assert!(m
            .render()
            .contains("NV#  = Connection traversing a bonded set of # NVLinks"));
    }

    #[test]
    fn nic_columns_rows_and_legend_round_trip() {
        let text = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n\
GPU0\t X \tNV18\tPIX\t0-55\t0\n\
GPU1\tNV18\t X \tSYS\t56-111\t1\n\
NIC0\tPIX\tSYS\t X \n\
\nNIC Legend:\n\n  NIC0: mlx5_0\n";
        let m = Matrix::parse(text).unwrap();
        assert_eq!(m.nics, vec!["mlx5_0"]);
        assert_eq!(m.gpu_nic, vec![vec![Link::Pix], vec![Link::Sys]]);
        assert_eq!(
            m.numa_affinity,
            Some(vec!["0".to_string(), "1".to_string()])
        );
        assert!(text.starts_with(&m.render_table()));
        assert!(m.render().ends_with("NIC Legend:\n\n  NIC0: mlx5_0\n"));
    }

    #[test]
    fn bad_cells_name_their_line() {
        let err = Matrix::parse("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV\t0-3\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "topo -m line 2: link `NV`: expected X, NV<n>, PIX, PXB, PHB, NODE or SYS"
        );
    }
}
