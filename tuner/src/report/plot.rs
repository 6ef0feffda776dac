//! `tuner fit --plot`: one panel per collective and rank count, with the measured points, the
//! fitted fleet curve and the catalog line, on log-log axes. SVG only: text needs no fonts.

use plotters::prelude::*;
use record::{Kind, Record, Scope};

use crate::catalog::{Cluster, NOMINAL};
use crate::cost::collective::{Collective, CollectiveModel, NominalCollectives};
use crate::fit::Fits;
use crate::placement::span;

fn collective(kind: Kind) -> Option<Collective> {
    Some(match kind {
        Kind::AllReduce => Collective::AllReduce,
        Kind::AllGather => Collective::AllGather,
        Kind::ReduceScatter => Collective::ReduceScatter,
        Kind::AllToAll => Collective::AllToAll,
        Kind::SendRecv => Collective::SendRecv,
        _ => return None,
    })
}

/// Renders the plot as an SVG document.
pub fn svg(fits: &Fits, records: &[Record], cluster: &Cluster) -> String {
    let panels: Vec<_> = fits
        .fleet
        .iter()
        .filter(|f| collective(f.kind).is_some())
        .collect();
    let cols = 3usize;
    let rows = panels.len().div_ceil(cols).max(1);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1200, 360 * rows as u32)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let areas = root.split_evenly((rows, cols));
        let nominal = NominalCollectives::new(cluster, &NOMINAL);
        for (area, f) in areas.iter().zip(&panels) {
            let Some(c) = collective(f.kind) else {
                continue;
            };
            let pts: Vec<(f64, f64)> = records
                .iter()
                .filter(|r| {
                    r.kind == f.kind
                        && r.group.scope == f.scope
                        && r.group.ranks == f.ranks
                        && !r.in_place
                })
                .map(|r| (r.bytes as f64, r.timing.time_s * 1e6))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let (xmin, xmax) = pts
                .iter()
                .fold((f64::MAX, 0.0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
            let (ymin, ymax) = pts
                .iter()
                .fold((f64::MAX, 0.0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
            let stride = if f.scope == Scope::InterNode {
                cluster.gpus_per_node
            } else {
                1
            };
            let group = span(f.ranks, stride, cluster);
            let title = format!(
                "{} x{} {}: fleet {:.0} GB/s, nominal {:.0} GB/s",
                f.kind.as_str(),
                f.ranks,
                f.scope.as_str(),
                f.busbw_bytes_per_s / 1e9,
                nominal.busbw(&group) / 1e9
            );
            let Ok(mut chart) = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(50)
                .build_cartesian_2d(
                    (xmin..xmax).log_scale(),
                    ((ymin * 0.5)..(ymax * 2.0)).log_scale(),
                )
            else {
                continue;
            };
            let _ = chart
                .configure_mesh()
                .x_desc("bytes")
                .y_desc("time (us)")
                .draw();
            let _ = chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 2, BLUE.filled())))
                .map(|s| s.label("measured"));
            let xs: Vec<f64> = (0..=60)
                .map(|i| xmin * (xmax / xmin).powf(f64::from(i) / 60.0))
                .collect();
            let fitted = xs
                .iter()
                .map(|&x| (x, (f.alpha_s + x / f.beta_bytes_per_s) * 1e6));
            let _ = chart.draw_series(LineSeries::new(fitted, RED.stroke_width(2)));
            let nominal_line = xs.iter().map(|&x| (x, nominal.time_s(c, &group, x) * 1e6));
            let _ = chart.draw_series(LineSeries::new(nominal_line, BLACK.stroke_width(1)));
        }
        let _ = root.present();
    }
    out
}
