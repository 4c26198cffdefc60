//! Resident memory and CPU time of a process, from Linux's `/proc`.
//!
//! CPU time is the sum over the process's threads of `/proc/<pid>/task/<tid>/schedstat`'s first field
//! (nanoseconds on a CPU), which is exact where `/proc/<pid>/stat`'s clock ticks (10 ms) are far too coarse for a
//! single stream. Threads that exited between two readings drop out of the sum, so [`cpu_ticks_ns`] (whole process,
//! tick resolution) is offered as a cross-check.

use std::fs;

/// `VmRSS` of `pid` in KiB, if the process exists.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// `RssAnon` of `pid` in KiB: the resident memory that is the process's own (heap, stacks), without the file-backed
/// pages of its executable and libraries, which `VmRSS` counts as they are touched.
pub fn anon_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "RssAnon:")
}

/// A `kB` field of `/proc/<pid>/status`.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time of every live thread of `pid`, in nanoseconds.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let path = entry.path().join("schedstat");
        if let Ok(text) = fs::read_to_string(path)
            && let Some(ns) = text
                .split_whitespace()
                .next()
                .and_then(|f| f.parse::<u64>().ok())
        {
            total += ns;
        }
    }
    Some(total)
}

/// `utime + stime` of `pid` from `/proc/<pid>/stat`, converted to nanoseconds (tick resolution).
pub fn cpu_ticks_ns(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after its closing parenthesis are fixed.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let hz = rustix::param::clock_ticks_per_second();
    Some((utime + stime) * 1_000_000_000 / hz.max(1))
}

#[cfg(test)]
#[path = "procfs_tests.rs"]
mod tests;
