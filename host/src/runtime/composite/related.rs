//! What a declarative plugin's parents depend on besides their children: the rules `customize`
//! answers, asked once per parent and generation and kept by parent, the objects they select
//! (read from the cache for each sync, within the plugin's read bound), and the other way round,
//! the parents whose rules select an object that changed (the host's `map-related` for a
//! declarative plugin).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use super::{CompositeError, Parent, Plugin};
use crate::resource::{Gvk, ObjectKey, Scope};
use crate::runtime::bindings::composite_exports::{Objects, RelatedRule};
use crate::runtime::bindings::types::{Error as GuestError, ErrorCode};
use crate::runtime::boundary::{MAX_GROUP, MAX_KIND, MAX_NAME, MAX_NAMESPACE, MAX_RELATED_NAMES, MAX_RELATED_RULES, MAX_SELECTOR, MAX_VERSION, too_long};
use crate::runtime::call::{CallError, Fault};
use crate::runtime::host::Services;
use crate::runtime::host::cache::{CacheCtx, list_bound};
use crate::selector::LabelSelector;

/// Refuses a `customize` answer over the bounds the WIT states (a fault: the plugin is broken).
pub(in crate::runtime) fn check_related(rules: &[RelatedRule]) -> Result<(), Fault> {
    let oversized = |problem: String| Err(Fault::Oversized(format!("customize answered {problem}")));
    if rules.len() > MAX_RELATED_RULES {
        return oversized(format!("{} rules; at most {MAX_RELATED_RULES}", rules.len()));
    }
    for (i, rule) in rules.iter().enumerate() {
        if rule.names.len() > MAX_RELATED_NAMES {
            return oversized(format!("a rule with {} names; at most {MAX_RELATED_NAMES}", rule.names.len()));
        }
        let r = &rule.resource;
        let strings = [
            ("group", r.group.len(), MAX_GROUP),
            ("version", r.version.len(), MAX_VERSION),
            ("kind", r.kind.len(), MAX_KIND),
            ("namespace", rule.namespace.as_ref().map_or(0, String::len), MAX_NAMESPACE),
            ("label selector", rule.label_selector.as_ref().map_or(0, String::len), MAX_SELECTOR),
            ("name", rule.names.iter().map(String::len).max().unwrap_or(0), MAX_NAME),
        ];
        if let Some(problem) = strings.into_iter().find_map(|(what, len, max)| too_long(what, len, max)) {
            return oversized(format!("rule {i} whose {problem}"));
        }
    }
    Ok(())
}

/// One `customize` rule, checked.
#[derive(Debug)]
struct Rule {
    resource: Gvk,
    namespace: Option<String>,
    names: Vec<String>,
    selector: Option<LabelSelector>,
}

impl Rule {
    fn parse(i: usize, rule: RelatedRule) -> Result<Self, CallError> {
        let invalid = |problem: String| CallError::Plugin { code: ErrorCode::Invalid, message: format!("customize rule {i}: {problem}") };
        if !rule.names.is_empty() && rule.label_selector.is_some() {
            return Err(invalid("names and label-selector together: a rule selects by one".into()));
        }
        let selector = rule.label_selector.map(|s| s.parse::<LabelSelector>()).transpose().map_err(|e| invalid(e.to_string()))?;
        Ok(Rule { resource: rule.resource.into(), namespace: rule.namespace, names: rule.names, selector })
    }

    /// Whether it selects the object of `resource` at `key` with `labels`.
    fn selects(&self, resource: &Gvk, key: &ObjectKey, labels: &serde_json::Map<String, Value>) -> bool {
        self.resource.group == resource.group
            && self.resource.kind == resource.kind
            && self.namespace.as_deref().is_none_or(|ns| key.namespace() == Some(ns))
            && (self.names.is_empty() || self.names.iter().any(|n| n == key.name()))
            && self.selector.as_ref().is_none_or(|s| s.matches(|k| labels.get(k).and_then(Value::as_str)))
    }
}

/// The rules a parent's `customize` answered, and for which state of it.
struct Asked {
    uid: String,
    generation: Option<i64>,
    rules: Arc<Vec<Rule>>,
    /// What they hold, about.
    bytes: usize,
}

impl Asked {
    fn new(uid: String, generation: Option<i64>, rules: Arc<Vec<Rule>>) -> Self {
        let bytes = rules
            .iter()
            .map(|r| {
                64 + r.namespace.as_ref().map_or(0, String::len)
                    + r.names.iter().map(|n| 24 + n.len()).sum::<usize>()
                    + r.selector.as_ref().map_or(0, |s| s.as_str().len())
            })
            .sum();
        Asked { uid, generation, rules, bytes }
    }
}

