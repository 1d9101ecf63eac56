//! Plots: one chart per experiment, as SVG and PNG.

use crate::output::{Results, Row};
use plotters::prelude::*;
use std::path::Path;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a system font for text layout (both backends measure text with it). Returns
/// whether one was found.
fn register_font() -> bool {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

struct Series {
    label: String,
    points: Vec<(f64, f64)>,
}

/// x axis of an experiment: threads, or objects for object-spectrum.
fn series(rows: &[&Row]) -> (String, bool, Vec<Series>) {
    let by_objects = rows.iter().any(|r| r.experiment == "object-spectrum");
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let Some(v) = r.ops_per_sec else { continue };
        let label = if by_objects {
            format!("{} {}T", r.scheme, r.threads)
        } else {
            r.scheme.clone()
        };
        let label = match r.extra.get("migrate_every") {
            Some(m) => format!("{label} every {m}"),
            None => label,
        };
        let x = if by_objects {
            r.objects as f64
        } else {
            r.threads as f64
        };
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((x, v / 1e6)),
            None => out.push(Series {
                label,
                points: vec![(x, v / 1e6)],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    (
        if by_objects {
            "objects".into()
        } else {
            "threads".into()
        },
        by_objects,
        out,
    )
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    rows: &[&Row],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (xlabel, logx, series) = series(rows);
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        * 1.15
        + 1e-9;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            if logx {
                0.0..(xmax.log2() + 0.5)
            } else {
                0.5..(xmax + 0.5)
            },
            0.0..ymax,
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(if logx {
            format!("{xlabel} (log2)")
        } else {
            xlabel
        })
        .y_desc("M get+put pairs/s")
        .x_label_formatter(&|x| {
            if logx {
                format!("{}", 2f64.powf(*x).round())
            } else {
                format!("{x:.0}")
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (if logx { x.log2() } else { x }, y))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes `<dir>/<experiment>.svg` and `.png` for every experiment with throughput rows.
/// Returns the files written.
pub fn write_plots(results: &Results, dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut written = Vec::new();
    if !register_font() {
        eprintln!(
            "refbench: no TrueType font found ({}); plots skipped (install fonts-dejavu-core)",
            FONT_PATHS.join(", ")
        );
        return Ok(written);
    }
    let mut experiments: Vec<&str> = results.rows.iter().map(|r| r.experiment.as_str()).collect();
    experiments.dedup();
    for exp in experiments {
        let rows: Vec<&Row> = results
            .rows
            .iter()
            .filter(|r| r.experiment == exp && r.ops_per_sec.is_some())
            .collect();
        if rows.is_empty() {
            continue;
        }
        let title = format!(
            "{exp} ({} CPUs, {})",
            results.meta.online_cpus, results.meta.percpu_mode
        );
        let svg = dir.join(format!("{exp}.svg"));
        draw(
            SVGBackend::new(&svg, (900, 560)).into_drawing_area(),
            &title,
            &rows,
        )?;
        written.push(svg);
        let png = dir.join(format!("{exp}.png"));
        draw(
            BitMapBackend::new(&png, (900, 560)).into_drawing_area(),
            &title,
            &rows,
        )?;
        written.push(png);
    }
    Ok(written)
}
