//! Every plot the bench draws: `benchmarks.svg` (latency per scenario,
//! throughput, hand-off delay) and `scaling.svg` (the scaling curves, one
//! panel each, the three contenders on the same axes: p50 solid with dots,
//! p99 dashed with triangles).

use std::path::Path;

use plotters::prelude::*;

use crate::contenders::Kind;
use crate::measure::micros;
use crate::report::{LatencyRun, Results};
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

/// `benchmarks.svg`.
impl Results {
    pub(crate) fn color(kind: Kind) -> RGBColor {
        match kind {
            Kind::Quorumlock => RGBColor(31, 119, 180),
            Kind::Ideal => RGBColor(44, 160, 44),
            Kind::Rslock => RGBColor(214, 39, 40),
        }
    }

    /// Left: p50 bars and p99 ticks per latency scenario (first run of
    /// each), log scale. Middle: throughput by task count. Right: hand-off
    /// delay p50 by K.
    pub fn plot(&self, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (1500, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, rest) = root.split_horizontally(700);
        let (middle, right) = rest.split_horizontally(400);

        // Latency scenarios, first run each.
        let mut runs: Vec<&LatencyRun> = Vec::new();
        for r in &self.latency {
            if !runs
                .iter()
                .any(|s| s.scenario == r.scenario && s.nodes == r.nodes)
            {
                runs.push(r);
            }
        }
        let label = |r: &LatencyRun| match r.scenario.as_str() {
            "healthy" => format!("N={}", r.nodes),
            "slow-node" => "+20 ms node".to_owned(),
            "hung-node" => "hung node".to_owned(),
            other => other.to_owned(),
        };
        let labels: Vec<String> = runs.iter().map(|r| label(r)).collect();
        if runs.is_empty() {
            return self.plot_rest(&root, &middle, &right);
        }
        let (mut lo, mut hi) = (f64::MAX, 1.0f64);
        for r in &runs {
            for l in &r.results {
                if l.pooled.n > 0 {
                    lo = lo.min(micros(l.pooled.p50));
                    hi = hi.max(micros(l.pooled.p99));
                }
            }
        }
        let lo = (lo / 2.0).max(1.0);
        let hi = hi * 2.0;
        let n = runs.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&left)
            .caption(
                "acquire+release latency (bar p50, tick p99)",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..n, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(runs.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x.fract() - 0.5).abs() < 1e-6 {
                    labels.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("µs (log)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (j, kind) in Kind::ALL.into_iter().enumerate() {
            let color = Self::color(kind);
            let mut bars = Vec::new();
            let mut ticks = Vec::new();
            for (i, r) in runs.iter().enumerate() {
                let Some(l) = r.get(kind).filter(|l| l.pooled.n > 0) else {
                    continue;
                };
                let x0 = i as f64 + 0.15 + j as f64 * 0.24;
                let x1 = x0 + 0.2;
                bars.push(Rectangle::new(
                    [(x0, lo), (x1, micros(l.pooled.p50))],
                    color.filled(),
                ));
                let p99 = micros(l.pooled.p99);
                ticks.push(PathElement::new(
                    vec![(x0, p99), (x1, p99)],
                    color.stroke_width(3),
                ));
                ticks.push(PathElement::new(
                    vec![
                        ((x0 + x1) / 2.0, micros(l.pooled.p50)),
                        ((x0 + x1) / 2.0, p99),
                    ],
                    color.stroke_width(1),
                ));
            }
            chart
                .draw_series(bars)?
                .label(kind.name())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
            chart.draw_series(ticks)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        self.plot_rest(&root, &middle, &right)
    }

    /// The throughput and hand-off panels.
    fn plot_rest(
        &self,
        root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        middle: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        right: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        // Throughput.
        if !self.throughput.is_empty() {
            let max = self
                .throughput
                .iter()
                .map(|t| t.rate.max)
                .fold(1.0, f64::max);
            let tmax = self.throughput.iter().map(|t| t.tasks).max().unwrap_or(1) as f64;
            let mut chart = ChartBuilder::on(middle)
                .caption("throughput, distinct resources", ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .build_cartesian_2d((0.8f64..tmax * 1.25).log_scale(), 0f64..max * 1.1)?;
            chart
                .configure_mesh()
                .x_desc("concurrent tasks")
                .y_desc("cycles/s")
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()?;
            for kind in Kind::ALL {
                let color = Self::color(kind);
                let pts: Vec<(f64, f64)> = self
                    .throughput
                    .iter()
                    .filter(|t| t.kind == kind)
                    .map(|t| (t.tasks as f64, t.rate.median))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                    .label(kind.name())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], color));
                chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }

        // Hand-off delay.
        if !self.contention.is_empty() {
            let ks: Vec<usize> = {
                let mut k: Vec<usize> = self.contention.iter().map(|c| c.k).collect();
                k.sort_unstable();
                k.dedup();
                k
            };
            let vals: Vec<f64> = self
                .contention
                .iter()
                .flat_map(|c| [micros(c.next_grant.p50), micros(c.wait.p99)])
                .filter(|v| *v > 0.0)
                .collect();
            let lo = vals.iter().copied().fold(f64::MAX, f64::min).max(1.0) / 2.0;
            let hi = vals.iter().copied().fold(10.0, f64::max) * 2.0;
            let kl: Vec<String> = ks.iter().map(|k| format!("K={k}")).collect();
            let mut chart = ChartBuilder::on(right)
                .caption(
                    "one resource: next grant p50 (bar), wait p99 (tick)",
                    ("sans-serif", 16),
                )
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..ks.len().max(1) as f64, (lo..hi).log_scale())?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(ks.len() * 2 + 1)
                .x_label_formatter(&|x| {
                    if (x.fract() - 0.5).abs() < 1e-6 {
                        kl.get(x.floor() as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_desc("µs (log)")
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()?;
            for (j, kind) in Kind::ALL.into_iter().enumerate() {
                let color = Self::color(kind);
                let mut bars = Vec::new();
                let mut ticks = Vec::new();
                for c in self.contention.iter().filter(|c| c.kind == kind) {
                    let Some(i) = ks.iter().position(|k| *k == c.k) else {
                        continue;
                    };
                    let x0 = i as f64 + 0.15 + j as f64 * 0.24;
                    let x1 = x0 + 0.2;
                    if c.next_grant.n > 0 {
                        bars.push(Rectangle::new(
                            [(x0, lo), (x1, micros(c.next_grant.p50))],
                            color.filled(),
                        ));
                    }
                    if c.wait.n > 0 {
                        let w = micros(c.wait.p99);
                        ticks.push(PathElement::new(
                            vec![(x0, w), (x1, w)],
                            color.stroke_width(3),
                        ));
                    }
                }
                chart.draw_series(bars)?;
                chart.draw_series(ticks)?;
            }
        }
        root.present()?;
        Ok(())
    }
}