/// The parents' answers, and the bytes they hold together.
#[derive(Default)]
struct Index {
    parents: HashMap<ObjectKey, Asked>,
    bytes: usize,
}

impl Index {
    fn insert(&mut self, key: ObjectKey, asked: Asked) {
        self.bytes += asked.bytes;
        if let Some(before) = self.parents.insert(key, asked) {
            self.bytes -= before.bytes;
        }
    }

    fn retain(&mut self, keep: impl Fn(&ObjectKey) -> bool) {
        self.parents.retain(|key, _| keep(key));
        self.bytes = self.parents.values().map(|a| a.bytes).sum();
    }
}

/// The `customize` answers of one plugin version's parents.
#[derive(Default)]
pub(in crate::runtime) struct Related {
    asked: Mutex<Index>,
}

impl Related {
    /// The objects the parent's rules select now, one entry per rule, costing at most `budget`
    /// bytes (what they cost is taken from it). `customize` is called when the parent's uid or
    /// generation is new.
    pub(super) async fn objects(
        &self,
        plugin: &impl Plugin,
        services: &Services,
        parent: &Parent,
        json: &Arc<str>,
        budget: &mut usize,
    ) -> Result<Vec<Objects>, CallError> {
        let rules = self.rules(plugin, services, parent, json).await?;
        let cache = CacheCtx::new(plugin.reading_host(), services, plugin.memory_bytes());
        let failed = |i: usize, rule: &Rule, e: GuestError| CallError::Plugin {
            code: e.code,
            message: format!("customize rule {i} ({}): {}", rule.resource, e.message),
        };
        let mut related = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let mut items: Vec<(ObjectKey, Arc<str>)> = Vec::new();
            let cluster = services.cache.scope(&rule.resource) == Some(Scope::Cluster);
            // Names in one namespace (or of a cluster-scoped kind) are looked up one by one; the rest
            // is a list.
            if !rule.names.is_empty() && (rule.namespace.is_some() || cluster) {
                for name in &rule.names {
                    let found = cache.get(&rule.resource, rule.namespace.as_deref(), name).await.map_err(|e| failed(i, rule, e))?;
                    items.extend(found.map(|json| (ObjectKey::new(rule.namespace.as_deref(), name), Arc::from(json))));
                }
            } else {
                let text = rule.selector.as_ref().map(ToString::to_string);
                // Names in every namespace: the list hands out handles, not copies, so it may
                // pass the budget; only what the names select is charged below.
                let bound = if rule.names.is_empty() { *budget } else { usize::MAX };
                let listed = cache.list_keyed(&rule.resource, rule.namespace.as_deref(), text.as_deref(), bound).map_err(|e| failed(i, rule, e))?;
                items.extend(listed.into_iter().filter(|(key, _)| rule.names.is_empty() || rule.names.iter().any(|n| n == key.name())));
            }
            items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let bytes: usize = items.iter().map(|(_, json)| json.len()).sum();
            *budget = budget.checked_sub(bytes).ok_or(CompositeError::TooMuch(list_bound(plugin.memory_bytes())))?;
            related.push(Objects { resource: (&rule.resource).into(), items: items.into_iter().map(|(_, json)| json.to_string()).collect() });
        }
        Ok(related)
    }

    async fn rules(&self, plugin: &impl Plugin, services: &Services, parent: &Parent, json: &Arc<str>) -> Result<Arc<Vec<Rule>>, CallError> {
        let generation = parent.object.pointer("/metadata/generation").and_then(Value::as_i64);
        if let Some(asked) = self.asked.lock().parents.get(&parent.key).filter(|a| a.uid == parent.uid && a.generation == generation) {
            return Ok(asked.rules.clone());
        }
        let answer = plugin
            .customize(&parent.key, json.clone(), services)
            .await?
            .map_err(|e| CallError::Plugin { code: e.code, message: format!("customize: {}", e.message) })?;
        let rules: Arc<Vec<Rule>> = Arc::new(answer.into_iter().enumerate().map(|(i, rule)| Rule::parse(i, rule)).collect::<Result<_, _>>()?);
        let mut asked = self.asked.lock();
        asked.insert(parent.key.clone(), Asked::new(parent.uid.clone(), generation, rules.clone()));
        // Bounded by the plugin's memory limit: past it, the parents no longer cached are
        // forgotten, then, if that is not enough, every other one (each is asked again at its
        // next sync, and its related objects' events map to it from then on).
        let limit = usize::try_from(plugin.memory_bytes()).unwrap_or(usize::MAX);
        if asked.bytes > limit {
            let primary = &plugin.manifest().primary;
            asked.retain(|key| services.cache.get(primary, key).is_some());
            if asked.bytes > limit {
                asked.retain(|key| *key == parent.key);
            }
        }
        Ok(rules)
    }

    /// The parents (of those `keep` accepts: the others are forgotten) whose rules select
    /// `object`, of `resource`.
    pub(in crate::runtime) fn parents_selecting(&self, resource: &Gvk, object: &str, keep: impl Fn(&ObjectKey) -> bool) -> Vec<ObjectKey> {
        let Ok(object) = serde_json::from_str::<Value>(object) else { return Vec::new() };
        let meta = &object["metadata"];
        let Some(name) = meta["name"].as_str() else { return Vec::new() };
        let key = ObjectKey::new(meta["namespace"].as_str(), name);
        let no_labels = serde_json::Map::new();
        let labels = meta["labels"].as_object().unwrap_or(&no_labels);
        let mut asked = self.asked.lock();
        asked.retain(&keep);
        asked.parents.iter().filter(|(_, a)| a.rules.iter().any(|r| r.selects(resource, &key, labels))).map(|(parent, _)| parent.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::types::Gvk as WitGvk;

    fn rule(namespace: Option<&str>, names: &[&str], selector: Option<&str>) -> RelatedRule {
        RelatedRule {
            resource: WitGvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() },
            namespace: namespace.map(Into::into),
            names: names.iter().map(|n| n.to_string()).collect(),
            label_selector: selector.map(Into::into),
        }
    }

    #[test]
    fn a_rule_selects_by_names_or_labels_within_its_namespace() {
        let cm = Gvk::new("", "v1", "ConfigMap");
        let labels = serde_json::json!({"app": "a"});
        let labels = labels.as_object().unwrap();
        let by_name = Rule::parse(0, rule(Some("src"), &["settings"], None)).unwrap();
        assert!(by_name.selects(&cm, &ObjectKey::new(Some("src"), "settings"), labels));
        assert!(!by_name.selects(&cm, &ObjectKey::new(Some("other"), "settings"), labels));
        assert!(!by_name.selects(&cm, &ObjectKey::new(Some("src"), "x"), labels));
        assert!(!by_name.selects(&Gvk::new("", "v1", "Secret"), &ObjectKey::new(Some("src"), "settings"), labels));
        let by_label = Rule::parse(0, rule(None, &[], Some("app=a"))).unwrap();
        assert!(by_label.selects(&cm, &ObjectKey::new(Some("any"), "x"), labels));
        assert!(!by_label.selects(&cm, &ObjectKey::new(Some("any"), "x"), &serde_json::Map::new()));
        let err = Rule::parse(3, rule(None, &["a"], Some("app=a"))).unwrap_err().to_string();
        assert!(err.contains("customize rule 3: names and label-selector together"), "{err}");
    }

    #[test]
    fn the_parents_whose_rules_select_an_object_are_its_keys() {
        let related = Related::default();
        let rules = |r| Arc::new(vec![Rule::parse(0, r).unwrap()]);
        let a = ObjectKey::new(None, "a");
        let b = ObjectKey::new(None, "b");
        related.asked.lock().insert(a.clone(), Asked::new("1".into(), Some(1), rules(rule(Some("src"), &["settings"], None))));
        related.asked.lock().insert(b.clone(), Asked::new("2".into(), Some(1), rules(rule(Some("src"), &["other"], None))));
        let cm = Gvk::new("", "v1", "ConfigMap");
        let object = r#"{"metadata": {"name": "settings", "namespace": "src"}}"#;
        assert_eq!(related.parents_selecting(&cm, object, |_| true), vec![a.clone()]);
        assert!(related.parents_selecting(&cm, object, |k| *k != a).is_empty(), "a parent no longer there");
        let asked = related.asked.lock();
        assert_eq!(asked.parents.len(), 1, "is forgotten");
        assert_eq!(asked.bytes, asked.parents[&b].bytes, "and its bytes with it");
    }

    #[test]
    fn oversized_rules_are_faults() {
        assert!(check_related(&vec![rule(None, &[], None); MAX_RELATED_RULES]).is_ok());
        assert!(check_related(&vec![rule(None, &[], None); MAX_RELATED_RULES + 1]).unwrap_err().to_string().contains("101 rules"));
        let long = "x".repeat(MAX_NAME + 1);
        assert!(check_related(&[rule(None, &[long.as_str()], None)]).unwrap_err().to_string().contains("name is 254 bytes"));
    }
}
