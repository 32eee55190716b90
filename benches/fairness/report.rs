//! The scenarios' tables: printed as Markdown while the run goes, and
//! written out as `fairness.md` (one table per scenario) and
//! `fairness.csv` (one line per figure: scenario, mode, figure, value).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::measure::micros;

/// What one scenario measured, a line per mode, and what the run asserts.
pub struct Table {
    pub scenario: &'static str,
    /// What the figures are, above the table.
    caption: String,
    columns: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    /// Grants beyond what the primitive admits (must be 0).
    pub overlaps: usize,
    /// Fair contenders never granted in the window (`turns` only).
    pub starved: usize,
}

impl Table {
    /// A table of the columns named in `columns`, separated by `|`.
    pub fn new(scenario: &'static str, caption: String, columns: &'static str) -> Self {
        let columns = columns.split('|').map(str::trim).collect();
        let (rows, overlaps, starved) = (Vec::new(), 0, 0);
        Table {
            scenario,
            caption,
            columns,
            rows,
            overlaps,
            starved,
        }
    }

    /// A line of cells separated by `|`, as many as the columns.
    pub fn row(&mut self, cells: &str) {
        let cells: Vec<String> = cells.split('|').map(|c| c.trim().to_owned()).collect();
        assert_eq!(cells.len(), self.columns.len(), "{}", self.scenario);
        self.rows.push(cells);
    }

    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let columns: Vec<String> = self.columns.iter().map(|c| c.to_string()).collect();
        let mut md = format!("\n### {}\n\n{}\n\n", self.scenario, self.caption);
        md += &line(&columns);
        md += &format!("|---|{}\n", "---:|".repeat(columns.len() - 1));
        self.rows.iter().for_each(|row| md += &line(row));
        md
    }
}

/// A duration in milliseconds, as the tables show it.
pub fn ms(d: Duration) -> String {
    format!("{:.2}", micros(d) / 1e3)
}

/// `a / b`, or ∞ when `b` is nothing.
pub fn ratio(a: f64, b: f64) -> String {
    match b > 0.0 {
        true => format!("{:.2}", a / b),
        false => "∞".to_owned(),
    }
}

/// `fairness.md` (`head`, then every table) and `fairness.csv` in `dir`.
pub fn write(tables: &[Table], dir: &Path, head: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut md = head.to_owned();
    let mut csv = String::from("scenario,mode,figure,value\n");
    for table in tables {
        md.push_str(&table.markdown());
        for row in &table.rows {
            for (column, cell) in table.columns.iter().zip(row).skip(1) {
                let _ = writeln!(csv, "{},{},{column},{cell}", table.scenario, row[0]);
            }
        }
    }
    std::fs::write(dir.join("fairness.md"), md)?;
    std::fs::write(dir.join("fairness.csv"), csv)
}
