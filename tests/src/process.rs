//! Spawning child processes that die with the test process.
//!
//! Every child gets `PR_SET_PDEATHSIG = SIGTERM`. Linux delivers that signal when the *thread*
//! that forked the child exits, not the process — and test threads and tokio workers come and go —
//! so all forks happen on one dedicated thread that lives as long as the process. Also owns the
//! small signal/wait helpers that work on bare pids (for the `atexit` teardown).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` from the process-lifetime spawner thread; the child receives SIGTERM when this
/// process dies, however it dies.
pub fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe functions.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nobody will signal us.
            // (No allocation here: another thread may have held the allocator's lock at fork.)
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let sender = SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Request>();
            std::thread::Builder::new()
                .name("kubewasm-tests-spawner".into())
                .spawn(move || {
                    // The sender lives in a static, so this loop — and the thread — never end.
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                })
                .expect("spawn the spawner thread");
            Mutex::new(tx)
        })
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let (reply_tx, reply_rx) = mpsc::channel();
    sender.send((cmd, reply_tx)).map_err(|_| io::Error::other("spawner thread is gone"))?;
    reply_rx.recv().map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// Sends `signal` to `pid`; false if there is no such process.
pub fn signal(pid: u32, signal: libc::c_int) -> bool {
    // SAFETY: plain syscall.
    unsafe { libc::kill(pid as libc::pid_t, signal) == 0 }
}

/// Whether a process with this pid exists (possibly as a zombie).
pub fn exists(pid: u32) -> bool {
    // SAFETY: plain syscall; signal 0 only checks.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// SIGTERM, wait up to `grace`, then SIGKILL, for a child of this process known only by pid. Reaps
/// it. Used from `atexit`, where no `Child` handle is reachable.
pub fn terminate_pid(pid: u32, grace: Duration) {
    let reap = || {
        let mut status = 0;
        // SAFETY: plain syscall on our own child.
        let rc = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
        rc == pid as libc::pid_t || rc == -1
    };
    if !signal(pid, libc::SIGTERM) {
        reap();
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if reap() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(pid, libc::SIGKILL);
    // SAFETY: plain syscall on our own child.
    unsafe {
        let mut status = 0;
        libc::waitpid(pid as libc::pid_t, &mut status, 0);
    }
}

/// The resident memory of process `pid` in bytes (`VmRSS` of `/proc/PID/status`); `None` once it
/// is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// The most resident memory process `pid` held in bytes (`VmHWM` of `/proc/PID/status`) since
/// it started or since [`reset_peak_rss`]; `None` once it is gone.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// Starts [`peak_rss_bytes`] of process `pid` again from its resident memory now.
pub fn reset_peak_rss(pid: u32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

/// The proportional set size of process `pid` in bytes (`Pss` of `/proc/PID/smaps_rollup`: pages
/// shared with other processes count by their share); `None` once it is gone.
pub fn pss_bytes(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let kib: u64 = rollup.lines().find_map(|l| l.strip_prefix("Pss:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}
