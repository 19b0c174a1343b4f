//! The one control plane shared by all tests of a test binary.
//!
//! Started lazily by the first test that asks, never stopped by a test (it is only reachable as
//! `&'static`), and torn down when the process ends: an `atexit` handler stops it gracefully and
//! removes its directory when the harness exits normally (also when tests failed); if the process
//! is killed instead, the child gets SIGTERM through `PR_SET_PDEATHSIG` and the next test process
//! sweeps the directory.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::controlplane::{ControlPlane, Options};
use crate::process;

static SHARED: tokio::sync::OnceCell<Result<ControlPlane, String>> = tokio::sync::OnceCell::const_new();
static SHARED_PID: AtomicU32 = AtomicU32::new(0);
static SHARED_RUN_DIR: OnceLock<PathBuf> = OnceLock::new();

impl ControlPlane {
    /// The control plane shared by every test in this process, started on first use.
    ///
    /// Panics if it cannot be started (every test that asks reports the same error; a failed
    /// build is not retried). Tests share it: use [`ControlPlane::namespace`] for isolation and a
    /// dedicated [`ControlPlane::start_with`] for anything that stops, restarts or reconfigures it.
    pub async fn shared() -> &'static ControlPlane {
        let result = SHARED
            .get_or_init(|| async {
                match ControlPlane::start_with(Options::default()).await {
                    Ok(cp) => {
                        SHARED_PID.store(cp.pid().unwrap_or(0), Ordering::SeqCst);
                        let _ = SHARED_RUN_DIR.set(cp.run_dir().to_owned());
                        // SAFETY: registering a plain extern "C" fn.
                        unsafe { libc::atexit(teardown_shared) };
                        Ok(cp)
                    }
                    Err(e) => Err(e.to_string()),
                }
            })
            .await;
        match result {
            Ok(cp) => cp,
            Err(e) => panic!("the shared control plane could not be started: {e}"),
        }
    }
}

extern "C" fn teardown_shared() {
    let pid = SHARED_PID.swap(0, Ordering::SeqCst);
    if pid != 0 {
        process::terminate_pid(pid, Duration::from_secs(20));
    }
    if let Some(dir) = SHARED_RUN_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
