//! The file provider (`--clusters DIR`): one kubeconfig file per member cluster, named by the
//! file's stem (`eu-west.yaml` is `eu-west`), its labels in the current context's
//! `kubewasm.io/labels` extension. A new file engages its cluster, a changed one engages it
//! anew, a removed one disengages it. The directory is read every [`POLL`]: a kubeconfig
//! Secret mounted into the host's Pod changes by an atomic symlink swap that file events
//! report unreliably, and a few seconds is soon enough for a cluster to come or go.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Fleet, Offer, context_labels, digest};

/// How often the directory is read.
pub const POLL: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("--clusters {dir}: {source} (give a directory of kubeconfig files, one per member cluster)")]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks that `dir` can be read, for a one-line error at start.
pub fn check(dir: &Path) -> Result<(), FilesError> {
    std::fs::read_dir(dir).map(drop).map_err(|source| FilesError::Dir { dir: dir.to_path_buf(), source })
}

/// Where an offer of this provider comes from.
fn source(path: &Path) -> String {
    format!("file {}", path.display())
}

/// Keeps the members of `dir` engaged until `shutdown`.
pub async fn run(dir: PathBuf, fleet: Arc<Fleet>, shutdown: CancellationToken) {
    // What each file looked like when last offered, to offer (and log) only changes.
    let mut seen: BTreeMap<PathBuf, u64> = BTreeMap::new();
    loop {
        let files = kubeconfigs(&dir);
        for (name, path) in &files {
            let Ok(text) = std::fs::read(path) else { continue };
            let hash = digest(&[&text]);
            if seen.get(path) == Some(&hash) {
                continue;
            }
            seen.insert(path.clone(), hash);
            match offer(name, path, hash).map(|offer| fleet.engage(offer)) {
                Ok(engaging) => {
                    if let Err(e) = engaging.await {
                        tracing::warn!("cannot engage {}: {e}", source(path));
                    }
                }
                Err(e) => {
                    fleet.refused("kubeconfig");
                    tracing::warn!("cannot engage {}: {e}", source(path));
                }
            }
        }
        seen.retain(|path, _| files.values().any(|p| p == path));
        for (name, engaged) in fleet.engaged_from(|s| s.starts_with("file ")) {
            if files.get(&name).map(|path| source(path)) != Some(engaged.clone()) {
                fleet.disengage(&name, &engaged);
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// The kubeconfig files of `dir` by cluster name: regular files, not hidden (a Secret volume's
/// `..data` links and editors' swap files are skipped).
fn kubeconfigs(dir: &Path) -> BTreeMap<String, PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        tracing::warn!(dir = %dir.display(), "cannot read the clusters directory");
        return BTreeMap::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
        .collect()
}

fn offer(name: &str, path: &Path, digest: u64) -> Result<Offer, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
    let labels = context_labels(name, &kubeconfig).map_err(|e| e.to_string())?;
    Ok(Offer { name: name.to_string(), labels, kubeconfig, source: source(path), digest })
}
