//! A process's memory from `/proc/PID/smaps_rollup`.

use anyhow::{Context, Result};

/// Sizes in KiB, as the kernel reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Memory {
    pub rss: u64,
    pub pss: u64,
    /// Resident anonymous memory (heap, stacks, guest memories).
    pub anon: u64,
    pub pss_anon: u64,
    pub pss_file: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Result<Memory> {
        let path = format!("/proc/{pid}/smaps_rollup");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        Memory::parse(&text).with_context(|| format!("parsing {path}"))
    }

    pub fn parse(text: &str) -> Result<Memory> {
        let field = |name: &str| -> Result<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
                .with_context(|| format!("no `{name}:` line"))
        };
        Ok(Memory {
            rss: field("Rss")?,
            pss: field("Pss")?,
            anon: field("Anonymous")?,
            pss_anon: field("Pss_Anon")?,
            pss_file: field("Pss_File")?,
        })
    }

    /// Resident file-backed (and shared-memory) pages: RSS minus anonymous.
    pub fn file(&self) -> u64 {
        self.rss.saturating_sub(self.anon)
    }
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55a0c0000000-7ffd1a1f9000 ---p 00000000 00:00 0                          [rollup]
Rss:               40000 kB
Pss:               30000 kB
Pss_Dirty:         17000 kB
Pss_Anon:          17000 kB
Pss_File:          13000 kB
Pss_Shmem:             0 kB
Shared_Clean:      20000 kB
Anonymous:         17408 kB
";

    #[test]
    fn parses_the_rollup_and_does_not_confuse_prefixed_fields() {
        let m = Memory::parse(SAMPLE).unwrap();
        assert_eq!(
            m,
            Memory {
                rss: 40000,
                pss: 30000,
                anon: 17408,
                pss_anon: 17000,
                pss_file: 13000,
            }
        );
        assert_eq!(m.file(), 40000 - 17408);
        assert!(Memory::parse("Rss: 1 kB\n").is_err());
    }

    #[test]
    fn reads_this_process() {
        let m = Memory::of(std::process::id()).unwrap();
        assert!(m.rss > 0 && m.pss > 0 && m.pss <= m.rss);
    }
}
