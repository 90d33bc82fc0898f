//! The figures of a run: writes matched to the events that delivered them, latency
//! percentiles, lag per 5-second window (bounded or growing), CPU split and memory.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::listen::{self, Endpoint, StreamLog};
use crate::procfs;
use crate::write::Written;
use crate::Args;

/// Metrics of the sidecar read at each sample.
const METRICS: [&str; 4] = [
    "docstore_changelog_retained_bytes",
    "docstore_changelog_retained_transactions",
    "docstore_source_slot_lag_bytes",
    "docstore_session_targets",
];

/// CPU, memory and the sidecar's gauges at one moment.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    sidecar_cpu: Option<u64>,
    postgres_cpu: Option<u64>,
    own_cpu: Option<u64>,
    machine: Option<(u64, u64)>,
    sidecar_rss_kib: Option<u64>,
    metrics: Vec<(String, Option<f64>)>,
}

impl Sample {
    pub async fn take(args: &Args, endpoint: &Endpoint) -> Sample {
        Sample {
            at: Instant::now(),
            sidecar_cpu: args.sidecar_pid.and_then(procfs::cpu_ticks),
            postgres_cpu: args.postmaster_pid.map(procfs::tree_cpu_ticks),
            own_cpu: procfs::cpu_ticks(std::process::id()),
            machine: procfs::machine_ticks(),
            sidecar_rss_kib: args.sidecar_pid.and_then(procfs::rss_kib),
            metrics: listen::scrape(endpoint, &METRICS).await.unwrap_or_default(),
        }
    }

    fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| *v)
    }
}

/// Share of one CPU (100 = one core busy) used between two samples.
fn cpu_percent(a: Option<u64>, b: Option<u64>, wall: Duration) -> Option<f64> {
    let ticks = b?.checked_sub(a?)?;
    Some(ticks as f64 / procfs::TICKS_PER_SECOND / wall.as_secs_f64().max(1e-9) * 100.0)
}

/// The `q` quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied()
}

fn ms(us: Option<i64>) -> String {
    us.map_or("-".to_owned(), |v| format!("{:.1}", v as f64 / 1000.0))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.0}%"))
}

/// p50 / p99 / max of latencies in microseconds, as `a / b / c ms`.
pub fn quantile_summary(values: Vec<i64>) -> String {
    summary(values)
}

fn summary(mut values: Vec<i64>) -> String {
    values.sort_unstable();
    format!(
        "{} / {} / {}",
        ms(quantile(&values, 0.5)),
        ms(quantile(&values, 0.99)),
        ms(values.last().copied())
    )
}

/// p99 of latencies per 5-second window of commit time: the first and the last window.
pub fn windows(points: &[(i64, i64)], from_us: i64) -> String {
    let mut by: HashMap<i64, Vec<i64>> = HashMap::new();
    for &(at, latency) in points {
        by.entry((at - from_us).max(0) / 5_000_000)
            .or_default()
            .push(latency);
    }
    let mut keys: Vec<i64> = by.keys().copied().collect();
    keys.sort_unstable();
    let p99 = |k: &i64| {
        let mut v = by.get(k).cloned().unwrap_or_default();
        v.sort_unstable();
        ms(quantile(&v, 0.99))
    };
    match (keys.first(), keys.last()) {
        (Some(a), Some(b)) if a != b => format!("{} -> {}", p99(a), p99(b)),
        (Some(a), _) => p99(a),
        _ => "-".to_owned(),
    }
}

/// Sidecar, Postgres, loadgen and machine CPU between two samples, as ` a | b | c | d ` table
/// cells.
pub fn cpu_cells(from: &Sample, to: &Sample) -> String {
    let wall = to.at.duration_since(from.at);
    let machine = match (from.machine, to.machine) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            Some((b1 - b0) as f64 / (t1 - t0) as f64 * 100.0 * procfs::cpus() as f64)
        }
        _ => None,
    };
    format!(
        "{} | {} | {} | {}",
        pct(cpu_percent(from.sidecar_cpu, to.sidecar_cpu, wall)),
        pct(cpu_percent(from.postgres_cpu, to.postgres_cpu, wall)),
        pct(cpu_percent(from.own_cpu, to.own_cpu, wall)),
        pct(machine)
    )
}

