//! Results: collected in one place, written as JSON and CSV, printed as
//! Markdown tables (with the ratios the targets are stated in); the SVG
//! plots are drawn in `plot.rs`.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::contenders::Kind;
use crate::measure::micros;
use crate::scaling::ScalePoint;
use crate::scenarios::{Contention, Latency, Throughput};

/// One latency scenario run: its name, node count, run number, and the
/// three contenders' figures.
#[derive(Debug, Clone)]
pub struct LatencyRun {
    pub scenario: String,
    pub nodes: usize,
    pub run: usize,
    pub results: Vec<Latency>,
}

impl LatencyRun {
    pub fn get(&self, kind: Kind) -> Option<&Latency> {
        self.results.iter().find(|l| l.kind == kind)
    }
}

#[derive(Debug, Default)]
pub struct Results {
    pub machine: Value,
    pub quick: bool,
    pub latency: Vec<LatencyRun>,
    pub throughput: Vec<Throughput>,
    pub contention: Vec<Contention>,
    pub cpu: Vec<Value>,
    /// The node and task curves.
    pub scale: Vec<ScalePoint>,
    /// The waiting-process curve (separate processes on one resource).
    pub waiters: Vec<Contention>,
}

pub(crate) fn us(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0} ms", v / 1000.0)
    } else if v >= 10_000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
}

pub(crate) fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "–".to_owned()
    }
}

impl Results {
    pub fn to_json(&self) -> Value {
        let latency: Vec<Value> = self
            .latency
            .iter()
            .flat_map(|run| {
                run.results.iter().map(move |l| {
                    json!({
                        "scenario": run.scenario, "nodes": run.nodes, "run": run.run,
                        "contender": l.kind.name(), "samples": l.pooled.n, "errors": l.errors,
                        "min_us": micros(l.pooled.min), "p50_us": micros(l.pooled.p50),
                        "p99_us": micros(l.pooled.p99), "max_us": micros(l.pooled.max),
                        "mean_us": micros(l.pooled.mean), "rounds": l.rounds,
                        "p50_rounds_us": [l.p50_rounds.min, l.p50_rounds.median, l.p50_rounds.max],
                        "p99_rounds_us": [l.p99_rounds.min, l.p99_rounds.median, l.p99_rounds.max],
                    })
                })
            })
            .collect();
        let throughput: Vec<Value> = self
            .throughput
            .iter()
            .map(|t| {
                json!({
                    "tasks": t.tasks, "contender": t.kind.name(),
                    "cycles_per_s_median": t.rate.median,
                    "cycles_per_s_min": t.rate.min, "cycles_per_s_max": t.rate.max,
                    "errors": t.errors,
                })
            })
            .collect();
        let contention: Vec<Value> = self.contention.iter().map(contention_json).collect();
        let waiters: Vec<Value> = self.waiters.iter().map(contention_json).collect();
        let scale: Vec<Value> = self
            .scale
            .iter()
            .map(|p| {
                json!({
                    "curve": p.curve, "x": p.x, "nodes": p.nodes, "tasks": p.tasks,
                    "contender": p.kind.name(), "samples": p.latency.n, "errors": p.errors,
                    "p50_us": micros(p.latency.p50), "p99_us": micros(p.latency.p99),
                    "mean_us": micros(p.latency.mean), "max_us": micros(p.latency.max),
                    "cycles_per_s_median": p.rate.median,
                    "cycles_per_s_min": p.rate.min, "cycles_per_s_max": p.rate.max,
                })
            })
            .collect();
        json!({
            "machine": self.machine, "quick": self.quick, "latency": latency,
            "throughput": throughput, "contention": contention, "cpu_memory": self.cpu,
            "scale": scale, "scale_waiters": waiters,
        })
    }
}

fn contention_json(c: &Contention) -> Value {
    json!({
                    "k": c.k, "contender": c.kind.name(), "grants_per_s": c.grants_per_s,
                    "next_grant_p50_us": micros(c.next_grant.p50),
                    "next_grant_p99_us": micros(c.next_grant.p99),
                    "wait_p50_us": micros(c.wait.p50), "wait_p99_us": micros(c.wait.p99),
                    "wait_max_us": micros(c.wait.max),
                    "handoffs": c.handoff.n, "handoff_p50_us": micros(c.handoff.p50),
                    "handoff_p99_us": micros(c.handoff.p99),
                    "handoff_max_us": micros(c.handoff.max), "regrab_share": c.regrabs,
                    "overlaps": c.overlaps,
    })
}

