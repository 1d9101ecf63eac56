//! Plots: one chart per experiment, as SVG and PNG.

use crate::output::{Results, Row};
use plotters::prelude::*;
use std::path::Path;

/// The font every plot is drawn with, compiled in: DejaVu Sans, cut down to Latin-1 and a few
/// symbols (`assets/DejaVuSans-subset.ttf`; license in `assets/LICENSE-DejaVu.txt`). Plots never
/// read a font from the system, so they look the same on a machine with no fonts installed.
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");

/// Registers [`FONT`] as "sans-serif" for both backends (once).
fn register_font() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the compiled-in font does not parse".to_string())
    })
    .clone()
}

struct Series {
    label: String,
    /// Series with the same key share a colour (a scheme's `single` and `batched` query rows).
    key: String,
    /// Drawn dashed (the `batched` form).
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// What the x axis of an experiment's plot shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum XAxis {
    /// Thread counts.
    Threads,
    /// Object counts (log scale): `object-spectrum`, a series per scheme and thread count.
    Objects,
    /// Mapped share in percent (`lodic-query`, linear).
    Share,
    /// File size in MiB (log scale): `file-spectrum` and `drop-file` (the papers' Figures 10
    /// and 13), and `randomread` run over several file counts (number of 1 MiB files).
    Files,
}

/// The x axis of `rows` (one experiment's), by experiment and by whether the rows span
/// several object counts.
fn x_axis(rows: &[&Row]) -> XAxis {
    let exp = rows.first().map_or("", |r| r.experiment.as_str());
    let several = rows.iter().any(|r| r.objects != rows[0].objects);
    match exp {
        "lodic-query" => XAxis::Share,
        "object-spectrum" => XAxis::Objects,
        "file-spectrum" | "drop-file" => XAxis::Files,
        "randomread" if several => XAxis::Files,
        _ => XAxis::Threads,
    }
}