/// `--deliveries-out`: the run's writes and every delivery with a commit time, one a line.
///
/// # Errors
/// The file could not be written.
pub fn write_deliveries(
    path: &std::path::Path,
    writes: &[Written],
    logs: &[StreamLog],
) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for w in writes {
        writeln!(out, "W {}", w.path)?;
    }
    for d in logs.iter().flat_map(|l| &l.deliveries) {
        if let Some(c) = d.commit_us {
            writeln!(out, "D {} {}", d.path, d.received_us - c)?;
        }
    }
    out.flush()
}

/// Everything a run measured.
pub struct Run<'a> {
    pub args: &'a Args,
    pub subscriptions: usize,
    pub subscribe_time: Duration,
    /// From the end of the writes until every write was delivered (or the drain ran out).
    pub drain_time: Duration,
    pub started_us: i64,
    pub ended_us: i64,
    pub writes: Vec<Written>,
    pub logs: Vec<StreamLog>,
    /// Before subscribing, subscribed, at the end of the writes, after the drain.
    pub samples: [Sample; 4],
}

impl Run<'_> {
    pub fn print(&self) {
        let [before, subscribed, loaded, drained] = &self.samples;
        let wall = loaded.at.duration_since(subscribed.at);
        let seconds = (self.ended_us - self.started_us) as f64 / 1e6;
        let resets: Vec<&String> = self.logs.iter().flat_map(|l| &l.resets).collect();
        let heartbeats: u64 = self.logs.iter().map(|l| l.heartbeats).sum();
        let bytes: u64 = self.logs.iter().map(|l| l.bytes).sum();

        // Writes against deliveries (first delivery of each path).
        let mut delivered: HashMap<&str, (i64, Option<i64>)> = HashMap::new();
        for d in self.logs.iter().flat_map(|l| &l.deliveries) {
            delivered
                .entry(d.path.as_str())
                .or_insert((d.received_us, d.commit_us));
        }
        let mut from_return = Vec::new();
        let mut from_commit = Vec::new();
        let mut missed = 0usize;
        // Undelivered writes per stream (the stream of the write's city), and the first few.
        let mut missed_by_stream: Vec<usize> = vec![0; self.args.streams];
        let mut missed_paths = Vec::new();
        let mut missed_by_connection: Vec<usize> = vec![0; self.args.connections.max(1)];
        for w in &self.writes {
            if !delivered.contains_key(w.path.as_str()) {
                let stream =
                    usize::try_from(w.city).unwrap_or(usize::MAX) / self.args.targets.max(1);
                if let Some(n) = missed_by_stream.get_mut(stream) {
                    *n += 1;
                }
                let number = w
                    .path
                    .rsplit('-')
                    .next()
                    .and_then(|n| n.parse::<usize>().ok());
                if let Some(n) = number
                    .and_then(|i| missed_by_connection.get_mut(i % self.args.connections.max(1)))
                {
                    *n += 1;
                }
                if missed_paths.len() < 3 {
                    missed_paths.push(format!("{} (city c{})", w.path, w.city));
                }
            }
        }
        for w in &self.writes {
            match delivered.get(w.path.as_str()) {
                Some(&(received, commit)) => {
                    from_return.push(received - w.committed_us);
                    if let Some(c) = commit {
                        from_commit.push((c, received - c));
                    }
                }
                None => missed += 1,
            }
        }
        // Without writes of ours (pgbench): every change event in the window.
        let mut positions = HashSet::new();
        if self.writes.is_empty() {
            for m in self.logs.iter().flat_map(|l| &l.marks) {
                if let Some(c) = m.commit_us {
                    if c >= self.started_us && c <= self.ended_us {
                        positions.insert(m.position.as_str());
                        from_commit.push((c, m.received_us - c));
                    }
                }
            }
        }
        let behind = self.writes.iter().map(|w| w.behind).max();
        let rate_done = if self.writes.is_empty() {
            // Over the span of the commit times seen (pgbench runs inside the window).
            let first = from_commit.iter().map(|p| p.0).min().unwrap_or(0);
            let last = from_commit.iter().map(|p| p.0).max().unwrap_or(0);
            positions.len() as f64 / ((last - first) as f64 / 1e6).max(1e-3)
        } else {
            self.writes.len() as f64 / seconds.max(1e-9)
        };
        let sidecar_cpu = cpu_percent(subscribed.sidecar_cpu, loaded.sidecar_cpu, wall);
        let postgres_cpu = cpu_percent(subscribed.postgres_cpu, loaded.postgres_cpu, wall);
        let own_cpu = cpu_percent(subscribed.own_cpu, loaded.own_cpu, wall);
        let machine = match (subscribed.machine, loaded.machine) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                Some((b1 - b0) as f64 / (t1 - t0) as f64 * 100.0 * procfs::cpus() as f64)
            }
            _ => None,
        };
        let rss = |s: &Sample| s.sidecar_rss_kib.map_or("-".to_owned(), |k| format!("{k}"));
        let per_subscription = match (before.sidecar_rss_kib, subscribed.sidecar_rss_kib) {
            (Some(a), Some(b)) if self.subscriptions > 0 => {
                format!(
                    "{:.2} KiB",
                    (b as f64 - a as f64) / self.subscriptions as f64
                )
            }
            _ => "-".to_owned(),
        };
        let retained = |s: &Sample| {
            format!(
                "{} transactions, {} bytes",
                s.metric(METRICS[1])
                    .map_or("-".to_owned(), |v| format!("{v:.0}")),
                s.metric(METRICS[0])
                    .map_or("-".to_owned(), |v| format!("{v:.0}"))
            )
        };
        let per_transaction = match (
            loaded.metric(METRICS[0]),
            loaded.metric(METRICS[1]),
            subscribed.metric(METRICS[0]),
            subscribed.metric(METRICS[1]),
        ) {
            (Some(b1), Some(t1), Some(b0), Some(t0)) if t1 > t0 => {
                format!("{:.0} bytes", (b1 - b0) / (t1 - t0))
            }
            _ => "-".to_owned(),
        };
        let rss_per_transaction = match (
            subscribed.sidecar_rss_kib,
            loaded.sidecar_rss_kib,
            subscribed.metric(METRICS[1]),
            loaded.metric(METRICS[1]),
        ) {
            (Some(a), Some(b), Some(t0), Some(t1)) if t1 > t0 => {
                format!("{:.0} bytes", (b as f64 - a as f64) * 1024.0 / (t1 - t0))
            }
            _ => "-".to_owned(),
        };
        let from_return_summary = summary(from_return);
        let window = windows(&from_commit, self.started_us);
        let from_commit_summary = summary(from_commit.iter().map(|p| p.1).collect());
        let a = self.args;
        println!("== docstore-loadgen {}", a.label);
        println!(
            "subscriptions        {} ({} streams x {}), all live after {:.1} s",
            self.subscriptions,
            a.streams,
            a.targets,
            self.subscribe_time.as_secs_f64()
        );
        if self.writes.is_empty() {
            println!(
                "observed             {:.1} s: {} transactions seen in change events ({rate_done:.0}/s over their commit times)",
                seconds,
                positions.len()
            );
        } else {
            println!(
                "writes               {} in {seconds:.1} s ({rate_done:.0}/s of {} asked; at most {:.1} ms behind schedule) over {} connections",
                self.writes.len(),
                a.rate,
                behind.map_or(0.0, |b| b.as_secs_f64() * 1000.0),
                a.connections
            );
            println!(
                "delivered            {} of {} writes ({missed} not delivered {:.1} s after the last write)",
                self.writes.len() - missed,
                self.writes.len(),
                self.drain_time.as_secs_f64()
            );
            if missed > 0 {
                let streams: Vec<String> = missed_by_stream
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(s, n)| format!("s{s}:{n}"))
                    .collect();
                let events: Vec<String> = self
                    .logs
                    .iter()
                    .enumerate()
                    .map(|(s, l)| format!("s{s}:{}", l.marks.len()))
                    .collect();
                println!(
                    "undelivered          by stream {}; e.g. {}",
                    streams.join(" "),
                    missed_paths.join(", ")
                );
                println!("events by stream     {}", events.join(" "));
                println!("undelivered by writer connection {missed_by_connection:?}");
            }
            println!("commit returned -> event  p50 / p99 / max  {from_return_summary} ms");
        }
        println!("commitTime -> event       p50 / p99 / max  {from_commit_summary} ms");
        println!("p99 first -> last 5 s     {window} ms");
        println!(
            "events               {heartbeats} heartbeats, {} resets {:?}, {bytes} bytes read",
            resets.len(),
            resets.iter().take(3).collect::<Vec<_>>()
        );
        println!(
            "cpu (100% = 1 core)  sidecar {}  postgres {}  loadgen {}  machine {} of {}",
            pct(sidecar_cpu),
            pct(postgres_cpu),
            pct(own_cpu),
            pct(machine),
            procfs::cpus() * 100
        );
        println!(
            "sidecar rss KiB      before {}  subscribed {}  after writes {}  drained {}  => {per_subscription} per subscription",
            rss(before),
            rss(subscribed),
            rss(loaded),
            rss(drained)
        );
        println!(
            "retained             subscribed: {}; after writes: {} => {per_transaction} per transaction by the gauge, {rss_per_transaction} by RSS",
            retained(subscribed),
            retained(loaded)
        );
        println!(
            "slot lag bytes       after writes {}  drained {}",
            loaded
                .metric(METRICS[2])
                .map_or("-".to_owned(), |v| format!("{v:.0}")),
            drained
                .metric(METRICS[2])
                .map_or("-".to_owned(), |v| format!("{v:.0}"))
        );
        let done = if self.writes.is_empty() {
            format!("{rate_done:.0} seen")
        } else {
            format!("{:.0} -> {rate_done:.0}", a.rate)
        };
        let delivered = if self.writes.is_empty() {
            format!("{} txns", positions.len())
        } else {
            format!("{} / {missed}", self.writes.len() - missed)
        };
        println!(
            "ROW | {} | {} | {done} | {delivered} | {} | {} | {window} | {} | {} | {} | {} | {} |",
            a.label,
            self.subscriptions,
            if self.writes.is_empty() {
                "-".to_owned()
            } else {
                from_return_summary.clone()
            },
            from_commit_summary,
            pct(sidecar_cpu),
            pct(postgres_cpu),
            pct(own_cpu),
            pct(machine),
            resets.len()
        );
        if a.fanout {
            self.print_fanout(&per_subscription, sidecar_cpu, postgres_cpu, own_cpu);
        }
    }

    /// `--fanout`: every write is expected once on every stream. Latency from the write's
    /// commitTime to each listener, and per write to the last listener (the paper's Fig. 9).
    fn print_fanout(
        &self,
        per_subscription: &str,
        sidecar_cpu: Option<f64>,
        postgres_cpu: Option<f64>,
        own_cpu: Option<f64>,
    ) {
        let mut by_path: HashMap<&str, Vec<i64>> = HashMap::new();
        for d in self.logs.iter().flat_map(|l| &l.deliveries) {
            if let Some(c) = d.commit_us {
                by_path
                    .entry(d.path.as_str())
                    .or_default()
                    .push(d.received_us - c);
            }
        }
        let mut every = Vec::new();
        let mut last = Vec::new();
        let mut complete = 0usize;
        for w in &self.writes {
            if let Some(v) = by_path.get(w.path.as_str()) {
                every.extend_from_slice(v);
                if v.len() >= self.subscriptions {
                    complete += 1;
                }
                if let Some(m) = v.iter().max() {
                    last.push(*m);
                }
            }
        }
        let deliveries = every.len();
        let expected = self.writes.len() * self.subscriptions;
        let every_summary = summary(every);
        let last_summary = summary(last);
        println!(
            "fan-out              {deliveries} of {expected} deliveries ({} listeners x {} writes); {complete} writes reached every listener",
            self.subscriptions,
            self.writes.len()
        );
        println!("commitTime -> each listener   p50 / p99 / max  {every_summary} ms");
        println!("commitTime -> last listener   p50 / p99 / max  {last_summary} ms (per write)");
        println!(
            "FANOUT | {} | {} | {}/{} | {deliveries}/{expected} | {every_summary} | {last_summary} | {:.1} s | {per_subscription} | {} | {} | {} |",
            self.args.label,
            self.subscriptions,
            complete,
            self.writes.len(),
            self.subscribe_time.as_secs_f64(),
            pct(sidecar_cpu),
            pct(postgres_cpu),
            pct(own_cpu),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile(&[7], 0.99), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn windows_compare_first_and_last() {
        let points = [(0, 1000), (1_000_000, 3000), (12_000_000, 9000)];
        assert_eq!(windows(&points, 0), "3.0 -> 9.0");
        assert_eq!(windows(&points[..1], 0), "1.0");
    }
}
