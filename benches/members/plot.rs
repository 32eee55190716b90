//! `members.svg`: lock cycles per second against shards per member —
//! measured on cluster members, the plain-server baseline, and on paper
//! (shards × one shard's rate, and the client's ceiling).

use std::path::Path;

use plotters::prelude::*;

use crate::shards::{Paper, Run};

/// Shards per member the on-paper lines run to.
const PAPER_SHARDS: usize = 6;

pub fn draw(
    path: &Path,
    runs: &[Run],
    paper: Option<Paper>,
    tasks: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let measured: Vec<(f64, f64)> = runs
        .iter()
        .filter(|r| r.shards > 0)
        .map(|r| (r.shards as f64, r.rate().median))
        .collect();
    let plain = |quarantined: bool| {
        runs.iter()
            .find(|r| r.shards == 0 && r.quarantined == quarantined)
            .map(|r| r.rate().median)
    };
    let client = paper.map(|p| 2.0 * p.per_client_core);
    // Room above the client's ceiling for the on-paper line to leave by.
    let top = measured
        .iter()
        .map(|p| p.1)
        .chain(plain(true))
        .chain(plain(false))
        .chain(client)
        .fold(1.0, f64::max)
        * 2.5;
    // Up to where it leaves the plot.
    let linear: Vec<(f64, f64)> = paper.map_or_else(Vec::new, |p| {
        let last = (top / p.per_shard).min(PAPER_SHARDS as f64);
        let mut pts: Vec<(f64, f64)> = (1..=PAPER_SHARDS)
            .map(|s| s as f64)
            .take_while(|&s| s <= last)
            .map(|s| (s, s * p.per_shard))
            .collect();
        pts.push((last, last * p.per_shard));
        pts
    });

    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "lock cycles/s vs shards per member (3 members, 10,000 resources held at once)",
            ("sans-serif", 17),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5f64..PAPER_SHARDS as f64 + 0.5, 0f64..top)?;
    chart
        .configure_mesh()
        .x_labels(PAPER_SHARDS)
        .light_line_style(WHITE)
        .x_desc("shards per member (Redis Cluster masters)")
        .y_desc("acquire + release cycles/s")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;

    let blue = RGBColor(31, 119, 180);
    let green = RGBColor(44, 160, 44);
    let grey = RGBColor(120, 120, 120);
    let red = RGBColor(214, 39, 40);
    let orange = RGBColor(255, 127, 14);
    chart
        .draw_series(LineSeries::new(measured.clone(), blue.stroke_width(2)))?
        .label(format!(
            "measured, 3 cluster members, {tasks} tasks (a shared 2-core machine)"
        ))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], blue.stroke_width(2)));
    chart.draw_series(measured.iter().map(|&p| Circle::new(p, 4, blue.filled())))?;
    let baselines = [
        (true, "measured, 3 plain servers", green),
        (
            false,
            "measured, 3 plain servers, no restart quarantine",
            orange,
        ),
    ];
    for (quarantined, name, color) in baselines {
        if let Some(rate) = plain(quarantined) {
            let line = vec![(0.5, rate), (PAPER_SHARDS as f64 + 0.5, rate)];
            chart
                .draw_series(DashedLineSeries::new(line, 6, 4, color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
                });
        }
    }
    if !linear.is_empty() {
        chart
            .draw_series(DashedLineSeries::new(
                linear.clone(),
                3,
                3,
                grey.stroke_width(2),
            ))?
            .label("on paper: shards × one shard's rate (a core per master)")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], grey.stroke_width(2))
            });
        chart.draw_series(
            linear
                .iter()
                .filter(|p| p.0.fract() == 0.0)
                .map(|&p| TriangleMarker::new(p, 4, grey.filled())),
        )?;
    }
    if let Some(rate) = client {
        let line = vec![(0.5, rate), (PAPER_SHARDS as f64 + 0.5, rate)];
        chart
            .draw_series(DashedLineSeries::new(line, 8, 4, red.stroke_width(2)))?
            .label("on paper: the client's ceiling on 2 cores")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], red.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
