//! `kubewasm test`: table tests for plugin authors, without a cluster. A case is a YAML file —
//! the cache's contents, the key to reconcile (or finalize), and the expected client calls,
//! events and result — run against the plugin with an in-memory cache and a recorder
//! ([`crate::tools::offline`]). The same harness serves every language: it only sees the component.
//!
//! ```yaml
//! description: A Foo gets a Deployment it owns
//! settings: {}                      # optional, as NAME.toml would give them
//! now: 2026-01-02T03:04:05Z         # optional: the plugin's wall clock stands at this time
//! cache:
//!   - {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, metadata: {name: a, namespace: ns}, spec: {...}}
//! reconcile: {namespace: ns, name: a}   # or `finalize:` (or `map: OBJECT`, expecting `keys:`;
//!                                   # or none, with `settings:` and `expect: {refused: SUBSTRING}`)
//! expect:
//!   result: done                    # or {requeueAfter: MS}, or {error: CODE, message: SUBSTRING},
//!                                   # or {fault: KIND} (trap, deadline, memory, oversized; also
//!                                   # for `map:` cases)
//!   calls:                          # every client call, in order, compared exactly, or
//!                                   # on the fields each gives with `match: fields`
//!     - apply: {apiVersion: apps/v1, kind: Deployment, ...}   # server-side apply (forced)
//!     - applyStatus: {...}
//!     - create / update / updateStatus: OBJECT
//!     - patch: {apiVersion: v1, kind: Node, name: n1, type: merge, body: {...}}
//!     - delete: {apiVersion: v1, kind: ConfigMap, namespace: ns, name: x}   # uid: U, on the condition of its UID
//!   events:                         # compared on the fields given
//!     - {type: Warning, reason: ErrResourceExists, note: "..."}
//!   match: exact                    # or `fields`: each expected call (and a declarative
//!                                   # answer's children) is compared on the fields it gives,
//!                                   # at every depth; lists element by element, same length
//! ```
//!
//! A plugin working with member clusters (contract 0.1.4) gets them from the case: `clusters`
//! names each member with its labels and cache, `cluster` the one the call's object lives in
//! (the host's own, with `cache`, when not given), and each call made in a member is spelled
//! with its name:
//!
//! ```yaml
//! cluster: eu                       # optional: the call's object lives in member `eu`
//! clusters:
//!   eu: {labels: {env: prod}, cache: [...]}
//!   us: {labels: {env: dev}}
//! expect:
//!   calls:
//!     - {apply: {apiVersion: v1, kind: ConfigMap, ...}, cluster: eu}
//! ```
//!
//! The plugin's writes are stored in the case's cache as an API server would store them
//! ([`crate::tools::offline::Writes::Stored`]): a read after a write sees it, a create of an existing
//! object is refused, a stale update conflicts.
//!
//! A declarative plugin's case may instead expect what the plugin answers for the parent (its
//! `sync`, or `finalize` for a `finalize:` case), before the host manages anything:
//!
//! ```yaml
//! expect:
//!   desired:                        # compared on the fields given
//!     children: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a-copy}, data: {...}}]
//!     status: {copies: 1}           # as answered (the host adds observedGeneration)
//!     resyncAfter: 30000            # milliseconds, or null
//!     finalized: true               # finalize cases
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::case;
use crate::events::ObjectEvent;
use crate::manifest::LimitPolicy;
use crate::metrics::PluginMetrics;
use crate::plugin::LoadedPlugin;
use crate::resource::{Gvk, ObjectKey};
use crate::runtime::host::{Clock, Services};
use crate::runtime::{Action, CallError, Described, Request, Runtime};
use crate::tools::offline::{FixtureCache, OfflineFleet, Recorder};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default)]
    pub description: Option<String>,
    /// Plugin settings for this case (instead of the plugin's `NAME.toml`).
    #[serde(default)]
    pub settings: Option<Value>,
    #[serde(default)]
    pub cache: Vec<Value>,
    #[serde(default)]
    pub reconcile: Option<KeySpec>,
    #[serde(default)]
    pub finalize: Option<KeySpec>,
    /// An object to pass to `map-related`.
    #[serde(default)]
    pub map: Option<Value>,
    /// The time the plugin's wall clock tells (RFC 3339); the system's when not given.
    #[serde(default)]
    pub now: Option<String>,
    /// The member cluster the call's object lives in (one of `clusters`); the host's own, whose
    /// cache is `cache`, when not given.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Member clusters engaged for the case, by name: their labels and caches. Calls made in a
    /// member are spelled with its name (`cluster: NAME`).
    #[serde(default)]
    pub clusters: BTreeMap<String, MemberCase>,
    pub expect: Expect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberCase {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub cache: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySpec {
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub result: Option<Value>,
    /// Every client call, in order; none when not given, unless `desired` is (then the calls
    /// are not compared).
    #[serde(default)]
    pub calls: Option<Vec<Value>>,
    #[serde(default)]
    pub events: Vec<Value>,
    /// For `map:` cases: the keys returned, as `namespace/name` or `name`.
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    /// The case's `settings` must be refused, with a message containing this.
    #[serde(default)]
    pub refused: Option<String>,
    /// A declarative plugin's answer, compared on the fields given (`children`, `status`,
    /// `resyncAfter`, `finalized`).
    #[serde(default)]
    pub desired: Option<serde_json::Map<String, Value>>,
    /// How calls and children are compared.
    #[serde(default, rename = "match")]
    pub compare: Match,
}

/// How a case's expected calls (and a declarative answer's children) are compared.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Match {
    /// Whole and exactly.
    #[default]
    Exact,
    /// On the fields each expected value gives, at every depth: an object matches when each of
    /// the expected keys matches; a list when it has as many items and each matches; anything
    /// else when equal.
    Fields,
}