impl Results {
    /// One CSV with a row per figure: scenario, parameter, contender,
    /// metric, value.
    pub fn to_csv(&self) -> String {
        let mut out = String::from("scenario,param,run,contender,metric,value\n");
        for run in &self.latency {
            for l in &run.results {
                for (m, v) in [
                    ("p50_us", micros(l.pooled.p50)),
                    ("p99_us", micros(l.pooled.p99)),
                    ("min_us", micros(l.pooled.min)),
                    ("max_us", micros(l.pooled.max)),
                    ("mean_us", micros(l.pooled.mean)),
                    ("samples", l.pooled.n as f64),
                ] {
                    let _ = writeln!(
                        out,
                        "{},{},{},{},{m},{v:.1}",
                        run.scenario,
                        run.nodes,
                        run.run,
                        l.kind.name()
                    );
                }
            }
        }
        for t in &self.throughput {
            let _ = writeln!(
                out,
                "throughput,{},1,{},cycles_per_s,{:.1}",
                t.tasks,
                t.kind.name(),
                t.rate.median
            );
        }
        for c in &self.contention {
            for (metric, value) in [
                ("grants_per_s", c.grants_per_s),
                ("handoff_p50_us", micros(c.handoff.p50)),
                ("next_grant_p50_us", micros(c.next_grant.p50)),
                ("wait_p99_us", micros(c.wait.p99)),
            ] {
                let _ = writeln!(
                    out,
                    "contention,{},1,{},{metric},{value:.1}",
                    c.k,
                    c.kind.name()
                );
            }
        }
        for p in &self.scale {
            for (metric, value) in [
                ("p50_us", micros(p.latency.p50)),
                ("p99_us", micros(p.latency.p99)),
                ("cycles_per_s", p.rate.median),
                ("samples", p.latency.n as f64),
            ] {
                let _ = writeln!(
                    out,
                    "scale-{},{},1,{},{metric},{value:.1}",
                    p.curve,
                    p.x,
                    p.kind.name()
                );
            }
        }
        for c in &self.waiters {
            for (metric, value) in [
                ("grants_per_s", c.grants_per_s),
                ("next_grant_p50_us", micros(c.next_grant.p50)),
                ("next_grant_p99_us", micros(c.next_grant.p99)),
                ("handoff_p50_us", micros(c.handoff.p50)),
                ("wait_p99_us", micros(c.wait.p99)),
            ] {
                let _ = writeln!(
                    out,
                    "scale-waiters,{},1,{},{metric},{value:.1}",
                    c.k,
                    c.kind.name()
                );
            }
        }
        for c in &self.cpu {
            let kind = c["kind"].as_str().unwrap_or("?");
            for (m, v) in [
                ("seq_user_us", &c["sequential"]["user_us_per_cycle"]),
                ("seq_sys_us", &c["sequential"]["sys_us_per_cycle"]),
                ("seq_allocs", &c["sequential"]["allocs_per_cycle"]),
                ("seq_reallocs", &c["sequential"]["reallocs_per_cycle"]),
                ("seq_alloc_bytes", &c["sequential"]["alloc_bytes_per_cycle"]),
                ("soak_user_us", &c["soak"]["user_us_per_cycle"]),
                ("soak_sys_us", &c["soak"]["sys_us_per_cycle"]),
            ] {
                if let Some(v) = v.as_f64() {
                    let _ = writeln!(out, "cpu,,1,{kind},{m},{v:.2}");
                }
            }
        }
        out
    }

