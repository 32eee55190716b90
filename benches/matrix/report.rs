//! The matrix written out: `matrix.csv` (every cell), `matrix.md` (one
//! table per member kind and N) and `matrix.svg` (grants per second
//! against contenders, one panel per member kind, N and condition).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;

use crate::cell::{Outcome, Series};
use crate::contenders::Kind as Client;
use crate::measure::micros;
use crate::members::{Condition, Kind};

/// One measured cell.
pub struct Row {
    pub kind: Kind,
    pub nodes: usize,
    pub condition: Condition,
    pub series: Series,
    pub hold: Duration,
    pub contenders: usize,
    pub outcome: Outcome,
}

impl Row {
    /// The cell's figures by name: the CSV's columns, and the line printed
    /// as the run goes.
    fn fields(&self) -> [(&'static str, String); 13] {
        let o = &self.outcome;
        [
            ("member", self.kind.name().to_owned()),
            ("nodes", self.nodes.to_string()),
            ("condition", self.condition.name().to_owned()),
            ("series", self.series.name().to_owned()),
            ("hold_ms", self.hold.as_millis().to_string()),
            ("contenders", self.contenders.to_string()),
            ("grants", o.grants.to_string()),
            ("grants_per_s", format!("{:.1}", o.grants_per_s)),
            ("wait_p50_ms", format!("{:.3}", ms(o.wait.p50))),
            ("wait_p99_ms", format!("{:.3}", ms(o.wait.p99))),
            ("fewest", o.fewest.to_string()),
            ("most", o.most.to_string()),
            ("overlaps", o.overlaps.to_string()),
        ]
    }

    /// The cell on one line, as the run goes.
    pub fn line(&self) -> String {
        let fields = self.fields().map(|(name, value)| format!("{name} {value}"));
        fields.join(", ")
    }
}

fn ms(d: Duration) -> f64 {
    micros(d) / 1e3
}

pub fn write(rows: &[Row], dir: &Path, seed: u64) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::new();
    for (i, r) in rows.iter().enumerate() {
        let fields = r.fields();
        if i == 0 {
            writeln!(csv, "{}", fields.clone().map(|(name, _)| name).join(","))?;
        }
        writeln!(csv, "{}", fields.map(|(_, value)| value).join(","))?;
    }
    std::fs::write(dir.join("matrix.csv"), csv)?;
    std::fs::write(dir.join("matrix.md"), markdown(rows, seed))?;
    plot(rows, &dir.join("matrix.svg"))
}

/// Distinct values of `f` over `rows`, in run order.
fn distinct<'a, T: PartialEq + Copy>(
    rows: impl IntoIterator<Item = &'a Row>,
    f: impl Fn(&Row) -> T,
) -> Vec<T> {
    let mut v: Vec<T> = Vec::new();
    for r in rows {
        if !v.contains(&f(r)) {
            v.push(f(r));
        }
    }
    v
}

/// One table per member kind and N: a line per condition and series, a
/// column per hold and contender count, each cell "grants/s · wait p99 ms
/// · fewest–most grants of one contender".
fn markdown(rows: &[Row], seed: u64) -> String {
    let mut md = format!(
        "Each cell: grants per second · p99 of the wait from asking to holding (ms, over the \
         grants) · the fewest–most grants of one contender, over a window of K contenders on \
         one resource. Overlaps: {} in {} cells. Seed {seed}.\n",
        rows.iter().map(|r| r.outcome.overlaps).sum::<usize>(),
        rows.len()
    );
    for (kind, nodes) in distinct(rows, |r| (r.kind, r.nodes)) {
        let these: Vec<&Row> = rows
            .iter()
            .filter(|r| r.kind == kind && r.nodes == nodes)
            .collect();
        let holds = distinct(these.iter().copied(), |r| r.hold);
        let ks = distinct(these.iter().copied(), |r| r.contenders);
        let _ = write!(
            md,
            "\n**{} members, N = {nodes}**\n\n| condition | series |",
            kind.name()
        );
        for h in &holds {
            for k in &ks {
                let _ = write!(md, " hold {} ms, K={k} |", h.as_millis());
            }
        }
        md.push_str("\n|---|---|");
        md.push_str(&"---:|".repeat(holds.len() * ks.len()));
        md.push('\n');
        for condition in distinct(these.iter().copied(), |r| r.condition) {
            for series in distinct(these.iter().copied(), |r| r.series) {
                let _ = write!(md, "| {} | {} |", condition.name(), series.name());
                for h in &holds {
                    for k in &ks {
                        let cell = these.iter().find(|r| {
                            r.condition == condition
                                && r.series == series
                                && r.hold == *h
                                && r.contenders == *k
                        });
                        let _ = match cell {
                            Some(r) => write!(
                                md,
                                " {:.0} · {:.1} · {}–{} |",
                                r.outcome.grants_per_s,
                                ms(r.outcome.wait.p99),
                                r.outcome.fewest,
                                r.outcome.most
                            ),
                            None => write!(md, " |"),
                        };
                    }
                }
                md.push('\n');
            }
        }
    }
    md
}