/// `actual` cut down to the fields `expected` gives (see [`Match::Fields`]), so that a diff of
/// the two shows only what differs in what the case asked about.
fn given_fields(expected: &Value, actual: &Value) -> Value {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => Value::Object(e.iter().filter_map(|(k, ev)| a.get(k).map(|av| (k.clone(), given_fields(ev, av)))).collect()),
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => Value::Array(e.iter().zip(a).map(|(ev, av)| given_fields(ev, av)).collect()),
        _ => actual.clone(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A finished case.
pub struct Outcome {
    pub name: String,
    /// `None` when it passed; else what differed.
    pub failure: Option<String>,
}

/// The case files (`*.yaml`, `*.yml`) of a directory, sorted.
pub fn case_files(dir: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CaseError::Read { path: dir.into(), source })?;
    let mut files: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml")).collect();
    files.sort();
    Ok(files)
}

pub fn read_case(path: &Path) -> Result<Case, CaseError> {
    let text = std::fs::read_to_string(path).map_err(|source| CaseError::Read { path: path.into(), source })?;
    let case: Case = serde_saphyr::from_str(&text).map_err(|e| CaseError::Invalid { path: path.into(), message: e.to_string() })?;
    if let Some(now) = &case.now {
        now_of(now).map_err(|message| CaseError::Invalid { path: path.into(), message })?;
    }
    let targets = usize::from(case.reconcile.is_some()) + usize::from(case.finalize.is_some()) + usize::from(case.map.is_some());
    if case.expect.refused.is_some() {
        if case.settings.is_none() || targets != 0 {
            return Err(CaseError::Invalid {
                path: path.into(),
                message: "a case expecting `refused` gives `settings` and no `reconcile`, `finalize` or `map`".into(),
            });
        }
    } else if targets != 1 {
        return Err(CaseError::Invalid { path: path.into(), message: "give exactly one of `reconcile`, `finalize` or `map`".into() });
    }
    if let Some(cluster) = case.cluster.as_ref().filter(|c| !case.clusters.contains_key(*c)) {
        return Err(CaseError::Invalid { path: path.into(), message: format!("`cluster: {cluster}` names none of the case's `clusters`") });
    }
    Ok(case)
}

/// Runs one case against a loaded plugin.
pub async fn run_case(runtime: &Runtime, plugin: &LoadedPlugin, policy: &LimitPolicy, case: &Case) -> Result<Option<String>, String> {
    let settings = match &case.settings {
        Some(settings) => settings.to_string(),
        None => plugin.settings.clone(),
    };
    let described = match &case.settings {
        Some(_) => {
            let described = runtime.describe(&plugin.prepared, "case", &settings, policy, plugin.described.limits).await;
            match (described, &case.expect.refused) {
                (Ok(described), None) => described,
                (Err(e), None) => return Err(e.to_string()),
                (Err(e), Some(want)) if e.to_string().contains(want.as_str()) => return Ok(None),
                (Err(e), Some(want)) => return Ok(Some(format!("the settings were refused, but not with {want:?}: {e}\n"))),
                (Ok(_), Some(want)) => return Ok(Some(format!("the settings were accepted; expected a refusal with {want:?}\n"))),
            }
        }
        None => plugin.described.clone(),
    };
    let recorder = Arc::new(Recorder::default());
    let own = fixture(&described.manifest, &case.cache)?;
    let mut members = BTreeMap::new();
    for (name, member) in &case.clusters {
        members.insert(name.clone(), (fixture(&described.manifest, &member.cache)?, member.labels.clone()));
    }
    let stored = crate::tools::offline::Writes::Stored;
    let mut targets = BTreeMap::from([(None, (crate::tools::offline::target(&own, &recorder, stored, None), BTreeMap::new()))]);
    for (name, (cache, labels)) in &members {
        targets.insert(Some(name.clone()), (crate::tools::offline::target(cache, &recorder, stored, Some(name)), labels.clone()));
    }
    // The call's own cluster: its cache holds the object, and the plain calls act there.
    let cache = match &case.cluster {
        Some(name) => &members[name].0,
        None => &own,
    };
    let here = targets[&case.cluster].0.clone();
    let fleet = OfflineFleet { here: case.cluster.clone(), scope: described.manifest.clusters.clone(), targets };
    let mut services = Services::new(here, Arc::new(fleet));
    if let Some(now) = &case.now {
        services.clock = Clock::Fixed(now_of(now)?);
    }
    let runner = runtime.runner(plugin.prepared.clone(), &described, services, PluginMetrics::default(), &settings);
    let manifest: &crate::manifest::Manifest = &described.manifest;

    let mut failures = String::new();
    if let Some(object) = &case.map {
        let gvk = gvk_of(object).ok_or("the `map` object needs apiVersion and kind")?;
        if runner.declarative() {
            // The host maps by the rules the parents' customize answered: ask each parent first.
            for view in cache.view().views(&manifest.primary) {
                for (key, object) in view.list(None, None, usize::MAX).unwrap_or_default() {
                    let _ = runner.answer(&Request { key, object, retries: 0 }, false).await;
                }
            }
            recorder.clear();
        }
        match (runner.map_related(&gvk, object.to_string().into(), |_| true).await, &case.expect.result) {
            (Ok(keys), expected) => {
                let keys: Vec<String> = keys.iter().map(ToString::to_string).collect();
                if let Some(expected) = expected {
                    let _ = writeln!(failures, "map-related returned {}; expected {expected}", json!(keys));
                } else if let Some(expected) = &case.expect.keys {
                    compare(&mut failures, "keys", &json!(expected), &json!(keys));
                }
            }
            // A map case expecting a `result` expects map-related to fail (it has no error value).
            (Err(e), Some(expected)) => check_result(&mut failures, expected, &Err(e)),
            (Err(e), None) => return Err(format!("map-related failed: {e}")),
        }
    } else {
        let (spec, finalize) = match (&case.reconcile, &case.finalize) {
            (Some(spec), _) => (spec, false),
            (None, Some(spec)) => (spec, true),
            _ => unreachable!("checked when read"),
        };
        let key = ObjectKey::new(spec.namespace.as_deref(), &spec.name);
        let object = cache.view().views(&manifest.primary).first().and_then(|v| v.get(&key));
        let object = object.ok_or_else(|| format!("{key} ({}) is not in the case's cache", manifest.primary))?;
        let request = Request { key, object, retries: 0 };
        let result = match &case.expect.desired {
            Some(_) if !runner.declarative() => return Err("`expect.desired` is for declarative plugins; this one reconciles itself".into()),
            Some(expected) => {
                let answer = runner.answer(&request, finalize).await;
                if let Ok(answer) = &answer {
                    let actual =
                        json!({"children": answer.children, "status": answer.status, "resyncAfter": answer.resync_after, "finalized": answer.finalized});
                    let mut given: serde_json::Map<String, Value> = expected.keys().filter_map(|k| actual.get(k).map(|v| (k.clone(), v.clone()))).collect();
                    if case.expect.compare == Match::Fields
                        && let (Some(expected), Some(children)) = (expected.get("children"), given.get_mut("children"))
                    {
                        *children = given_fields(expected, children);
                    }
                    compare(&mut failures, "desired", &Value::Object(expected.clone()), &Value::Object(given));
                }
                match &case.expect.calls {
                    // What the host then writes, when the case says what that should be.
                    Some(_) => {
                        recorder.clear();
                        if finalize { runner.finalize(request).await } else { runner.reconcile(request).await }
                    }
                    None => answer.map(|_| Action::Done),
                }
            }
            None if finalize => runner.finalize(request).await,
            None => runner.reconcile(request).await,
        };
        if let Some(expected) = &case.expect.result {
            check_result(&mut failures, expected, &result);
        } else if let Err(e) = &result {
            let _ = writeln!(failures, "the call failed: {e}");
        }
    }
    let calls: Vec<Value> = recorder
        .writes_in_clusters()
        .iter()
        .map(|(cluster, write)| {
            let mut call = case::call(write);
            if let (Some(cluster), Some(spelled)) = (cluster, call.as_object_mut()) {
                spelled.insert("cluster".into(), json!(cluster));
            }
            call
        })
        .collect();
    // Compared exactly: none when the case names none, unless it checks a declarative plugin's
    // answer alone.
    let expected = match (&case.expect.calls, &case.expect.desired) {
        (Some(calls), _) => Some(calls.clone()),
        (None, None) => Some(Vec::new()),
        (None, Some(_)) => None,
    };
    if let Some(expected) = expected {
        let (expected, calls) = (Value::Array(expected), Value::Array(calls));
        let calls = match case.expect.compare {
            Match::Exact => calls,
            Match::Fields => given_fields(&expected, &calls),
        };
        compare(&mut failures, "calls", &expected, &calls);
    }
    check_events(&mut failures, &case.expect.events, &recorder.events());
    Ok((!failures.is_empty()).then_some(failures))
}

/// The cache a case describes, as the host would hand it to a plugin declaring `manifest`.
pub fn fixture(manifest: &crate::manifest::Manifest, objects: &[Value]) -> Result<FixtureCache, String> {
    let mut cache = FixtureCache::default();
    // Every resource the plugin reads is cached, even when the case has no object of it.
    for resource in manifest.cached_resources() {
        cache.add_resource(resource.clone(), crate::resource::builtin_scope(resource));
    }
    for object in objects {
        let gvk = gvk_of(object).ok_or("every cache object needs apiVersion and kind")?;
        cache.insert(&gvk, &object.to_string()).map_err(|e| format!("cache object: {e}"))?;
    }
    cache.hand_as(manifest);
    Ok(cache)
}

/// A case's `now`: an RFC 3339 time (`2026-01-02T03:04:05Z`).
pub fn now_of(text: &str) -> Result<std::time::SystemTime, String> {
    let at: k8s_openapi::jiff::Timestamp = text.parse().map_err(|e| format!("now: {text:?} is not an RFC 3339 time like 2026-01-02T03:04:05Z: {e}"))?;
    if at < k8s_openapi::jiff::Timestamp::UNIX_EPOCH {
        return Err(format!("now: {text:?} is before 1970"));
    }
    Ok(at.into())
}

fn gvk_of(object: &Value) -> Option<Gvk> {
    Some(Gvk::from_api_version(object.get("apiVersion")?.as_str()?, object.get("kind")?.as_str()?))
}

fn check_result(failures: &mut String, expected: &Value, actual: &Result<Action, CallError>) {
    let actual_value = case::result(actual);
    // An expected error message is a substring of the actual one.
    let message_matches = |e: &serde_json::Map<String, Value>, actual: &str| e.get("message").and_then(Value::as_str).is_none_or(|m| actual.contains(m));
    let matches = match (expected, &actual_value) {
        (Value::Object(e), Value::Object(a)) if e.contains_key("error") => {
            e.get("error") == a.get("error") && message_matches(e, a.get("message").and_then(Value::as_str).unwrap_or_default())
        }
        // A fault is named by its kind: how a trap reads differs by language and build.
        (Value::Object(e), _) if e.contains_key("fault") => match actual {
            Err(CallError::Fault(fault)) => e.get("fault").and_then(Value::as_str) == Some(fault.kind()) && message_matches(e, &fault.to_string()),
            _ => false,
        },
        _ => *expected == actual_value,
    };
    if !matches {
        compare(failures, "result", expected, &actual_value);
    }
}

fn check_events(failures: &mut String, expected: &[Value], actual: &[ObjectEvent]) {
    let actual: Vec<Value> = actual.iter().map(case::event).collect();
    // Each expected event is compared on the fields it gives.
    let projected: Vec<Value> = actual
        .iter()
        .zip(expected.iter().map(Some).chain(std::iter::repeat(None)))
        .map(|(a, e)| match e.and_then(Value::as_object) {
            Some(fields) => Value::Object(fields.keys().filter_map(|k| a.get(k).map(|v| (k.clone(), v.clone()))).collect()),
            None => a.clone(),
        })
        .collect();
    compare(failures, "events", &Value::Array(expected.to_vec()), &Value::Array(projected));
}

/// Appends a unified diff of expected and actual, as YAML, when they differ.
fn compare(failures: &mut String, what: &str, expected: &Value, actual: &Value) {
    if let Some(diff) = case::diff(what, expected, actual) {
        failures.push_str(&diff);
    }
}

/// Runs every case of `dir` and prints a test runner's report. Returns (passed, failed).
pub async fn run_dir(runtime: &Runtime, plugin: &LoadedPlugin, policy: &LimitPolicy, dir: &Path, out: &mut String) -> Result<(usize, usize), CaseError> {
    let files = case_files(dir)?;
    let manifest: &Described = &plugin.described;
    let _ = writeln!(out, "\nrunning {} cases for {} {} ({})", files.len(), manifest.manifest.name, manifest.manifest.version, plugin.path.display());
    let mut outcomes = Vec::new();
    for path in &files {
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let failure = match read_case(path) {
            Ok(case) => run_case(runtime, plugin, policy, &case).await.unwrap_or_else(|e| Some(format!("cannot run the case: {e}\n"))),
            Err(e) => Some(format!("{e}\n")),
        };
        let _ = writeln!(out, "case {name} ... {}", if failure.is_some() { "FAILED" } else { "ok" });
        outcomes.push(Outcome { name, failure });
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.failure.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\nfailures:");
        for outcome in &failed {
            let _ = write!(out, "\n---- {} ----\n{}", outcome.name, outcome.failure.as_deref().unwrap_or_default());
        }
    }
    let (passed, failed) = (outcomes.len() - failed.len(), failed.len());
    let _ = writeln!(out, "\ntest result: {}. {passed} passed; {failed} failed", if failed == 0 { "ok" } else { "FAILED" });
    Ok((passed, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Fault, GuestErrorCode};

    fn failures(expected: Value, actual: Result<Action, CallError>) -> String {
        let mut failures = String::new();
        check_result(&mut failures, &expected, &actual);
        failures
    }

    #[test]
    fn a_fault_is_expected_by_its_kind_and_optionally_a_substring() {
        let trap = || Err(CallError::Fault(Fault::Trap("wasm trap: wasm `unreachable` instruction executed".into())));
        assert_eq!(failures(json!({"fault": "trap"}), trap()), "");
        assert_eq!(failures(json!({"fault": "trap", "message": "unreachable"}), trap()), "");
        assert_ne!(failures(json!({"fault": "trap", "message": "deadline"}), trap()), "");
        assert_ne!(failures(json!({"fault": "deadline"}), trap()), "");
        let returned = Err(CallError::Plugin { code: GuestErrorCode::Other, message: "trap".into() });
        assert_ne!(failures(json!({"fault": "trap"}), returned), "", "an error value is not a fault");
        assert_ne!(failures(json!({"fault": "trap"}), Ok(Action::Done)), "");
    }

    #[test]
    fn fields_compare_what_the_expectation_gives_at_every_depth() {
        let actual = json!([{"update": {"apiVersion": "v1", "metadata": {"name": "a", "labels": {}}, "spec": {"r": [1, {"x": 1, "y": 2}]}}}]);
        let given = json!([{"update": {"metadata": {"name": "a"}, "spec": {"r": [1, {"y": 2}]}}}]);
        assert_eq!(given_fields(&given, &actual), given);
        let wrong = json!([{"update": {"metadata": {"name": "b"}}}]);
        assert_ne!(given_fields(&wrong, &actual), wrong, "a given field that differs still differs");
        let shorter = json!([{"update": {"spec": {"r": [1]}}}]);
        assert_ne!(given_fields(&shorter, &actual), shorter, "lists compare item by item, as many items");
        let missing = json!([{"update": {"status": {}}}]);
        assert_ne!(given_fields(&missing, &actual), missing, "a field the call lacks is missing");
        assert_ne!(given_fields(&json!([]), &actual), json!([]), "as many calls");
    }

    #[test]
    fn now_is_an_rfc3339_time_after_1970() {
        let at = now_of("2026-01-02T03:04:05Z").unwrap();
        assert_eq!(at.duration_since(std::time::SystemTime::UNIX_EPOCH).unwrap().as_secs(), 1_767_323_045);
        assert!(now_of("yesterday").unwrap_err().contains("RFC 3339"));
        assert!(now_of("1969-12-31T23:59:59Z").unwrap_err().contains("before 1970"));
    }

    #[test]
    fn an_error_is_expected_by_its_code_and_a_substring_of_its_message() {
        let forbidden = || Err(CallError::Plugin { code: GuestErrorCode::Forbidden, message: "no get on Pods".into() });
        assert_eq!(failures(json!({"error": "forbidden", "message": "on Pods"}), forbidden()), "");
        assert_eq!(failures(json!({"error": "forbidden"}), forbidden()), "");
        assert_ne!(failures(json!({"error": "invalid"}), forbidden()), "");
        assert_ne!(failures(json!({"error": "forbidden"}), Err(CallError::Fault(Fault::Trap("forbidden".into())))), "");
    }
}
