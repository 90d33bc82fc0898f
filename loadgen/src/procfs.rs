//! CPU time and resident memory of processes from /proc (Linux), and the machine's busy time:
//! where the CPU went during a run (sidecar, Postgres, this load generator, everything).

use std::fs;

/// Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux).
pub const TICKS_PER_SECOND: f64 = 100.0;

/// utime + stime of a process, in ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|s| s.cpu)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    cpu: u64,
}

/// Fields of `/proc/<pid>/stat` after the command name (which may hold spaces and parens).
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is field 4, utime 14, stime 15.
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Stat {
        ppid,
        cpu: utime + stime,
    })
}

/// CPU ticks of `pid` and all its direct children (Postgres: the postmaster and its backends,
/// walsenders and workers). Children that exited are not counted.
pub fn tree_cpu_ticks(pid: u32) -> u64 {
    let mut total = cpu_ticks(pid).unwrap_or(0);
    let Ok(entries) = fs::read_dir("/proc") else {
        return total;
    };
    for entry in entries.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        if let Some(s) = parse_stat(&text) {
            if s.ppid == pid {
                total += s.cpu;
            }
        }
    }
    total
}

/// Resident set size of `pid` in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The machine's (busy, total) ticks summed over CPUs, from /proc/stat's `cpu` line.
pub fn machine_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total: u64 = values.iter().take(8).sum();
    let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// Number of CPUs (lines `cpuN` of /proc/stat).
pub fn cpus() -> usize {
    fs::read_to_string("/proc/stat")
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "1234 (a (b) c) S 77 1 1 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 5 0 9 0 0";
        assert_eq!(parse_stat(line), Some(Stat { ppid: 77, cpu: 281 }));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_visible() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_some());
        assert!(rss_kib(me).unwrap() > 0);
        let (busy, total) = machine_ticks().unwrap();
        assert!(busy <= total);
    }
}
