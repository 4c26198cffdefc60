//! The processes measured and their children: CPU time and RSS read from /proc.

use super::*;

/// A process whose CPU and memory are read; with `tree`, its descendants count too (a peer may fork workers).
#[derive(Debug, Clone)]
pub(super) struct Proc {
    pub(super) name: &'static str,
    pub(super) pid: u32,
    pub(super) tree: bool,
}

/// The measured processes: the fake provider first, the load generator last, the relays between.
#[derive(Debug, Clone)]
pub(super) struct Procs(pub(super) Vec<Proc>);

impl Procs {
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn index(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|p| p.name == name)
    }

    pub(super) fn loadgen(&self) -> usize {
        self.0.len() - 1
    }

    /// Each process's pids now: itself, and for a tree its live descendants.
    pub(super) fn pid_sets(&self) -> Vec<Vec<u32>> {
        let parents = if self.0.iter().any(|p| p.tree) {
            parent_table()
        } else {
            Vec::new()
        };
        self.0
            .iter()
            .map(|p| {
                if p.tree {
                    descendants(p.pid, &parents)
                } else {
                    vec![p.pid]
                }
            })
            .collect()
    }
}

/// (pid, parent pid) of every process, from `/proc/<pid>/stat`.
pub(super) fn parent_table() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The command name (field 2) may hold spaces; after its closing parenthesis come state, then ppid.
            let ppid = stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// `root` and every process below it in `parents`.
pub(super) fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && !out.contains(pid))
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    out
}

pub(super) fn cpu_of(set: &[u32]) -> u64 {
    set.iter().map(|&p| procfs::cpu_ns(p).unwrap_or(0)).sum()
}

pub(super) fn rss_of(set: &[u32]) -> u64 {
    set.iter().map(|&p| procfs::rss_kib(p).unwrap_or(0)).sum()
}

/// SIGKILLs `root`'s descendants (deepest last found first); the root itself goes with `kill_on_drop`.
pub(super) fn kill_descendants(root: u32) {
    let tree = descendants(root, &parent_table());
    for &pid in tree.iter().skip(1).rev() {
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}
