//! The standard `process_*` metrics (the names every Prometheus client library exports), read from `/proc/self` on
//! each scrape: CPU time, resident and virtual memory, threads, open and maximum file descriptors, start time.
//! Where `/proc` cannot be read (not Linux), the scrape simply has none of them.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// One reading of the process's own figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size, in bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, in bytes.
    pub virtual_bytes: u64,
    /// Threads.
    pub threads: u64,
    /// Start time, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// Parses `/proc/self/stat` (`stat`) with the kernel's boot time (`btime` of `/proc/stat`, seconds since the epoch),
/// the clock tick rate and the page size. None when the line does not have the fields.
pub fn parse_stat(
    stat: &str,
    boot_time: u64,
    ticks_per_second: u64,
    page_size: u64,
) -> Option<ProcessStats> {
    // The command name (field 2) may contain spaces and parentheses: the fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state), so field n is `fields[n - 3]`.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = ticks_per_second.max(1) as f64;
    Some(ProcessStats {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        threads: field(20)?,
        start_time_seconds: boot_time as f64 + field(22)? as f64 / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)?.saturating_mul(page_size),
    })
}

/// The boot time (`btime`) from `/proc/stat`.
pub fn parse_boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of open files from `/proc/self/limits` (None when unlimited or absent).
pub fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Registers the collector in `registry`.
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[derive(Debug)]
struct ProcessCollector;

fn read() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = parse_boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let ticks = rustix::param::clock_ticks_per_second();
    let page = rustix::param::page_size() as u64;
    parse_stat(&stat, boot, ticks, page)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(s) = read() {
            let cpu = ConstCounter::new(s.cpu_seconds);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent",
                Some(&Unit::Seconds),
                cpu.metric_type(),
            )?)?;
            gauge(
                &mut encoder,
                "process_resident_memory",
                "Resident memory size",
                Some(&Unit::Bytes),
                s.resident_bytes as f64,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory",
                "Virtual memory size",
                Some(&Unit::Bytes),
                s.virtual_bytes as f64,
            )?;
            gauge(
                &mut encoder,
                "process_threads",
                "Threads of the process",
                None,
                s.threads as f64,
            )?;
            gauge(
                &mut encoder,
                "process_start_time",
                "Start time of the process since the Unix epoch",
                Some(&Unit::Seconds),
                s.start_time_seconds,
            )?;
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Open file descriptors",
                None,
                dir.count() as f64,
            )?;
        }
        if let Some(max) = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .as_deref()
            .and_then(parse_max_fds)
        {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum open file descriptors",
                None,
                max as f64,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "process_metrics_tests.rs"]
mod tests;
