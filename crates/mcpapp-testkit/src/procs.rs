//! The process table, read from `/proc`, to show which processes really remain.

/// One row of the process table.
struct ProcStat {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    /// Not a zombie or dead: it is still running.
    alive: bool,
}

/// Reads the process table from `/proc`.
fn processes() -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the parenthesised command name: state, ppid, pgrp.
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            let pgrp = fields.next()?.parse().ok()?;
            Some(ProcStat {
                pid,
                ppid,
                pgrp,
                alive: state != "Z" && state != "X",
            })
        })
        .collect()
}

/// The process ids among `pids` that are alive (present in the process table and not
/// zombies).
pub fn live(pids: &[u32]) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.alive && pids.contains(&p.pid))
        .map(|p| p.pid)
        .collect()
}

/// Live processes (not zombies) in any of the process groups `groups`: a supervised child and
/// everything it started share its group.
pub fn live_in_groups(groups: &[u32]) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.alive && groups.contains(&p.pgrp))
        .map(|p| p.pid)
        .collect()
}

/// Live children of the process `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.alive && p.ppid == parent)
        .map(|p| p.pid)
        .collect()
}
