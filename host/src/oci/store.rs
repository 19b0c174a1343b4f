//! Pulled modules on disk, laid out so that the cache grants nothing the registry would not:
//!
//! - `layers/HEX.wasm`: a module by the sha256 of its bytes (shared by every repository naming
//!   it: content-addressed);
//! - `manifests/REPO/HEX`: the layer digest the manifest `sha256:HEX` names, as pulled from one
//!   repository of one registry (`REPO` is a hash of `REGISTRY/REPOSITORY`): a reference by
//!   digest is served from the cache only when that same repository served it before, so naming
//!   another team's digest in another repository pulls from that repository (L7);
//! - `tags/REPO/TAG`: what a tag last resolved to, so that a host restarted while its registry is
//!   down can still run the last module it pulled ([`Store::last_resolution`]).
//!
//! Every file is written whole and renamed into place; a module used is touched for the cache
//! limit's least-recently-used order ([`crate::cache_dir`]).

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::{OciError, Pulled, write_atomically};

pub(super) struct Store {
    dir: PathBuf,
}

/// A registry's repository, as the cache keys it.
pub(super) struct Repository<'a> {
    pub registry: &'a str,
    pub repository: &'a str,
}

impl Repository<'_> {
    fn key(&self) -> String {
        let hash = Sha256::digest(format!("{}/{}", self.registry, self.repository));
        hex::encode(&hash[..16])
    }
}

/// `sha256:HEX` → `HEX`, safe as a file name whatever a registry sent.
pub(super) fn hex_of(digest: &str) -> String {
    digest.rsplit(':').next().unwrap_or_default().chars().filter(char::is_ascii_alphanumeric).collect()
}

/// A tag as a file name: tags are `[A-Za-z0-9_][A-Za-z0-9_.-]*`, but the name is hashed whatever
/// it holds, so that no text from outside becomes a path.
fn tag_file(tag: &str) -> String {
    hex::encode(&Sha256::digest(tag)[..16])
}

impl Store {
    pub fn new(dir: PathBuf) -> Self {
        Store { dir }
    }

    pub fn layers_dir(&self) -> PathBuf {
        self.dir.join("layers")
    }

    pub fn layer_path(&self, layer_digest: &str) -> PathBuf {
        self.layers_dir().join(format!("{}.wasm", hex_of(layer_digest)))
    }

    fn manifest_path(&self, repo: &Repository<'_>, manifest_digest: &str) -> PathBuf {
        self.dir.join("manifests").join(repo.key()).join(hex_of(manifest_digest))
    }

    fn tag_path(&self, repo: &Repository<'_>, tag: &str) -> PathBuf {
        self.dir.join("tags").join(repo.key()).join(tag_file(tag))
    }

    /// The module of `manifest_digest` as `repo` served it before, if it is still here.
    pub fn cached(&self, repo: &Repository<'_>, manifest_digest: &str) -> Option<Pulled> {
        let layer_digest = std::fs::read_to_string(self.manifest_path(repo, manifest_digest)).ok()?;
        let path = self.layer_path(&layer_digest);
        if !path.is_file() {
            return None;
        }
        crate::cache_dir::touch(&path);
        Some(Pulled { manifest_digest: manifest_digest.into(), layer_digest, path })
    }

    /// Whether the module `layer_digest` is here (pulled through any repository).
    pub fn has_layer(&self, layer_digest: &str) -> bool {
        self.layer_path(layer_digest).is_file()
    }

    /// Records that `repo` serves `manifest_digest`, which names the module `layer_digest`
    /// (already stored).
    pub fn record(&self, repo: &Repository<'_>, manifest_digest: &str, layer_digest: &str) -> Result<Pulled, OciError> {
        write_atomically(&self.manifest_path(repo, manifest_digest), layer_digest.as_bytes())?;
        let path = self.layer_path(layer_digest);
        crate::cache_dir::touch(&path);
        Ok(Pulled { manifest_digest: manifest_digest.into(), layer_digest: layer_digest.into(), path })
    }

