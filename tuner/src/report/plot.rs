//! `tuner fit --plot`: one panel per collective and rank count, with the measured points, the
//! fitted fleet curve (red) and the catalog line (black), on log-log axes. SVG needs no fonts;
//! PNG rasterises its labels with a TrueType font found on the machine.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use record::Record;

use crate::catalog::{Cluster, NOMINAL};
use crate::cost::collective::{Collective, NominalCollectives};
use crate::error::TunerError;
use crate::fit::{measured_group, members_per_node, Fits};

const COLS: usize = 3;
const PANEL: (u32, u32) = (400, 360);

fn size(fits: &Fits) -> (u32, u32) {
    let panels = fits
        .fleet
        .iter()
        .filter(|f| Collective::of(f.kind).is_some())
        .count();
    (
        PANEL.0 * COLS as u32,
        PANEL.1 * panels.div_ceil(COLS).max(1) as u32,
    )
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fits: &Fits,
    records: &[Record],
    cluster: &Cluster,
) {
    let _ = root.fill(&WHITE);
    let panels: Vec<_> = fits
        .fleet
        .iter()
        .filter(|f| Collective::of(f.kind).is_some())
        .collect();
    let areas = root.split_evenly((panels.len().div_ceil(COLS).max(1), COLS));
    let nominal = NominalCollectives::new(cluster, &NOMINAL);
    for (area, f) in areas.iter().zip(&panels) {
        let Some(c) = Collective::of(f.kind) else {
            continue;
        };
        let pts: Vec<(f64, f64)> = records
            .iter()
            .filter(|r| {
                r.kind == f.kind
                    && r.group.scope == f.scope
                    && r.group.ranks == f.ranks
                    && members_per_node(r) == f.members_per_node
                    && r.detail.nvlink_domains == f.nvlink_domains
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
        let group = measured_group(
            f.scope,
            f.ranks,
            f.members_per_node,
            f.nvlink_domains,
            cluster,
        );
        let title = format!(
            "{} x{} ({}/node) {}: fleet {:.0} GB/s, nominal {:.0} GB/s",
            f.kind.as_str(),
            f.ranks,
            f.members_per_node,
            f.scope.as_str(),
            f.busbw_bytes_per_s / 1e9,
            nominal.sweep_busbw(c, &group) / 1e9
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
            .x_labels(6)
            .x_label_formatter(&|x| binary(*x))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw();
        let _ = chart.draw_series(pts.iter().map(|&p| Circle::new(p, 2, BLUE.filled())));
        let xs: Vec<f64> = (0..=60)
            .map(|i| xmin * (xmax / xmin).powf(f64::from(i) / 60.0))
            .collect();
        let fitted = xs.iter().map(|&x| (x, f.curve.time_s(x) * 1e6));
        let _ = chart.draw_series(LineSeries::new(fitted, RED.stroke_width(2)));
        let catalog = xs
            .iter()
            .map(|&x| (x, nominal.sweep_time_s(c, &group, x) * 1e6));
        let _ = chart.draw_series(LineSeries::new(catalog, BLACK.stroke_width(1)));
    }
    let _ = root.present();
}

/// 1024 -> 1K, 2^30 -> 1G.
fn binary(x: f64) -> String {
    let (v, unit) = [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]
        .iter()
        .find(|(d, _)| x >= *d as f64)
        .map_or((x, ""), |(d, u)| (x / *d as f64, *u));
    format!("{v:.0}{unit}")
}

/// Renders the plot as an SVG document.
pub fn svg(fits: &Fits, records: &[Record], cluster: &Cluster) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size(fits)).into_drawing_area();
        draw(&root, fits, records, cluster);
    }
    out
}

/// Fonts tried for PNG labels, after `MESHFIT_FONT`.
const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// Renders the plot into a PNG file.
pub fn png(
    fits: &Fits,
    records: &[Record],
    cluster: &Cluster,
    path: &Path,
) -> Result<(), TunerError> {
    let candidates = std::env::var("MESHFIT_FONT")
        .into_iter()
        .chain(FONTS.iter().map(|s| s.to_string()));
    let font = candidates.filter_map(|p| std::fs::read(p).ok()).next().ok_or_else(|| TunerError::BadInput {
        field: "--plot".into(),
        value: path.display().to_string(),
        allowed: format!("an .svg path, or a PNG with a TrueType font for its labels: set MESHFIT_FONT (looked in {})", FONTS.join(", ")),
    })?;
    // plotters keeps registered fonts for the life of the process.
    let font: &'static [u8] = Box::leak(font.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font).map_err(|_| {
        TunerError::BadInput {
            field: "MESHFIT_FONT".into(),
            value: "the font file".into(),
            allowed: "a TrueType font".into(),
        }
    })?;
    let root = BitMapBackend::new(path, size(fits)).into_drawing_area();
    draw(&root, fits, records, cluster);
    Ok(())
}
