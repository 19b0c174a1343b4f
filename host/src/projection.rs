//! What of an object a plugin is handed: its `apiVersion`, `kind` and `metadata` (without
//! `metadata.managedFields`) always, and of the rest only the fields it declared it reads
//! (`projections.fields`, contract 0.1.5) — or all of it, for a kind it declared nothing for.
//! A metadata-only kind (`views.metadata-only`) is one projected to no fields.
//!
//! Guests parse every object they are handed; a controller reading two fields of a 2 KB
//! Deployment need not parse the other 1.8 KB in an interpreter compiled to Wasm. Projecting
//! costs the host one scan of the text without building a tree: values are copied as the text
//! they are, and only the objects on a declared path are looked into.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Fields of an object below its top level, as a tree of field names: a name whose node has no
/// children keeps its whole value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Fields {
    children: BTreeMap<String, Fields>,
}

/// No field beyond what is always kept: a metadata-only projection.
pub static METADATA_ONLY: Fields = Fields { children: BTreeMap::new() };

/// The top-level fields every projection keeps.
const ALWAYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

impl Fields {
    /// The fields of `paths`, each a list of field names from the object's top (`["spec",
    /// "replicas"]`). A path within another adds nothing: the shorter one keeps its whole value.
    /// Paths into what is always kept (`metadata`, ...) and empty paths add nothing either.
    pub fn new<P: AsRef<[S]>, S: AsRef<str>>(paths: impl IntoIterator<Item = P>) -> Self {
        let mut root = Fields::default();
        for path in paths {
            let path = path.as_ref();
            if path.first().is_some_and(|first| !ALWAYS.contains(&first.as_ref())) {
                root.insert(path);
            }
        }
        root
    }

    fn insert<S: AsRef<str>>(&mut self, path: &[S]) {
        let Some((name, rest)) = path.split_first() else { return };
        match self.children.get_mut(name.as_ref()) {
            // Kept whole already.
            Some(child) if child.children.is_empty() => {}
            Some(child) if rest.is_empty() => child.children.clear(),
            Some(child) => child.insert(rest),
            None => {
                let mut child = Fields::default();
                child.insert(rest);
                self.children.insert(name.as_ref().to_owned(), child);
            }
        }
    }

    /// Whether the top-level field `name` is kept whole.
    pub fn keeps_whole(&self, name: &str) -> bool {
        matches!(self.child(name), Some(Kept::Whole))
    }

    /// What is kept of the member `name`, if anything.
    fn child(&self, name: &str) -> Option<Kept<'_>> {
        self.children.get(name).map(|node| if node.children.is_empty() { Kept::Whole } else { Kept::Within(node) })
    }

    /// Whether nothing beyond the metadata is kept.
    pub fn is_metadata_only(&self) -> bool {
        self.children.is_empty()
    }

    /// The paths, each as its field names, in order: what `new` was given, without the paths
    /// another one covers.
    #[cfg(test)]
    pub fn paths(&self) -> Vec<Vec<&str>> {
        let mut all = Vec::new();
        let mut stack: Vec<(Vec<&str>, &Fields)> = vec![(Vec::new(), self)];
        while let Some((prefix, node)) = stack.pop() {
            for (name, child) in node.children.iter().rev() {
                let mut path = prefix.clone();
                path.push(name.as_str());
                if child.children.is_empty() {
                    all.push(path);
                } else {
                    stack.push((path, child));
                }
            }
        }
        all.sort();
        all
    }
}

/// `json` (an object) as handed with `fields`: `apiVersion`, `kind`, `metadata` without
/// `managedFields`, and the declared fields that it has. A path through a value that is not an
/// object (a list, say) keeps that value whole. Text that is not an object gives `{}`.
pub fn project(json: &str, fields: &Fields) -> String {
    let Ok(top) = entries(json) else { return "{}".into() };
    let mut out = String::with_capacity(json.len().min(4096));
    push_members(&mut out, top, |key| match key {
        "metadata" => Some(Kept::WithoutManagedFields),
        "apiVersion" | "kind" => Some(Kept::Whole),
        other => fields.child(other),
    });
    out
}

/// What of a member's value is kept.
#[derive(Clone, Copy)]
enum Kept<'f> {
    Whole,
    Within(&'f Fields),
    WithoutManagedFields,
}

