//! Who may use a plugin name and a finalizer: a name belongs to one file and a finalizer to one
//! plugin, across every slot and whatever state it is in (starting or running), so that a second
//! file can never take over another plugin's field manager, identity or finalizer. Slots check
//! before admission and claim in one step when they start; a claim lasts until the slot lets go.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// Why a plugin may not take a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("plugin name {name:?} is already taken by {}", other.display())]
    Name { name: String, other: PathBuf },
    #[error("finalizer {finalizer:?} is already used by plugin {other:?}")]
    Finalizer { finalizer: String, other: String },
}

/// One claimed name: the file it runs from and the finalizers its versions use.
struct Claim {
    path: PathBuf,
    finalizers: Vec<String>,
}

#[derive(Default)]
pub struct Claims(Mutex<BTreeMap<String, Claim>>);

impl Claims {
    /// Checks that `path` may run plugin `name` with `finalizer`: no other file holds the name,
    /// no other plugin the finalizer.
    pub fn check(&self, name: &str, path: &Path, finalizer: Option<&str>) -> Result<(), ClaimError> {
        check(&self.0.lock(), name, path, finalizer)
    }

    /// Takes `name` for `path` if [`Claims::check`] passes, in one step.
    pub fn claim(&self, name: &str, path: &Path, finalizers: Vec<String>) -> Result<(), ClaimError> {
        let mut claims = self.0.lock();
        check(&claims, name, path, None)?;
        for finalizer in &finalizers {
            check(&claims, name, path, Some(finalizer))?;
        }
        claims.insert(name.into(), Claim { path: path.to_path_buf(), finalizers });
        Ok(())
    }

    /// The finalizers `name` uses now (a new version may add or rename one).
    pub fn set_finalizers(&self, name: &str, finalizers: Vec<String>) {
        if let Some(claim) = self.0.lock().get_mut(name) {
            claim.finalizers = finalizers;
        }
    }

    /// Follows a file that moved.
    pub fn moved(&self, from: &Path, to: &Path) {
        for claim in self.0.lock().values_mut().filter(|c| c.path == from) {
            claim.path = to.to_path_buf();
        }
    }

    /// Lets go of `name`, if `path` holds it.
    pub fn free(&self, name: &str, path: &Path) {
        let mut claims = self.0.lock();
        if claims.get(name).is_some_and(|c| c.path == path) {
            claims.remove(name);
        }
    }

    /// The file holding `name`.
    pub fn path_of(&self, name: &str) -> Option<PathBuf> {
        self.0.lock().get(name).map(|c| c.path.clone())
    }
}

/// The name and finalizer rules, on the claims as they are.
fn check(claims: &BTreeMap<String, Claim>, name: &str, path: &Path, finalizer: Option<&str>) -> Result<(), ClaimError> {
    if let Some(claim) = claims.get(name)
        && claim.path != path
    {
        return Err(ClaimError::Name { name: name.into(), other: claim.path.clone() });
    }
    if let Some(finalizer) = finalizer
        && let Some((other, _)) = claims.iter().find(|(other, claim)| *other != name && claim.finalizers.iter().any(|f| f == finalizer))
    {
        return Err(ClaimError::Finalizer { finalizer: finalizer.into(), other: other.clone() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_belongs_to_one_file_and_a_finalizer_to_one_plugin() {
        let claims = Claims::default();
        let (a, b) = (Path::new("/p/a.wasm"), Path::new("/p/b.wasm"));
        claims.claim("a", a, vec!["x.io/f".into()]).unwrap();
        assert!(claims.check("a", a, Some("x.io/f")).is_ok(), "its own file and finalizer");
        assert!(matches!(claims.check("a", b, None), Err(ClaimError::Name { .. })));
        assert!(matches!(claims.claim("b", b, vec!["x.io/f".into()]), Err(ClaimError::Finalizer { .. })));
        claims.claim("b", b, vec![]).unwrap();
        claims.moved(a, Path::new("/p/c.wasm"));
        assert_eq!(claims.path_of("a").as_deref(), Some(Path::new("/p/c.wasm")));
        claims.free("a", a);
        assert!(claims.path_of("a").is_some(), "only the file holding it lets go");
        claims.free("a", Path::new("/p/c.wasm"));
        claims.claim("c", a, vec!["x.io/f".into()]).unwrap();
    }
}
