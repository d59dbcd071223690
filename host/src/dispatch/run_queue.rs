//! How long this thread has waited for a CPU: runnable but not running,
//! because other threads held the cores (`/proc/thread-self/schedstat`,
//! its second field: the scheduler's run-queue delay, in nanoseconds).
//!
//! A poll's wall time less this wait is the time it held its thread,
//! computing or blocked in a system call alike; what a busy machine adds
//! by preempting it is not the call's doing. (Time the hypervisor took
//! from the whole VM, steal time, shows as neither: it still counts as
//! held.)

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Duration;

thread_local! {
    /// This thread's `schedstat`, opened on first use (`/proc/thread-self`
    /// resolves to the thread that opens it). `None` where it cannot be
    /// opened: no `/proc`, or no descriptor left then.
    static SCHEDSTAT: Option<File> = File::open("/proc/thread-self/schedstat").ok();
}

/// This thread's run-queue wait so far (~0.5 µs: one `pread`). `None`
/// where the kernel does not say.
pub fn waited() -> Option<Duration> {
    SCHEDSTAT.with(|file| {
        let mut text = [0u8; 96];
        let read = file.as_ref()?.read_at(&mut text, 0).ok()?;
        parse_waited(&text[..read])
    })
}

/// The run-queue delay of a `schedstat` line: `<cpu ns> <waited ns> <slices>`.
fn parse_waited(line: &[u8]) -> Option<Duration> {
    let line = std::str::from_utf8(line).ok()?;
    let nanos = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_field_is_the_wait() {
        assert_eq!(
            parse_waited(b"28245401 28207124 8\n"),
            Some(Duration::from_nanos(28_207_124))
        );
        assert_eq!(parse_waited(b"28245401\n"), None);
        assert_eq!(parse_waited(b"1 x 2\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_says_and_the_wait_never_goes_back() {
        let before = waited().expect("/proc/thread-self/schedstat");
        std::thread::yield_now();
        assert!(waited().unwrap() >= before);
    }
}