/// Appends an object of the `members` that `pick` keeps, each as it says.
fn push_members<'f>(out: &mut String, members: Vec<(Cow<'_, str>, &RawValue)>, pick: impl Fn(&str) -> Option<Kept<'f>>) {
    out.push('{');
    for (key, value) in members {
        let Some(kept) = pick(&key) else { continue };
        push_key(out, &key);
        push_value(out, value, kept);
    }
    out.push('}');
}

fn push_value(out: &mut String, value: &RawValue, kept: Kept) {
    let text = value.get();
    let cut = match kept {
        Kept::Whole => false,
        // Cached objects never carry managedFields: copied as they are, unless they do.
        Kept::WithoutManagedFields => text.contains("\"managedFields\""),
        Kept::Within(_) => true,
    };
    // A value that is not an object is kept whole.
    if cut && let Ok(members) = entries(text) {
        push_members(out, members, |key| match kept {
            Kept::Within(node) => node.child(key),
            _ => (key != "managedFields").then_some(Kept::Whole),
        });
    } else {
        out.push_str(text);
    }
}

/// Appends `"key":`, after a comma unless it is the object's first member.
fn push_key(out: &mut String, key: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    // Keys are short; almost none needs escaping.
    if key.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(key).expect("a string serializes"));
    }
    out.push(':');
}

/// The members of a JSON object, in order, their values as text.
fn entries(json: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, serde_json::Error> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(key) = map.next_key::<Key<'de>>()? {
                all.push((key.0, map.next_value()?));
            }
            Ok(all)
        }
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let members = de.deserialize_map(Members)?;
    de.end()?;
    Ok(members)
}

/// A member's name, borrowed unless it had escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl<'de> Visitor<'de> for Name {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(Name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","ownerReferences":[{"uid":"u"}]},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c"}]}}},"status":{"availableReplicas":2,"conditions":[{"type":"Available"}]}}"#;

    fn projected(paths: &[&str]) -> serde_json::Value {
        let fields = Fields::new(paths.iter().map(|p| p.split('.').collect::<Vec<_>>()));
        let text = project(DEPLOYMENT, &fields);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn keeps_the_type_the_metadata_and_the_declared_fields() {
        assert_eq!(
            projected(&["status.availableReplicas"]),
            serde_json::json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","ownerReferences":[{"uid":"u"}]},"status":{"availableReplicas":2}})
        );
        assert_eq!(
            projected(&["spec.replicas", "spec.template.spec.containers.image"])["spec"],
            serde_json::json!({"replicas":2,"template":{"spec":{"containers":[{"name":"c"}]}}}),
            "a path through a list keeps the list"
        );
        assert_eq!(projected(&["spec.missing", "nothing"])["spec"], serde_json::json!({}), "fields it lacks are simply not there");
        assert!(projected(&["spec.missing", "nothing"]).get("nothing").is_none());
    }

    #[test]
    fn a_shorter_path_keeps_its_whole_value_whichever_comes_first() {
        let whole = serde_json::from_str::<serde_json::Value>(DEPLOYMENT).unwrap()["status"].clone();
        assert_eq!(projected(&["status", "status.availableReplicas"])["status"], whole);
        assert_eq!(projected(&["status.availableReplicas", "status"])["status"], whole);
        let fields = Fields::new([vec!["status", "x"], vec!["status"], vec!["spec", "replicas"], vec!["metadata", "labels"], vec![]]);
        assert_eq!(fields.paths(), vec![vec!["spec", "replicas"], vec!["status"]]);
        assert!(fields.keeps_whole("status") && !fields.keeps_whole("spec") && !fields.keeps_whole("data"));
    }

    #[test]
    fn metadata_only_drops_managed_fields_and_keeps_odd_names() {
        let listed = r#"{"kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m"}],"labels":{"managedFields":"x"}},"data":{"k":"v"},"we\"ird":{"a\\b":1}}"#;
        let text = project(listed, &METADATA_ONLY);
        assert_eq!(text, r#"{"kind":"ConfigMap","metadata":{"name":"a","labels":{"managedFields":"x"}}}"#);
        let text = project(listed, &Fields::new([vec!["we\"ird", "a\\b"]]));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["we\"ird"], serde_json::json!({"a\\b":1}));
        assert_eq!(project("[1]", &METADATA_ONLY), "{}");
        assert_eq!(project("{\"kind\":1} trailing", &METADATA_ONLY), "{}");
    }
}
