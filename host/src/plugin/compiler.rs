//! Compiling plugins in a child process. Cranelift's time and memory grow with what a module
//! asks of it, and in the host both would be spent outside every budget, on every replica at
//! once. So `kubewasm run` compiles by running itself (`kubewasm compile-artifact`, hidden) with
//! the module on stdin, under a memory limit (`RLIMIT_DATA`: the heap and every private writable
//! mapping) and a deadline after which it is killed; the child stores the artifact in the
//! artifact cache, and the host maps it from there like any cached artifact. Libraries and
//! one-shot commands without a cache compile in their own process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Digest;
use super::artifact::ArtifactCache;
use crate::runtime::{Runtime, RuntimeConfig};

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "compile-artifact";

/// Compiles in a child process of `program` (the `kubewasm` binary).
#[derive(Debug, Clone)]
pub struct ChildCompiler {
    pub program: PathBuf,
    /// What the child may allocate (`--compile-memory`).
    pub memory_bytes: u64,
    /// When the child is killed (`--compile-timeout`).
    pub timeout: Duration,
}

impl ChildCompiler {
    /// The defaults of `kubewasm run`: compiling the largest real plugins (Python and JS, with
    /// their interpreters inside) peaks around 400 MB and takes seconds.
    pub const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
}

/// Why the child did not compile the module.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("cannot run the compiler process {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("compiling it took longer than {} s (--compile-timeout): stopped", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("compiling it needed more than {0} bytes of memory (--compile-memory): stopped")]
    Memory(u64),
    /// What the child said (a module that does not compile, a cache it cannot write).
    #[error("{0}")]
    Failed(String),
}

/// The most the host keeps of what the child writes on stderr.
const MAX_STDERR: u64 = 16 << 10;

impl ChildCompiler {
    /// Compiles `wasm` into `cache`, for an engine with `config`.
    pub async fn compile(&self, cache: &Path, config: &RuntimeConfig, wasm: &[u8]) -> Result<(), CompileError> {
        let spawn = |source| CompileError::Spawn { program: self.program.clone(), source };
        let mut command = tokio::process::Command::new(&self.program);
        command.arg(SUBCOMMAND).arg("--cache-dir").arg(cache);
        if !config.deadlines {
            command.arg("--no-deadlines");
        }
        // A panic's backtrace, printed out of memory, deadlocks on the backtrace lock in the
        // allocation-failure hook; without one the child says what failed and aborts.
        command.env("RUST_BACKTRACE", "0").env("RUST_LIB_BACKTRACE", "0");
        command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
        let memory = self.memory_bytes;
        // SAFETY: the closure runs in the forked child before exec and calls only setrlimit and
        // prctl, which are async-signal-safe.
        unsafe {
            command.pre_exec(move || limit_child(memory));
        }
        let mut child = command.spawn().map_err(spawn)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let run = async {
            // A child that died early closes its stdin: its status says why.
            let _ = stdin.write_all(wasm).await;
            drop(stdin);
            let mut said = Vec::new();
            let _ = (&mut stderr).take(MAX_STDERR).read_to_end(&mut said).await;
            // The rest is read and dropped, so that a talkative child never blocks on the pipe.
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            (child.wait().await, said)
        };
        let (status, said) = tokio::time::timeout(self.timeout, run).await.map_err(|_| CompileError::Timeout(self.timeout))?;
        let status = status.map_err(spawn)?;
        if status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&said);
        // Out of memory is an abort ("memory allocation of N bytes failed"), ENOMEM from an mmap,
        // or EAGAIN from creating a thread (its stack is memory too).
        let out_of_memory = ["memory allocation of", "Cannot allocate memory", "Resource temporarily unavailable"];
        if out_of_memory.iter().any(|sign| said.contains(sign)) {
            return Err(CompileError::Memory(memory));
        }
        let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
        Err(CompileError::Failed(match last.strip_prefix("error: ") {
            Some(message) => message.to_string(),
            None => format!("the compiler process failed ({status}){}", if last.is_empty() { String::new() } else { format!(": {last}") }),
        }))
    }
}

/// In the child, before exec: its memory limit, and death with its parent.
fn limit_child(memory: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: memory as libc::rlim_t, rlim_max: memory as libc::rlim_t };
    // SAFETY: setrlimit reads the struct given; prctl takes plain integers.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        #[cfg(target_os = "linux")]
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The child's side: compiles the module on stdin into the artifact cache at `cache`.
pub fn compile_into(cache: &Path, config: RuntimeConfig) -> Result<(), String> {
    use std::io::Read;
    let mut wasm = Vec::new();
    std::io::stdin().take(super::MAX_MODULE_BYTES + 1).read_to_end(&mut wasm).map_err(|e| format!("cannot read the module: {e}"))?;
    if wasm.len() as u64 > super::MAX_MODULE_BYTES {
        return Err(format!("the module is more than {} bytes", super::MAX_MODULE_BYTES));
    }
    let runtime = Runtime::new(config).map_err(|e| e.to_string())?;
    let cache = ArtifactCache::new(cache);
    let digest = Digest::of(&wasm);
    cache.load_or_compile(&runtime, &digest, &wasm).map_err(|e| e.to_string())?;
    if cache.cached(&runtime, &digest).is_none() {
        return Err(format!("cannot store the compiled plugin in {}", cache.dir().display()));
    }
    Ok(())
}