    /// The tables of BENCHMARKS.md.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        if !self.latency.is_empty() {
            md.push_str(
                "### Acquire + release latency (one cycle at a time)\n\n\
                 p50/p99 pooled over all rounds; [min–max] of the per-round p50 in brackets. \
                 The last column divides quorumlock's p99 by the median of its p99 over the \
                 healthy five-node runs.\n\n\
                 | scenario | N | run | quorumlock p50 | p99 | ideal p50 | p99 | rslock p50 | p99 \
                 | ql/ideal p50 | ql/rslock p50 | ql p99 / healthy p99 |\n\
                 |---|---|---|---|---|---|---|---|---|---|---|---|\n",
            );
            let healthy5 = self.healthy_p99(5);
            for run in &self.latency {
                let cell = |k: Kind| match run.get(k) {
                    Some(l) if l.pooled.n > 0 => format!(
                        "{} [{}–{}] | {}",
                        us(micros(l.pooled.p50)),
                        us(l.p50_rounds.min),
                        us(l.p50_rounds.max),
                        us(micros(l.pooled.p99))
                    ),
                    Some(l) => format!("– ({} errors) | –", l.errors),
                    None => "– | –".to_owned(),
                };
                let p50 = |k: Kind| run.get(k).map_or(0.0, |l| micros(l.pooled.p50));
                let ql99 = run
                    .get(Kind::Quorumlock)
                    .map_or(0.0, |l| micros(l.pooled.p99));
                let vs_healthy = if run.scenario == "healthy" {
                    "–".to_owned()
                } else {
                    ratio(ql99, healthy5)
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    run.scenario,
                    run.nodes,
                    run.run,
                    cell(Kind::Quorumlock),
                    cell(Kind::Ideal),
                    cell(Kind::Rslock),
                    ratio(p50(Kind::Quorumlock), p50(Kind::Ideal)),
                    ratio(p50(Kind::Quorumlock), p50(Kind::Rslock)),
                    vs_healthy,
                );
            }
            let _ = writeln!(
                md,
                "\nrslock samples per run (the others have every sample of every round): {}.\n",
                self.latency
                    .iter()
                    .flat_map(|r| r.results.iter().map(move |l| format!(
                        "{}/{}#{} {} {}",
                        r.scenario,
                        r.nodes,
                        r.run,
                        l.kind.name(),
                        l.pooled.n
                    )))
                    .filter(|s| s.contains("rslock"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !self.throughput.is_empty() {
            md.push_str(
                "### Throughput: lock cycles per second, distinct resources\n\n\
                 Median of the rounds, [min–max] in brackets.\n\n\
                 | tasks | quorumlock | ideal | rslock | ql/ideal | ql/rslock |\n\
                 |---|---|---|---|---|---|\n",
            );
            let mut tasks: Vec<usize> = self.throughput.iter().map(|t| t.tasks).collect();
            tasks.dedup();
            for n in tasks {
                let get = |k: Kind| self.throughput.iter().find(|t| t.tasks == n && t.kind == k);
                let cell = |k: Kind| {
                    get(k).map_or("–".to_owned(), |t| {
                        format!("{:.0} [{:.0}–{:.0}]", t.rate.median, t.rate.min, t.rate.max)
                    })
                };
                let m = |k: Kind| get(k).map_or(0.0, |t| t.rate.median);
                let _ = writeln!(
                    md,
                    "| {n} | {} | {} | {} | {} | {} |",
                    cell(Kind::Quorumlock),
                    cell(Kind::Ideal),
                    cell(Kind::Rslock),
                    ratio(m(Kind::Quorumlock), m(Kind::Ideal)),
                    ratio(m(Kind::Quorumlock), m(Kind::Rslock)),
                );
            }
            md.push('\n');
        }
        if !self.contention.is_empty() {
            md.push_str(
                "### Contention: K clients on one resource\n\n\
                 Each client holds the lock 1 ms, then pauses 1 ms. *Next grant*: from a \
                 release made while someone waited to the next grant, whoever got it. \
                 *Hand-off*: from a release to the grant of a client that was already waiting \
                 (the polling clients mostly re-grab instead: see the last column). *Wait*: \
                 from calling acquire to the grant, every grant.\n\n",
            );
            contention_rows(&mut md, &self.contention);
        }
        if !self.cpu.is_empty() {
            md.push_str(
                "### Client CPU per lock cycle and memory (a child process per contender)\n\n\
                 Allocations: calls to the allocator per cycle, one cycle at a time (the \
                 sequential part after its first 1,000 cycles; reallocations in brackets).\n\n\
                 | contender | sequential user+sys µs/cycle | allocations/cycle \
                 | concurrent user+sys µs/cycle | cycles | RSS first → last sample | RSS growth |\n\
                 |---|---|---|---|---|---|---|\n",
            );
            for c in &self.cpu {
                let f = |v: &Value| v.as_f64().unwrap_or(0.0);
                let seq = f(&c["sequential"]["user_us_per_cycle"])
                    + f(&c["sequential"]["sys_us_per_cycle"]);
                let soak = f(&c["soak"]["user_us_per_cycle"]) + f(&c["soak"]["sys_us_per_cycle"]);
                let rss: Vec<f64> = c["soak"]["rss"]
                    .as_array()
                    .map(|a| a.iter().map(|s| f(&s["rss_bytes"]) / 1048576.0).collect())
                    .unwrap_or_default();
                // The first sample after warm-up is the baseline: the one at
                // 0 cycles is taken before the tasks' buffers exist.
                let (first, last) = (
                    rss.get(1).copied().unwrap_or(0.0),
                    rss.last().copied().unwrap_or(0.0),
                );
                let _ = writeln!(
                    md,
                    "| {} | {seq:.1} (user {:.1}, sys {:.1}) | {:.1} ({:.1}) | {soak:.1} (user {:.1}, sys {:.1}) | {} | {first:.1} → {last:.1} MiB | {:+.1} MiB |",
                    c["kind"].as_str().unwrap_or("?"),
                    f(&c["sequential"]["user_us_per_cycle"]),
                    f(&c["sequential"]["sys_us_per_cycle"]),
                    f(&c["sequential"]["allocs_per_cycle"]),
                    f(&c["sequential"]["reallocs_per_cycle"]),
                    f(&c["soak"]["user_us_per_cycle"]),
                    f(&c["soak"]["sys_us_per_cycle"]),
                    c["soak"]["cycles"],
                    last - first,
                );
            }
            md.push_str("\nRSS samples (MiB), every sample:\n\n");
            for c in &self.cpu {
                let samples: Vec<String> = c["soak"]["rss"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| {
                                format!("{:.1}", s["rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let _ = writeln!(
                    md,
                    "- {}: {}",
                    c["kind"].as_str().unwrap_or("?"),
                    samples.join(", ")
                );
            }
            md.push('\n');
        }
        self.scale_markdown(&mut md);
        self.targets_markdown(&mut md);
        md
    }

    /// Median over the healthy runs with `nodes` nodes of quorumlock's p99.
    pub(crate) fn healthy_p99(&self, nodes: usize) -> f64 {
        let mut v: Vec<f64> = self
            .latency
            .iter()
            .filter(|r| r.scenario == "healthy" && r.nodes == nodes)
            .filter_map(|r| r.get(Kind::Quorumlock).map(|l| micros(l.pooled.p99)))
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }

    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(&self.to_json())?,
        )?;
        std::fs::write(dir.join("results.csv"), self.to_csv())?;
        std::fs::write(dir.join("summary.md"), self.to_markdown())?;
        if let Err(e) = self.plot(&dir.join("benchmarks.svg")) {
            eprintln!("plot failed: {e}");
        }
        if let Err(e) = self.plot_scaling(&dir.join("scaling.svg")) {
            eprintln!("scaling plot failed: {e}");
        }
        Ok(())
    }
}

/// The contention table (header and one row per contender and K), as the
/// report and the waiting-process summary print it.
pub fn contention_rows(md: &mut String, rows: &[Contention]) {
    md.push_str(
        "| K | contender | grants/s | next grant p50 | p99 | hand-offs | hand-off p50 \
         | wait p50 | wait p99 | re-grabs | overlaps |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {:.0} % | {} |",
            c.k,
            c.kind.name(),
            c.grants_per_s,
            us(micros(c.next_grant.p50)),
            us(micros(c.next_grant.p99)),
            c.handoff.n,
            us(micros(c.handoff.p50)),
            us(micros(c.wait.p50)),
            us(micros(c.wait.p99)),
            c.regrabs * 100.0,
            c.overlaps,
        );
    }
    md.push('\n');
}
