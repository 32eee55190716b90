//! `scaling.svg`: the scaling curves, one panel each, the three contenders
//! on the same axes (p50 solid with dots, p99 dashed with triangles).

use std::path::Path;

use plotters::prelude::*;

use crate::contenders::Kind;
use crate::measure::micros;
use crate::report::Results;
use crate::scaling::ScalePoint;

/// One line of a panel.
struct Line {
    kind: Kind,
    dashed: bool,
    pts: Vec<(f64, f64)>,
}

/// Draws one panel on `$area` with the given x and y coordinate specs
/// (linear or log: a macro, so both kinds go through the same code).
macro_rules! panel {
    ($area:expr, $title:expr, $xdesc:expr, $ydesc:expr, $xr:expr, $yr:expr, $lines:expr) => {{
        let mut chart = ChartBuilder::on($area)
            .caption($title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(38)
            .y_label_area_size(70)
            .build_cartesian_2d($xr, $yr)?;
        chart
            .configure_mesh()
            .x_desc($xdesc)
            .y_desc($ydesc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for line in $lines {
            let color = Results::color(line.kind);
            if line.dashed {
                chart.draw_series(DashedLineSeries::new(
                    line.pts.clone(),
                    6,
                    4,
                    color.stroke_width(2),
                ))?;
                chart.draw_series(
                    line.pts
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 4, color.filled())),
                )?;
            } else {
                chart
                    .draw_series(LineSeries::new(line.pts.clone(), color.stroke_width(2)))?
                    .label(line.kind.name())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
                    });
                chart.draw_series(line.pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }};
}

/// Smallest and largest positive y of the lines.
fn y_bounds(lines: &[Line]) -> Option<(f64, f64)> {
    let ys = lines
        .iter()
        .flat_map(|l| l.pts.iter().map(|p| p.1))
        .filter(|y| *y > 0.0);
    let (lo, hi) = ys.fold((f64::MAX, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    (hi > 0.0).then_some((lo, hi))
}

fn x_max(lines: &[Line]) -> f64 {
    lines
        .iter()
        .flat_map(|l| l.pts.iter().map(|p| p.0))
        .fold(1.0, f64::max)
}

impl Results {
    /// Latency lines (p50 and p99 per contender) and rate lines of one
    /// scaling curve (`nodes` or `tasks`).
    fn curve_lines(&self, curve: &str) -> (Vec<Line>, Vec<Line>) {
        let (mut latency, mut rate) = (Vec::new(), Vec::new());
        for kind in Kind::ALL {
            let mut pts: Vec<_> = self
                .scale
                .iter()
                .filter(|p| p.curve == curve && p.kind == kind && p.latency.n > 0)
                .collect();
            pts.sort_by_key(|p| p.x);
            if pts.is_empty() {
                continue;
            }
            let line = |dashed: bool, f: &dyn Fn(&ScalePoint) -> f64| Line {
                kind,
                dashed,
                pts: pts.iter().map(|p| (p.x as f64, f(p))).collect(),
            };
            latency.push(line(false, &|p: &ScalePoint| micros(p.latency.p50)));
            latency.push(line(true, &|p: &ScalePoint| micros(p.latency.p99)));
            rate.push(line(false, &|p: &ScalePoint| p.rate.median));
        }
        (latency, rate)
    }

    /// Next-grant lines (p50, p99) and grants/s of the waiter curve.
    fn waiter_lines(&self) -> (Vec<Line>, Vec<Line>) {
        let (mut latency, mut rate) = (Vec::new(), Vec::new());
        for kind in Kind::ALL {
            let mut pts: Vec<_> = self.waiters.iter().filter(|c| c.kind == kind).collect();
            pts.sort_by_key(|c| c.k);
            if pts.is_empty() {
                continue;
            }
            let with_grants: Vec<_> = pts.iter().filter(|c| c.next_grant.n > 0).collect();
            latency.push(Line {
                kind,
                dashed: false,
                pts: with_grants
                    .iter()
                    .map(|c| (c.k as f64, micros(c.next_grant.p50)))
                    .collect(),
            });
            latency.push(Line {
                kind,
                dashed: true,
                pts: with_grants
                    .iter()
                    .map(|c| (c.k as f64, micros(c.next_grant.p99)))
                    .collect(),
            });
            rate.push(Line {
                kind,
                dashed: false,
                pts: pts.iter().map(|c| (c.k as f64, c.grants_per_s)).collect(),
            });
        }
        (latency, rate)
    }

    /// Six panels, three rows: against N (linear), against concurrent tasks
    /// (log), against waiting processes (log); latency left (log), rate
    /// right.
    pub fn plot_scaling(&self, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (1200, 1140)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((3, 2));

        let (lat, rate) = self.curve_lines("nodes");
        let tasks = self
            .scale
            .iter()
            .find(|p| p.curve == "nodes")
            .map_or(0, |p| p.tasks);
        if let Some((lo, hi)) = y_bounds(&lat) {
            let xm = x_max(&lat) + 1.0;
            panel!(
                &areas[0],
                "latency vs nodes, one cycle at a time (p50 solid, p99 dashed)",
                "nodes (N)",
                "µs (log)",
                0f64..xm,
                (lo / 1.5..hi * 1.5).log_scale(),
                &lat
            );
        }
        if let Some((_, hi)) = y_bounds(&rate) {
            let xm = x_max(&rate) + 1.0;
            panel!(
                &areas[1],
                format!("lock cycles/s vs nodes, {tasks} tasks"),
                "nodes (N)",
                "cycles/s",
                0f64..xm,
                0f64..hi * 1.15,
                &rate
            );
        }

        let (lat, rate) = self.curve_lines("tasks");
        let nodes = self
            .scale
            .iter()
            .find(|p| p.curve == "tasks")
            .map_or(0, |p| p.nodes);
        if let Some((lo, hi)) = y_bounds(&lat) {
            let xm = x_max(&lat) * 1.5;
            panel!(
                &areas[2],
                format!("latency vs concurrent tasks, N={nodes} (p50 solid, p99 dashed)"),
                "concurrent tasks (log)",
                "µs (log)",
                (0.7f64..xm).log_scale(),
                (lo / 1.5..hi * 1.5).log_scale(),
                &lat
            );
        }
        if let Some((_, hi)) = y_bounds(&rate) {
            let xm = x_max(&rate) * 1.5;
            panel!(
                &areas[3],
                format!("lock cycles/s vs concurrent tasks, N={nodes}, distinct resources"),
                "concurrent tasks (log)",
                "cycles/s",
                (0.7f64..xm).log_scale(),
                0f64..hi * 1.15,
                &rate
            );
        }

        let (lat, rate) = self.waiter_lines();
        if let Some((lo, hi)) = y_bounds(&lat) {
            let xm = x_max(&lat) * 1.5;
            panel!(
                &areas[4],
                "one resource: release → next grant (p50 solid, p99 dashed)",
                "waiting processes (log)",
                "µs (log)",
                (1.4f64..xm).log_scale(),
                (lo / 1.5..hi * 1.5).log_scale(),
                &lat
            );
        }
        if let Some((_, hi)) = y_bounds(&rate) {
            let xm = x_max(&rate) * 1.5;
            panel!(
                &areas[5],
                "one resource: grants/s vs waiting processes",
                "waiting processes (log)",
                "grants/s",
                (1.4f64..xm).log_scale(),
                0f64..hi * 1.15,
                &rate
            );
        }
        root.present()?;
        Ok(())
    }
}
