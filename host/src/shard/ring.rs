//! The consistent-hash ring of kubernetes-controller-sharding (`pkg/sharding/consistenthash`),
//! bit for bit, so that its sharder and kubewasm's assigner put every object on the same shard:
//! XXH64 (seed 0) of `shard + i` for 100 virtual nodes per shard, sorted; a key goes to the first
//! token at or after its own hash, wrapping around. Keys are `group/kind/namespace/name` of the
//! object itself, or of its controlling owner for a controlled object (so a parent and its
//! children land together).

use crate::resource::{Gvk, ObjectKey};

/// Virtual nodes per shard, as the sharder's `DefaultTokensPerNode`.
pub const TOKENS_PER_SHARD: usize = 100;

/// XXH64 with seed 0: Go's `xxhash.Sum64String`.
fn hash(text: &str) -> u64 {
    xxhash_rust::xxh64::xxh64(text.as_bytes(), 0)
}

/// A ring of shards. Built anew when the shards change, as the sharder does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    /// (token, index into `shards`), sorted by token.
    tokens: Vec<(u64, usize)>,
    shards: Vec<String>,
}

impl Ring {
    pub fn new<S: AsRef<str>>(shards: impl IntoIterator<Item = S>) -> Self {
        let mut shards: Vec<String> = shards.into_iter().map(|s| s.as_ref().to_string()).collect();
        shards.sort();
        shards.dedup();
        let mut tokens: Vec<(u64, usize)> =
            shards.iter().enumerate().flat_map(|(i, shard)| (0..TOKENS_PER_SHARD).map(move |t| (hash(&format!("{shard}{t}")), i))).collect();
        // Go keeps a map token → node, so of two shards with one token the later wins; a 64-bit
        // collision between shard names is not worth matching.
        tokens.sort_unstable();
        Ring { tokens, shards }
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The shards on the ring, sorted.
    pub fn shards(&self) -> &[String] {
        &self.shards
    }

    /// The shard for `key`; `None` when the ring is empty.
    pub fn shard_for(&self, key: &str) -> Option<&str> {
        if self.tokens.is_empty() {
            return None;
        }
        let h = hash(key);
        let i = self.tokens.partition_point(|(token, _)| *token < h);
        let (_, shard) = self.tokens[if i == self.tokens.len() { 0 } else { i }];
        Some(&self.shards[shard])
    }
}

/// The ring key of an object: `group/kind/namespace/name` (the sharder's `key.ForObject`; no
/// version, so that every version of a kind lands in one place).
pub fn object_key(resource: &Gvk, key: &ObjectKey) -> String {
    format!("{}/{}/{}/{}", resource.group, resource.kind, key.namespace().unwrap_or_default(), key.name())
}

/// The ring key of a controlled object: its controlling owner's (`key.ForController`), given
/// the owner's API group, kind and name (owners live in the object's namespace).
pub fn controller_key(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{group}/{kind}/{}/{name}", namespace.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by a Go program that runs the sharder's `consistenthash.Ring` with
    /// `github.com/cespare/xxhash/v2` v2.3.0 (the sharder's own dependency).
    #[test]
    fn the_ring_places_keys_exactly_as_the_sharders_does() {
        assert_eq!(hash("shard-a0"), 9490537171397026291);
        let ring = Ring::new(["shard-c", "shard-a", "shard-b"]);
        for (key, shard) in [
            ("/ConfigMap/default/k0", "shard-c"),
            ("/ConfigMap/default/k1", "shard-a"),
            ("/ConfigMap/team-a/web", "shard-a"),
            ("samplecontroller.k8s.io/Foo/default/example-foo", "shard-b"),
            ("apps/Deployment/kube-system/coredns", "shard-b"),
            ("/Namespace//team-b", "shard-a"),
        ] {
            assert_eq!(ring.shard_for(key), Some(shard), "{key}");
        }
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..300 {
            *counts.entry(ring.shard_for(&format!("/ConfigMap/ns/k{i}")).unwrap()).or_insert(0) += 1;
        }
        assert_eq!(counts, [("shard-a", 112), ("shard-b", 96), ("shard-c", 92)].into());
    }

    #[test]
    fn keys_are_the_sharders_and_children_hash_with_their_controller() {
        let foo = Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo");
        assert_eq!(object_key(&foo, &ObjectKey::new(Some("default"), "web")), "samplecontroller.k8s.io/Foo/default/web");
        assert_eq!(object_key(&Gvk::new("", "v1", "Namespace"), &ObjectKey::new(None, "a")), "/Namespace//a");
        assert_eq!(controller_key("samplecontroller.k8s.io", "Foo", Some("default"), "web"), object_key(&foo, &ObjectKey::new(Some("default"), "web")));
        assert_eq!(controller_key("", "ConfigMap", Some("n"), "p"), "/ConfigMap/n/p");
    }

    #[test]
    fn adding_a_shard_moves_only_keys_to_it_and_an_empty_ring_places_nothing() {
        assert_eq!(Ring::new(Vec::<String>::new()).shard_for("x"), None);
        let (three, four) = (Ring::new(["a", "b", "c"]), Ring::new(["a", "b", "c", "d"]));
        let keys: Vec<String> = (0..2000).map(|i| format!("/ConfigMap/ns/k{i}")).collect();
        let moved: Vec<&String> = keys.iter().filter(|k| three.shard_for(k) != four.shard_for(k)).collect();
        assert!(moved.iter().all(|k| four.shard_for(k) == Some("d")), "a key moves only to the new shard");
        assert!((300..700).contains(&moved.len()), "about a quarter moves: {}", moved.len());
    }
}