    /// Records what `tag` of `repo` resolved to.
    pub fn remember_tag(&self, repo: &Repository<'_>, tag: &str, manifest_digest: &str) -> Result<(), OciError> {
        let path = self.tag_path(repo, tag);
        if std::fs::read_to_string(&path).is_ok_and(|known| known == manifest_digest) {
            return Ok(());
        }
        write_atomically(&path, manifest_digest.as_bytes())
    }

    /// What `tag` of `repo` last resolved to.
    pub fn last_resolution(&self, repo: &Repository<'_>, tag: &str) -> Option<String> {
        std::fs::read_to_string(self.tag_path(repo, tag)).ok().filter(|d| d.starts_with("sha256:"))
    }

    /// A new file for a module being pulled, in the layers directory (renamed into place once
    /// verified; removed if dropped before).
    pub fn new_layer_file(&self) -> Result<tempfile::NamedTempFile, OciError> {
        let dir = self.layers_dir();
        let cache = |source| OciError::Cache { path: dir.clone(), source };
        std::fs::create_dir_all(&dir).map_err(cache)?;
        tempfile::NamedTempFile::new_in(&dir).map_err(cache)
    }

    /// Puts a verified module in place.
    pub fn keep_layer(&self, file: tempfile::NamedTempFile, layer_digest: &str) -> Result<PathBuf, OciError> {
        let path = self.layer_path(layer_digest);
        file.persist(&path).map_err(|e| OciError::Cache { path: path.clone(), source: e.error })?;
        Ok(path)
    }
}

/// Links (or, across file systems, copies) a cached module to `to`, replacing what is there
/// atomically: a module is not read into memory to be handed over, and a link costs no space.
pub fn place(from: &Path, to: &Path) -> Result<(), OciError> {
    let cache = |source| OciError::Cache { path: to.to_path_buf(), source };
    let dir = to.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir).map_err(cache)?;
    let aside = tempfile::Builder::new().prefix(".tmp-place").tempfile_in(dir).map_err(cache)?.into_temp_path();
    std::fs::remove_file(&aside).map_err(cache)?;
    if std::fs::hard_link(from, &aside).is_err() {
        std::fs::copy(from, &aside).map_err(cache)?;
    }
    aside.persist(to).map_err(|e| cache(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_tags_become_file_names_only() {
        assert_eq!(hex_of("sha256:abc123"), "abc123");
        assert_eq!(hex_of("sha256:../../etc"), "etc");
        assert_eq!(tag_file("../x").len(), 32);
    }

    #[test]
    fn a_digest_is_served_from_the_cache_only_for_the_repository_that_served_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_path_buf());
        let (ours, theirs) = (Repository { registry: "r.io", repository: "team-a/p" }, Repository { registry: "r.io", repository: "team-b/p" });
        let file = store.new_layer_file().unwrap();
        std::fs::write(file.path(), b"module").unwrap();
        store.keep_layer(file, "sha256:aaaa").unwrap();
        store.record(&ours, "sha256:1111", "sha256:aaaa").unwrap();
        assert_eq!(store.cached(&ours, "sha256:1111").unwrap().layer_digest, "sha256:aaaa");
        assert!(store.cached(&theirs, "sha256:1111").is_none());
        assert!(store.has_layer("sha256:aaaa"));
        store.remember_tag(&ours, "1.0", "sha256:1111").unwrap();
        assert_eq!(store.last_resolution(&ours, "1.0").as_deref(), Some("sha256:1111"));
        assert_eq!(store.last_resolution(&theirs, "1.0"), None);
        let placed = dir.path().join("plugins/p.wasm");
        place(&store.layer_path("sha256:aaaa"), &placed).unwrap();
        place(&store.layer_path("sha256:aaaa"), &placed).unwrap();
        assert_eq!(std::fs::read(&placed).unwrap(), b"module");
    }
}
