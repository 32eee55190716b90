//! The Markdown of the scaling curves and the table of ratios the targets
//! are stated in, computed from the run's own figures.

use std::fmt::Write as _;

use serde_json::Value;

use crate::contenders::Kind;
use crate::measure::micros;
use crate::report::{contention_rows, ratio, us, Results};
use crate::scaling::ScalePoint;

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// "1.08×, 1.13×, 1.11× (median 1.11×)", or the one ratio.
fn ratios(v: &[f64]) -> String {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    match v.len() {
        0 => "–".to_owned(),
        1 => format!("{:.2}×", v[0]),
        _ => format!(
            "{} (median {:.2}×)",
            v.iter()
                .map(|r| format!("{r:.2}×"))
                .collect::<Vec<_>>()
                .join(", "),
            median(v.clone()).unwrap_or(f64::NAN)
        ),
    }
}

fn div(a: f64, b: f64) -> f64 {
    if b > 0.0 && a > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

impl Results {
    fn point(&self, curve: &str, x: usize, kind: Kind) -> Option<&ScalePoint> {
        self.scale
            .iter()
            .find(|p| p.curve == curve && p.x == x && p.kind == kind && p.latency.n > 0)
    }

    fn curve_table(&self, md: &mut String, curve: &str, head: &str) {
        let mut xs: Vec<usize> = self
            .scale
            .iter()
            .filter(|p| p.curve == curve)
            .map(|p| p.x)
            .collect();
        xs.sort_unstable();
        xs.dedup();
        if xs.is_empty() {
            return;
        }
        md.push_str(head);
        let _ = writeln!(
            md,
            "| {} | quorumlock p50 | p99 | ideal p50 | p99 | rslock p50 | p99 \
             | ql cycles/s | ideal | rslock | ql/ideal p50 | ql/rslock p50 \
             | ql/ideal cycles/s | ql/rslock cycles/s |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            if curve == "nodes" { "N" } else { "tasks" }
        );
        for x in xs {
            let p = |k: Kind| self.point(curve, x, k);
            let lat = |k: Kind| {
                p(k).map_or("– | –".to_owned(), |p| {
                    format!(
                        "{} | {}",
                        us(micros(p.latency.p50)),
                        us(micros(p.latency.p99))
                    )
                })
            };
            let p50 = |k: Kind| p(k).map_or(0.0, |p| micros(p.latency.p50));
            let rate = |k: Kind| p(k).map_or(0.0, |p| p.rate.median);
            let _ = writeln!(
                md,
                "| {x} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} |",
                lat(Kind::Quorumlock),
                lat(Kind::Ideal),
                lat(Kind::Rslock),
                rate(Kind::Quorumlock),
                rate(Kind::Ideal),
                rate(Kind::Rslock),
                ratio(p50(Kind::Quorumlock), p50(Kind::Ideal)),
                ratio(p50(Kind::Quorumlock), p50(Kind::Rslock)),
                ratio(rate(Kind::Quorumlock), rate(Kind::Ideal)),
                ratio(rate(Kind::Quorumlock), rate(Kind::Rslock)),
            );
        }
        md.push('\n');
    }

    /// The tables of the three scaling curves (`scaling.svg` draws them).
    pub fn scale_markdown(&self, md: &mut String) {
        let tasks = self
            .scale
            .iter()
            .find(|p| p.curve == "nodes")
            .map_or(0, |p| p.tasks);
        self.curve_table(
            md,
            "nodes",
            &format!(
                "### Scaling with the number of nodes\n\n\
                 Latency: one acquire+release at a time, every sample pooled. Throughput: \
                 {tasks} tasks on distinct resources, median of the rounds.\n\n"
            ),
        );
        let nodes = self
            .scale
            .iter()
            .find(|p| p.curve == "tasks")
            .map_or(0, |p| p.nodes);
        self.curve_table(
            md,
            "tasks",
            &format!(
                "### Scaling with concurrency (N={nodes})\n\n\
                 Each task cycles on its own resource through one shared client; latency \
                 of every cycle under that load, throughput the median of the rounds.\n\n"
            ),
        );
        if !self.waiters.is_empty() {
            md.push_str(
                "### Scaling with waiting processes: K processes on one resource\n\n\
                 K separate client processes (one client each) hold the lock 1 ms, then \
                 pause 1 ms. *Next grant*: from a release made while another process \
                 waited to the next grant, whoever got it (the hand-off latency). \
                 *Hand-off*: releases followed by a grant to a process that was already \
                 waiting. Times from CLOCK_MONOTONIC, shared by the processes.\n\n",
            );
            contention_rows(md, &self.waiters);
        }
    }

    /// Healthy N=5 p50 ratios, one per run (the healthy scenario, or the
    /// node curve's N=5 point without it).
    fn healthy_p50_ratios(&self, other: Kind) -> (Vec<f64>, &'static str) {
        let v: Vec<f64> = self
            .latency
            .iter()
            .filter(|r| r.scenario == "healthy" && r.nodes == 5)
            .filter_map(|r| {
                Some(div(
                    micros(r.get(Kind::Quorumlock)?.pooled.p50),
                    micros(r.get(other)?.pooled.p50),
                ))
            })
            .collect();
        if !v.is_empty() {
            return (v, "healthy");
        }
        let v = match (
            self.point("nodes", 5, Kind::Quorumlock),
            self.point("nodes", 5, other),
        ) {
            (Some(a), Some(b)) => vec![div(micros(a.latency.p50), micros(b.latency.p50))],
            _ => Vec::new(),
        };
        (v, "scale-nodes")
    }

    /// Cycles/s at `tasks` tasks: the throughput scenario, or the task
    /// curve without it.
    fn rate_at(&self, tasks: usize, kind: Kind) -> Option<(f64, &'static str)> {
        if let Some(t) = self
            .throughput
            .iter()
            .find(|t| t.tasks == tasks && t.kind == kind)
        {
            return Some((t.rate.median, "throughput"));
        }
        self.point("tasks", tasks, kind)
            .map(|p| (p.rate.median, "scale-tasks"))
    }

    fn cpu_of(&self, kind: Kind) -> Option<&Value> {
        self.cpu
            .iter()
            .find(|c| c["kind"].as_str() == Some(kind.name()))
    }

    /// The ratios the targets are stated in, from this run's figures.
    pub fn targets_markdown(&self, md: &mut String) {
        let mut rows: Vec<(String, String, String)> = Vec::new();

        for other in [Kind::Ideal, Kind::Rslock] {
            let (v, src) = self.healthy_p50_ratios(other);
            if !v.is_empty() {
                rows.push((
                    format!("acquire+release p50, healthy N=5: ql/{}", other.name()),
                    format!("{} run(s), `{src}`", v.len()),
                    ratios(&v),
                ));
            }
        }

        for tasks in [64, 256] {
            for other in [Kind::Ideal, Kind::Rslock] {
                if let (Some((a, src)), Some((b, _))) = (
                    self.rate_at(tasks, Kind::Quorumlock),
                    self.rate_at(tasks, other),
                ) {
                    rows.push((
                        format!("cycles/s at {tasks} tasks: ql/{}", other.name()),
                        format!("{a:.0} against {b:.0} (`{src}`)"),
                        ratios(&[div(a, b)]),
                    ));
                }
            }
        }

        let allocs = |k: Kind| {
            self.cpu_of(k)
                .and_then(|c| c["sequential"]["allocs_per_cycle"].as_f64())
        };
        for other in [Kind::Ideal, Kind::Rslock] {
            if let (Some(a), Some(b)) = (allocs(Kind::Quorumlock), allocs(other)) {
                rows.push((
                    format!("allocations per cycle: ql/{}", other.name()),
                    format!("{a:.1} against {b:.1}"),
                    ratios(&[div(a, b)]),
                ));
            }
        }

        let healthy = {
            let h = self.healthy_p99(5);
            if h > 0.0 {
                h
            } else {
                self.point("nodes", 5, Kind::Quorumlock)
                    .map_or(0.0, |p| micros(p.latency.p99))
            }
        };
        for (scenario, what) in [
            ("hung-node", "one node hung"),
            ("slow-node", "one node +20 ms"),
        ] {
            let v: Vec<f64> = self
                .latency
                .iter()
                .filter(|r| r.scenario == scenario)
                .filter_map(|r| r.get(Kind::Quorumlock))
                .map(|l| div(micros(l.pooled.p99), healthy))
                .collect();
            if !v.is_empty() {
                rows.push((
                    format!("ql p99 with {what} / healthy N=5 p99"),
                    format!("healthy p99 {}", us(healthy)),
                    ratios(&v),
                ));
            }
        }

        let at32 = |k: Kind| {
            self.waiters
                .iter()
                .find(|c| c.k == 32 && c.kind == k)
                .map(|c| (c, "32 processes, `scale-waiters`"))
                .or_else(|| {
                    self.contention
                        .iter()
                        .find(|c| c.k == 32 && c.kind == k)
                        .map(|c| (c, "32 clients in one process, `contention`"))
                })
        };
        if let (Some((q, src)), Some((r, _))) = (at32(Kind::Quorumlock), at32(Kind::Rslock)) {
            rows.push((
                "one resource, 32 waiters: grants/s ql/rslock".to_owned(),
                format!(
                    "{:.0} against {:.0} ({src})",
                    q.grants_per_s, r.grants_per_s
                ),
                ratios(&[div(q.grants_per_s, r.grants_per_s)]),
            ));
            rows.push((
                "one resource, 32 waiters: next-grant p50 ql/rslock".to_owned(),
                format!(
                    "{} against {} (p99 {} against {})",
                    us(micros(q.next_grant.p50)),
                    us(micros(r.next_grant.p50)),
                    us(micros(q.next_grant.p99)),
                    us(micros(r.next_grant.p99)),
                ),
                ratios(&[div(micros(q.next_grant.p50), micros(r.next_grant.p50))]),
            ));
        }

        if let Some(c) = self.cpu_of(Kind::Quorumlock) {
            let rss: Vec<f64> = c["soak"]["rss"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s["rss_bytes"].as_f64())
                        .map(|b| b / 1048576.0)
                        .collect()
                })
                .unwrap_or_default();
            // As in the CPU table: the sample at 0 cycles precedes the
            // tasks' buffers, the first one after it is the baseline.
            if let (Some(first), Some(last)) = (rss.get(1), rss.last()) {
                rows.push((
                    format!(
                        "ql RSS over {} cycles, first → last sample",
                        c["soak"]["cycles"]
                    ),
                    format!("{first:.1} → {last:.1} MiB ({:+.1} MiB)", last - first),
                    ratios(&[div(*last, *first)]),
                ));
            }
        }

        if rows.is_empty() {
            return;
        }
        md.push_str(
            "### Ratios for the targets (this run)\n\n\
             | target | figures | ratio |\n|---|---|---|\n",
        );
        for (target, figures, ratio) in rows {
            let _ = writeln!(md, "| {target} | {figures} | {ratio} |");
        }
        md.push('\n');
    }
}
