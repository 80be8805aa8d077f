//! What the examples read from Linux: resident memory, a named thread's
//! CPU time and wake-ups (from /proc), and the whole process's CPU time and
//! context switches (`getrusage`). Elsewhere every /proc reading is 0 /
//! `None`.
#![allow(dead_code)]

use std::time::Duration;

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The id of this process's thread called `name`.
pub fn thread_id(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .find_map(|task| {
            let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
            (comm.trim_end() == name).then(|| task.file_name().to_string_lossy().into_owned())
        })
}

/// CPU time used so far by thread `tid`.
pub fn thread_cpu(tid: &str) -> Option<Duration> {
    let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    Some(Duration::from_nanos(
        sched.split_whitespace().next()?.parse().ok()?,
    ))
}

/// Voluntary context switches of thread `tid`: one per wake-up from sleep.
pub fn thread_wakeups(tid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// What this process has used so far, exited threads included.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// CPU seconds, user + system.
    pub cpu: f64,
    /// Context switches, voluntary (`ru_nvcsw`) + involuntary (`ru_nivcsw`).
    pub switches: u64,
}

/// This process's CPU time and context switches so far (`getrusage`).
pub fn process_usage() -> Usage {
    // SAFETY: `getrusage` fills the struct it is given, and a zeroed
    // `rusage` is a valid value for it to overwrite.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        cpu: secs(usage.ru_utime) + secs(usage.ru_stime),
        switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
    }
}

/// CPU seconds (user + system) this process has used, exited threads
/// included.
pub fn process_cpu() -> f64 {
    process_usage().cpu
}