/// The series of a plot, its x axis caption, and whether that axis is logarithmic.
///
/// A plot by file size draws one thread count only, the largest (the paper's figures are at
/// one core count; every count stays in the CSV and JSON), and `drop-file` a series per
/// scheme with and without its background reader.
fn series(rows: &[&Row]) -> (String, bool, Vec<Series>) {
    let axis = x_axis(rows);
    let exp = rows.first().map_or("", |r| r.experiment.as_str());
    let most = rows.iter().map(|r| r.threads).max().unwrap_or(1);
    // The CPUs a row's per-CPU structures were sized for, where the rows say: `reproduce` adds
    // to `query`'s rows those of a run sized for 16 CPUs, a series of their own.
    let cpus = |r: &Row| r.extra.get("cpus").and_then(|c| c.as_u64());
    let several_cpus = rows
        .iter()
        .any(|r| cpus(r) != rows.first().and_then(|f| cpus(f)));
    let several_objects = rows.iter().any(|r| r.objects != rows[0].objects);
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let Some(v) = r.ops_per_sec else { continue };
        let background = r.extra.get("background").and_then(|b| b.as_u64());
        if axis == XAxis::Files && background.is_none() && r.threads != most {
            continue;
        }
        let label = match axis {
            XAxis::Objects | XAxis::Share => format!("{} {}T", r.scheme, r.threads),
            // Drawn by threads over several object counts (`query --objects 10,1000`): a
            // series per count (one series would go up and down at each thread count).
            XAxis::Threads if several_objects => format!("{} {} objects", r.scheme, r.objects),
            _ => r.scheme.clone(),
        };
        let label = match r.extra.get("migrate_every") {
            Some(m) => format!("{label} every {m}"),
            None => label,
        };
        // One series per k of `oplog-read-ratio` (its rows of every k were one series, a line
        // back and forth over the same thread counts).
        let label = match r.extra.get("read_every") {
            Some(k) => format!("{label} k={k}"),
            None => label,
        };
        let label = match cpus(r) {
            Some(n) if several_cpus => format!("{label} ({n} CPUs)"),
            _ => label,
        };
        let key = label.clone();
        // A second form of the same series, in its colour but dashed: a batched query, a drop
        // with background readers, readers with a reclaimer (`reclaim-pressure`, whose rows
        // with and without one were one series).
        let reclaimer = r.extra.get("reclaimer").and_then(|b| b.as_bool());
        let (form, dashed) = match (r.extra.get("form").and_then(|f| f.as_str()), background) {
            (Some(f), _) => (Some(f.to_string()), f == "batched"),
            (None, Some(b)) if b > 0 => (Some(format!("+{b} reader")), true),
            _ if reclaimer == Some(true) => (Some("+reclaimer".to_string()), true),
            _ => (None, false),
        };
        let label = match form {
            Some(f) => format!("{label} {f}"),
            None => label,
        };
        let x = match axis {
            XAxis::Threads => r.threads as f64,
            _ => r.objects as f64,
        };
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((x, v / 1e6)),
            None => out.push(Series {
                label,
                key,
                dashed,
                points: vec![(x, v / 1e6)],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let caption = match axis {
        XAxis::Threads => "threads".to_string(),
        XAxis::Objects => "objects".to_string(),
        XAxis::Share => "mapped pages (%)".to_string(),
        XAxis::Files if exp == "randomread" => format!("files of 1 MiB, {}", at(most)),
        XAxis::Files if exp == "drop-file" => "file size (MiB)".to_string(),
        XAxis::Files => format!("file size (MiB), {}", at(most)),
    };
    let log = matches!(axis, XAxis::Objects | XAxis::Files);
    (caption, log, out)
}

/// "at N threads".
fn at(threads: usize) -> String {
    match threads {
        1 => "at 1 thread".to_string(),
        n => format!("at {n} threads"),
    }
}

/// Line colours, distinct on white (the "tab10" set).
const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(0, 0, 128),
];

/// A linear `f64` axis with ticks exactly at the given values (the measured thread or object
/// counts, or round values), labelled by the chart's formatter.
struct TickedAxis {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = (self.range.end - self.range.start).max(1e-12);
        let f = (value - self.range.start) / span;
        // In `f64`, and then cast, which saturates: a value far off the axis (a result file's
        // -1e308) maps to the edge of `i32`, where a sum of two `i32`s would overflow.
        (limit.0 as f64 + f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// What one operation of the rows' experiment is, per second, in millions.
fn unit(rows: &[&Row]) -> &'static str {
    match rows.first().map(|r| r.experiment.as_str()) {
        Some("query") => "M reclaims/s",
        Some("oplog-list") => "M add+remove iterations/s",
        Some("oplog-read-ratio") => "M forks/s",
        Some("drop-file" | "lodic-query") => "M pages dropped/s",
        Some("drbh" | "randomread" | "file-spectrum" | "pread-table") => "M reads/s",
        _ => "M get+put pairs/s",
    }
}

/// Tick values for a linear axis from 0 to `max`: steps of 1, 2 or 5 times a power of ten,
/// at most about eight of them.
fn linear_ticks(max: f64) -> Vec<f64> {
    let raw = (max / 8.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|v| *v <= max)
        .collect()
}

/// Whether the positive values span a decade or more (then the y axis is logarithmic).
fn spans_decades(values: &[f64]) -> bool {
    let pos: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
    let (lo, hi) = pos
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    !pos.is_empty() && hi / lo >= 10.0
}

/// A label for a tick (1, 2 or 5 times a power of ten, or a multiple of such a step): an
/// integer where it is one, one decimal from 1 up, and below 1 as many decimals as the value
/// needs, at least two (with two at most, the ticks of a log axis under 0.01, readers at a few
/// thousand pairs per second, would all read 0.00, and a linear tick of 0.015 0.02).
fn label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        // Twelve decimals hold any tick drawn here exactly, but for float noise far below.
        let text = format!("{v:.12}");
        let text = text.trim_end_matches('0');
        match text.split_once('.') {
            Some((_, decimals)) if decimals.len() >= 2 => text.to_string(),
            _ => format!("{v:.2}"),
        }
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    footer: &str,
    rows: &[&Row],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (xlabel, logx, series) = series(rows);
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (_, h) = root.dim_in_pixel();
    let (area, foot) = root.split_vertically(h.saturating_sub(26));
    foot.draw(&Text::new(
        footer.to_string(),
        (12, 4),
        ("sans-serif", 14).into_font().color(&BLACK.mix(0.75)),
    ))
    .map_err(|e| e.to_string())?;
    // The x axis: ticks exactly at the measured values (thread or object counts), on a log2
    // scale for object counts.
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let fx = |x: f64| if logx { x.log2() } else { x };
    let (xlo, xhi) = match (xs.first(), xs.last()) {
        (Some(&a), Some(&b)) => (fx(a), fx(b)),
        _ => (0.0, 1.0),
    };
    let pad = ((xhi - xlo) * 0.05).max(0.5);
    let xticks: Vec<f64> = xs.iter().map(|&x| fx(x)).collect();
    // The y axis: logarithmic where the values span a decade or more.
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let logy = spans_decades(&ys);
    let ymax = ys.iter().copied().fold(0.0, f64::max).max(1e-9);
    let fy = |y: f64| if logy { y.max(1e-9).log10() } else { y };
    let (yrange, yticks) = if logy {
        let ymin = ys
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::MAX, f64::min);
        let (lo, hi) = (ymin.log10().floor(), (ymax * 1.15).log10().ceil());
        let ticks = (lo as i32..=hi as i32)
            .flat_map(|e| [1.0, 2.0, 5.0].map(|m| (m * 10f64.powi(e)).log10()))
            .filter(|t| *t >= lo && *t <= hi)
            .collect();
        (lo..hi, ticks)
    } else {
        (0.0..ymax * 1.15, linear_ticks(ymax * 1.15))
    };
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            TickedAxis {
                range: (xlo - pad)..(xhi + pad),
                ticks: xticks,
            },
            TickedAxis {
                range: yrange,
                ticks: yticks,
            },
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(if logx {
            format!("{xlabel} (log scale)")
        } else {
            xlabel
        })
        .y_desc(if logy {
            format!("{} (log scale)", unit(rows))
        } else {
            unit(rows).to_string()
        })
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .x_label_formatter(&|x| label(if logx { 2f64.powf(*x) } else { *x }))
        .y_label_formatter(&|y| label(if logy { 10f64.powf(*y) } else { *y }))
        .draw()
        .map_err(|e| e.to_string())?;
    let mut keys: Vec<&str> = Vec::new();
    for s in &series {
        if !keys.contains(&s.key.as_str()) {
            keys.push(&s.key);
        }
    }
    for s in &series {
        let i = keys.iter().position(|k| *k == s.key).unwrap_or(0);
        let color = COLORS[i % COLORS.len()].to_rgba();
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (fx(x), fy(y))).collect();
        let style = color.stroke_width(2);
        let drawn = if s.dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style))
        };
        let dashed = s.dashed;
        drawn
            .map_err(|e| e.to_string())?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                if dashed {
                    PathElement::new(vec![(x, y), (x + 7, y)], style)
                } else {
                    PathElement::new(vec![(x, y), (x + 18, y)], style)
                }
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes `<dir>/<experiment>.svg` and `.png` for every experiment with throughput rows, each
/// with the machine and the commit under it. Adds each file to `written` as it is written (none
/// for experiments without throughput rows, such as `memory` and `tsc-check`), so that those
/// written before a failure are known.
pub fn write_plots(
    results: &Results,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> Result<(), String> {
    let m = &results.meta;
    let footer = footer(
        &m.cpu_model,
        &m.online_cpus.to_string(),
        Some(&m.allowed_cpus.to_string()),
        &m.kernel,
        &m.percpu_mode,
        &m.git_commit,
    );
    write_plots_of(&results.rows, &footer, dir, written)
}

/// The line under every plot: the machine and the commit it was measured at (`allowed`, the
/// CPUs the run's process could use, as [`crate::meta::allowed_suffix`] takes it).
pub fn footer(
    cpu_model: &str,
    online_cpus: &str,
    allowed: Option<&str>,
    kernel: &str,
    mode: &str,
    commit: &str,
) -> String {
    let allowed = crate::meta::allowed_suffix(online_cpus, allowed);
    format!(
        "{cpu_model} | {online_cpus} online CPUs{allowed} | kernel {kernel} | per-CPU path: {mode} | commit {}",
        commit.chars().take(12).collect::<String>()
    )
}

/// [`write_plots`] for rows read back from a run's JSON, under `footer`.
pub fn write_plots_of(
    rows: &[Row],
    footer: &str,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> Result<(), String> {
    register_font()?;
    // Each experiment once, in the order of its first row (rows of several experiments may
    // alternate in one file).
    let mut experiments: Vec<&str> = Vec::new();
    for r in rows {
        if !experiments.contains(&r.experiment.as_str()) {
            experiments.push(&r.experiment);
        }
    }
    for exp in experiments {
        let rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.experiment == exp && r.ops_per_sec.is_some())
            .collect();
        if rows.is_empty() {
            continue;
        }
        // Drawn into memory and written as the JSON is: plotters' SVG backend writes its file
        // through a BufWriter it drops unflushed, so a write that failed (a full disk) was not
        // told, and the cut plot was kept as drawn.
        let svg = dir.join(format!("{exp}.svg"));
        let mut text = String::new();
        draw(
            SVGBackend::with_string(&mut text, PLOT_SIZE).into_drawing_area(),
            exp,
            footer,
            &rows,
        )
        .and_then(|()| crate::output::write_whole(&svg, &text).map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: {e}", svg.display()))?;
        written.push(svg);
        let png = dir.join(format!("{exp}.png"));
        let bytes = png_bytes(|area| draw(area, exp, footer, &rows))
            .map_err(|e| format!("{}: {e}", png.display()))?;
        crate::output::write_whole(&png, &bytes).map_err(|e| format!("{}: {e}", png.display()))?;
        written.push(png);
    }
    Ok(())
}

/// The plots' size in pixels, in both formats.
const PLOT_SIZE: (u32, u32) = (900, 580);

/// The PNG file of the plot `draw` draws, drawn into memory and encoded there, so that it is
/// written as the JSON and the SVG are ([`crate::output::write_whole`]: whole or not at all, and
/// never left behind by an interrupt). Drawn by the bitmap backend into a file of its own, the
/// file was made by the backend, out of reach of the interrupt handler's list until it was
/// listed: an interrupt in between left it in the results' folder.
fn png_bytes(
    draw: impl FnOnce(DrawingArea<BitMapBackend, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<Vec<u8>, String> {
    let (w, h) = PLOT_SIZE;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    draw(BitMapBackend::with_buffer(&mut rgb, PLOT_SIZE).into_drawing_area())?;
    let mut bytes = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut bytes),
        &rgb,
        w,
        h,
        image::ColorType::Rgb8,
    )
    .map_err(|e| format!("encoding the PNG: {e}"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks below 1 read as their values: those of a log axis under 0.01, and a linear tick
    /// between two of two decimals, read 0.00, 0.01 or 0.02.
    #[test]
    fn tick_labels_below_one_keep_their_digits() {
        let log_tick = |v: f64| label(10f64.powf(v.log10()));
        assert_eq!(log_tick(0.005), "0.005");
        assert_eq!(log_tick(0.002), "0.002");
        assert_eq!(log_tick(0.001), "0.001");
        assert_eq!(log_tick(0.0001), "0.0001");
        assert_eq!(label(3.0 * 0.005), "0.015");
        assert_eq!(label(0.1), "0.10");
        assert_eq!(label(0.5), "0.50");
        assert_eq!(label(0.25), "0.25");
        assert_eq!(label(1.5), "1.5");
        assert_eq!(label(200.0), "200");
        assert_eq!(label(0.0), "0");
        for t in linear_ticks(0.03) {
            assert!((label(t).parse::<f64>().unwrap() - t).abs() < 1e-12, "{t}");
        }
    }

    /// A value far off an axis (a result file's throughput of -1e308) maps to the edge of
    /// `i32`, on its side of the axis, with no sum of two `i32`s that would overflow (a panic
    /// in a debug build, a pixel wrapped to the other side in a release build).
    #[test]
    fn a_value_far_off_the_axis_maps_to_its_edge() {
        let axis = TickedAxis {
            range: 0.0..10.0,
            ticks: vec![],
        };
        // The y axis runs from the bottom (pixel 500) up to the top (pixel 0).
        assert_eq!(axis.map(&-1e308, (500, 0)), i32::MAX);
        assert_eq!(axis.map(&1e308, (500, 0)), i32::MIN);
        assert_eq!(axis.map(&-1e308, (40, 900)), i32::MIN);
        assert_eq!(axis.map(&1e308, (40, 900)), i32::MAX);
        assert_eq!(axis.map(&5.0, (500, 0)), 250);
        assert_eq!(axis.map(&0.0, (40, 900)), 40);
        assert_eq!(axis.map(&10.0, (40, 900)), 900);
    }

    fn row(exp: &str, scheme: &str, threads: usize, objects: usize, ops: f64) -> Row {
        Row {
            experiment: exp.into(),
            scheme: scheme.into(),
            kind: crate::schemes::Kind::Scheme,
            threads,
            objects,
            ops_per_sec: Some(ops),
            reps: vec![ops],
            extra: Default::default(),
        }
    }

    fn points(series: &[Series], label: &str) -> Vec<(f64, f64)> {
        let s = series.iter().find(|s| s.label == label);
        s.unwrap_or_else(|| panic!("no series {label}"))
            .points
            .clone()
    }

    #[test]
    fn file_spectrum_is_drawn_by_file_size_at_the_most_threads() {
        let rows: Vec<Row> = [(1, 1, 10e6), (1, 64, 5e6), (2, 64, 9e6), (2, 1, 20e6)]
            .into_iter()
            .flat_map(|(t, mib, ops)| {
                [
                    row("file-spectrum", "paygo", t, mib, ops),
                    row("file-spectrum", "atomic", t, mib, ops / 2.0),
                ]
            })
            .collect();
        let refs: Vec<&Row> = rows.iter().collect();
        let (caption, log, series) = series(&refs);
        assert_eq!(caption, "file size (MiB), at 2 threads");
        assert!(log);
        assert_eq!(series.len(), 2);
        assert_eq!(points(&series, "paygo"), vec![(1.0, 20.0), (64.0, 9.0)]);
        assert_eq!(points(&series, "atomic"), vec![(1.0, 10.0), (64.0, 4.5)]);
    }

    #[test]
    fn drop_file_has_a_dashed_series_with_its_reader() {
        let mut rows = Vec::new();
        for (mib, b, ops) in [(64, 0, 30e6), (256, 0, 34e6), (64, 1, 20e6), (256, 1, 25e6)] {
            let mut r = row("drop-file", "paygo", 1 + b, mib, ops);
            r.extra.insert("background".into(), (b as u64).into());
            rows.push(r);
        }
        let refs: Vec<&Row> = rows.iter().collect();
        let (caption, _, series) = series(&refs);
        assert_eq!(caption, "file size (MiB)");
        assert_eq!(points(&series, "paygo"), vec![(64.0, 30.0), (256.0, 34.0)]);
        assert_eq!(
            points(&series, "paygo +1 reader"),
            vec![(64.0, 20.0), (256.0, 25.0)]
        );
        let dashed: Vec<bool> = series.iter().map(|s| s.dashed).collect();
        assert_eq!(dashed, vec![false, true]);
        assert_eq!(series[0].key, series[1].key, "one colour for both forms");
    }

    /// `reclaim-pressure` draws the readers with a reclaimer as a dashed series of their own,
    /// and `oplog-read-ratio` a series per k: each series has one point per thread count.
    #[test]
    fn rows_of_one_scheme_in_two_settings_are_two_series() {
        let mut rows = Vec::new();
        for (t, with, ops) in [
            (1, false, 10e6),
            (2, false, 20e6),
            (1, true, 5e6),
            (2, true, 8e6),
        ] {
            let mut r = row("reclaim-pressure", "paygo", t, 1, ops);
            r.extra.insert("reclaimer".into(), with.into());
            rows.push(r);
        }
        let refs: Vec<&Row> = rows.iter().collect();
        let (_, _, s) = series(&refs);
        assert_eq!(points(&s, "paygo"), vec![(1.0, 10.0), (2.0, 20.0)]);
        assert_eq!(points(&s, "paygo +reclaimer"), vec![(1.0, 5.0), (2.0, 8.0)]);
        assert_eq!(
            s.iter().map(|s| s.dashed).collect::<Vec<_>>(),
            [false, true]
        );
        let mut rows = Vec::new();
        for (t, k, ops) in [(1, 1, 3e6), (1, 2, 4e6), (2, 1, 5e6), (2, 2, 7e6)] {
            let mut r = row("oplog-read-ratio", "oplog", t, 1, ops);
            r.extra.insert("read_every".into(), (k as u64).into());
            rows.push(r);
        }
        let refs: Vec<&Row> = rows.iter().collect();
        let (_, _, s) = series(&refs);
        assert_eq!(points(&s, "oplog k=1"), vec![(1.0, 3.0), (2.0, 5.0)]);
        assert_eq!(points(&s, "oplog k=2"), vec![(1.0, 4.0), (2.0, 7.0)]);
    }

    /// `query`'s rows of the machine and those `reproduce` adds sized for 16 CPUs are two
    /// series (they were one, two points at each thread count); rows of one size keep their
    /// labels.
    #[test]
    fn rows_sized_for_other_cpus_are_a_series_of_their_own() {
        let mut rows = Vec::new();
        for (t, cpus, ops) in [(1, 2, 10e6), (2, 2, 8e6), (1, 16, 4e6), (2, 16, 3e6)] {
            let mut r = row("query", "paygo", t, 100, ops);
            r.extra.insert("form".into(), "single".into());
            r.extra.insert("cpus".into(), (cpus as u64).into());
            rows.push(r);
        }
        let refs: Vec<&Row> = rows.iter().collect();
        let (_, _, s) = series(&refs);
        assert_eq!(
            points(&s, "paygo (2 CPUs) single"),
            vec![(1.0, 10.0), (2.0, 8.0)]
        );
        assert_eq!(
            points(&s, "paygo (16 CPUs) single"),
            vec![(1.0, 4.0), (2.0, 3.0)]
        );
        let (_, _, s) = series(&refs[..2]);
        assert_eq!(points(&s, "paygo single"), vec![(1.0, 10.0), (2.0, 8.0)]);
    }

    /// `query` over several object counts is drawn by threads with a series per count (and
    /// form), not one series going up and down at each thread count.
    #[test]
    fn rows_of_several_object_counts_by_threads_are_a_series_each() {
        let mut rows = Vec::new();
        for (t, n, ops) in [(1, 10, 1e6), (1, 1000, 3e6), (2, 10, 2e6), (2, 1000, 5e6)] {
            let mut r = row("query", "paygo", t, n, ops);
            r.extra.insert("form".into(), "single".into());
            rows.push(r);
        }
        let refs: Vec<&Row> = rows.iter().collect();
        let (caption, _, s) = series(&refs);
        assert_eq!(caption, "threads");
        assert_eq!(s.len(), 2);
        assert_eq!(
            points(&s, "paygo 10 objects single"),
            vec![(1.0, 1.0), (2.0, 2.0)]
        );
        assert_eq!(
            points(&s, "paygo 1000 objects single"),
            vec![(1.0, 3.0), (2.0, 5.0)]
        );
        assert_ne!(s[0].key, s[1].key, "one colour for both counts");
    }

    #[test]
    fn randomread_is_drawn_by_threads_unless_the_file_count_varies() {
        let one: Vec<Row> = vec![
            row("randomread", "paygo", 1, 10, 20e6),
            row("randomread", "paygo", 2, 10, 40e6),
        ];
        let refs: Vec<&Row> = one.iter().collect();
        let (caption, log, s) = series(&refs);
        assert_eq!((caption.as_str(), log), ("threads", false));
        assert_eq!(points(&s, "paygo"), vec![(1.0, 20.0), (2.0, 40.0)]);
        let several: Vec<Row> = vec![
            row("randomread", "paygo", 1, 1, 50e6),
            row("randomread", "paygo", 1, 10, 20e6),
        ];
        let refs: Vec<&Row> = several.iter().collect();
        let (caption, log, s) = series(&refs);
        assert_eq!(
            (caption.as_str(), log),
            ("files of 1 MiB, at 1 thread", true)
        );
        assert_eq!(points(&s, "paygo"), vec![(1.0, 50.0), (10.0, 20.0)]);
    }

    /// Rows whose experiments alternate within one file draw and list each plot once.
    #[test]
    fn alternating_experiments_are_drawn_once_each() {
        let rows: Vec<Row> = [
            ("drbh", 1),
            ("randomread", 1),
            ("drbh", 2),
            ("randomread", 2),
        ]
        .into_iter()
        .map(|(e, t)| row(e, "paygo", t, 1, 1e6 * t as f64))
        .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        write_plots_of(&rows, "test", dir.path(), &mut written).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["drbh.svg", "drbh.png", "randomread.svg", "randomread.png"]
        );
    }

    /// The table's legend (`refbench run --help`) and the report's head say what one op of each
    /// experiment is, as its plot's axis does: they said "a get+put pair in the counting
    /// experiments, a 64-byte read in the file ones" only, where an op of `drop-file` and
    /// `lodic-query` is a page dropped, of `query` an object reclaimed, of `oplog-list` an
    /// add+remove iteration and of `oplog-read-ratio` a fork.
    #[test]
    fn the_legend_and_the_report_name_each_experiments_op_as_its_plot_does() {
        for (what, text) in [
            ("the legend", crate::output::TABLE_LEGEND),
            ("the report", crate::report::INTRO),
        ] {
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let ops = text
                .split_once("(one op: ")
                .and_then(|(_, t)| t.split_once(')'))
                .unwrap_or_else(|| panic!("{what} says no op: {text}"))
                .0;
            for e in crate::experiments::EXPERIMENTS {
                let r = row(e.name, "atomic", 1, 1, 1.0);
                let phrase = match unit(&[&r]) {
                    "M get+put pairs/s" | "M reads/s" => continue,
                    "M reclaims/s" => "an object reclaimed in ",
                    "M pages dropped/s" => "a page dropped in ",
                    "M add+remove iterations/s" => "an add+remove iteration in ",
                    "M forks/s" => "a fork in ",
                    u => panic!("{}: a unit this test does not know, {u}", e.name),
                };
                let named = ops.split_once(phrase).is_some_and(|(_, t)| {
                    t.split(',')
                        .next()
                        .is_some_and(|t| t.split(' ').any(|w| w == e.name))
                });
                assert!(
                    named,
                    "{what} does not say that an op of {} is {phrase}it: {ops}",
                    e.name
                );
            }
        }
    }

    #[test]
    fn the_compiled_in_font_registers() {
        assert_eq!(register_font(), Ok(()));
    }

    #[test]
    fn linear_ticks_are_round_and_cover_the_range() {
        assert_eq!(linear_ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(
            linear_ticks(700.0),
            vec![0.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0]
        );
    }

    #[test]
    fn log_y_only_where_values_span_a_decade() {
        assert!(spans_decades(&[7.7, 773.0]));
        assert!(!spans_decades(&[61.0, 174.0]));
        assert_eq!(label(4096.0), "4096");
        assert_eq!(label(2.0), "2");
    }
}