fn color(series: Series) -> RGBColor {
    match series {
        Series::Mutex(Client::Quorumlock) => RGBColor(31, 119, 180),
        Series::Mutex(Client::Ideal) => RGBColor(44, 160, 44),
        Series::Mutex(Client::Rslock) => RGBColor(214, 39, 40),
        Series::Permit => RGBColor(255, 127, 14),
        Series::ReadWrite => RGBColor(148, 103, 189),
        Series::Leader => RGBColor(140, 86, 75),
    }
}

/// A panel per member kind, N and condition (a row of panels per kind
/// and N): grants/s against contenders, log–log, a line per series,
/// solid without a hold and dashed with the longest.
fn plot(rows: &[Row], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let groups = distinct(rows, |r| (r.kind, r.nodes));
    let (w, h) = (440u32, 300u32);
    let root =
        SVGBackend::new(path, (w * 3, h * groups.len().max(1) as u32 + 40)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(40);
    title.titled(
        "grants/s against contenders on one resource (log–log): solid hold 0, dashed hold 50 ms",
        ("sans-serif", 18),
    )?;
    let panels = body.split_evenly((groups.len().max(1), 3));
    let top = rows
        .iter()
        .map(|r| r.outcome.grants_per_s)
        .fold(10.0, f64::max)
        * 2.0;
    let most = rows.iter().map(|r| r.contenders).max().unwrap_or(1).max(2) as f64;
    for (g, &(kind, nodes)) in groups.iter().enumerate() {
        let these: Vec<&Row> = rows
            .iter()
            .filter(|r| r.kind == kind && r.nodes == nodes)
            .collect();
        let longest = these.iter().map(|r| r.hold).max().unwrap_or_default();
        for (c, condition) in distinct(these.iter().copied(), |r| r.condition)
            .into_iter()
            .enumerate()
        {
            let mut chart = ChartBuilder::on(&panels[g * 3 + c])
                .caption(
                    format!("{} N={nodes}, {}", kind.name(), condition.name()),
                    ("sans-serif", 15),
                )
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(48)
                .build_cartesian_2d((1f64..most).log_scale(), (1f64..top).log_scale())?;
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .x_desc("contenders")
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()?;
            for series in distinct(these.iter().copied(), |r| r.series) {
                for hold in distinct(these.iter().copied(), |r| r.hold) {
                    let pts: Vec<(f64, f64)> = these
                        .iter()
                        .filter(|r| {
                            r.condition == condition && r.series == series && r.hold == hold
                        })
                        .map(|r| (r.contenders as f64, r.outcome.grants_per_s.max(1.0)))
                        .collect();
                    let style = color(series).stroke_width(2);
                    if hold == longest && !hold.is_zero() {
                        chart.draw_series(DashedLineSeries::new(pts, 5, 4, style))?;
                    } else {
                        chart
                            .draw_series(LineSeries::new(pts, style))?
                            .label(series.name())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 14, y)], style)
                            });
                    }
                }
            }
            if g == 0 && c == 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerLeft)
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 11))
                    .draw()?;
            }
        }
    }
    root.present()?;
    Ok(())
}
