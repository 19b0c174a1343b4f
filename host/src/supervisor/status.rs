//! What the host tells about its plugins: the status ConfigMap listing each plugin (version,
//! digest, file, finalizer; and plugins removed while objects still carry their finalizer), and
//! the log lines, metrics and Events of every load, reload, rejection, rollback and unload. Written by the
//! leader only, through the host's own API client.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::client::{ApiClient, RequestError, WriteOp, WriteRequest};
use crate::controller::{Agreement, QuarantineListing, ShadowReport};
use crate::events::{EventRecorder, ObjectEvent};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::resource::{Gvk, ObjectKey, uid_of};

/// The ConfigMap (namespace, name) where the host lists its plugins and records plugin Events.
#[derive(Debug, Clone)]
pub struct StatusObject {
    pub namespace: String,
    pub name: String,
}

/// What happened to a plugin: a load, a reload, a rejection, a rollback, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Loaded,
    Reloaded,
    Rejected,
    /// Swapped back to the version before, which failed on clearly fewer objects.
    RolledBack,
    Unloaded,
    /// A candidate version started in the shadow of the live one.
    Candidate,
    /// A candidate's shadow run ended without a promotion (its file went, or it was refused).
    CandidateRemoved,
    /// A candidate that ran in the shadow became the live version.
    Promoted,
}

impl Transition {
    /// The `result` label of `kubewasm_plugin_reloads_total`.
    fn label(self) -> &'static str {
        match self {
            Transition::Loaded => "loaded",
            Transition::Reloaded => "reloaded",
            Transition::Rejected => "rejected",
            Transition::RolledBack => "rolled_back",
            Transition::Unloaded => "unloaded",
            Transition::Candidate => "candidate",
            Transition::CandidateRemoved => "candidate_removed",
            Transition::Promoted => "promoted",
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Transition::Loaded => "PluginLoaded",
            Transition::Reloaded => "PluginReloaded",
            Transition::Rejected => "PluginRejected",
            Transition::RolledBack => "RolledBack",
            Transition::Unloaded => "PluginUnloaded",
            Transition::Candidate => "CandidateShadowed",
            Transition::CandidateRemoved => "CandidateRemoved",
            Transition::Promoted => "CandidatePromoted",
        }
    }
}

pub struct StatusPublisher {
    object: StatusObject,
    /// As the host itself.
    api: Arc<ApiClient>,
    events: EventRecorder,
    metrics: Arc<Metrics>,
    leadership: Leadership,
    /// Publications asked for so far; a caller's ticket is this count after its own.
    requested: AtomicU64,
    /// One write at a time, each listing what runs when it is made, so that writes finishing
    /// out of order cannot leave an older listing behind.
    publishing: tokio::sync::Mutex<Published>,
}

/// The last write: the tickets it covered, the status object's uid and the listing written.
#[derive(Default)]
struct Published {
    covers: u64,
    uid: Option<String>,
    listing: Option<BTreeMap<String, String>>,
}

impl StatusPublisher {
    pub fn new(object: StatusObject, api: Arc<ApiClient>, events: EventRecorder, metrics: Arc<Metrics>, leadership: Leadership) -> Self {
        StatusPublisher { object, api, events, metrics, leadership, requested: AtomicU64::new(0), publishing: Default::default() }
    }

    pub fn object(&self) -> &StatusObject {
        &self.object
    }

    /// Writes the listing into the status ConfigMap (server-side apply) and returns its uid.
    /// Nothing on a standby. Callers that queue behind a write share the next one: its listing,
    /// taken after they asked, holds what each of them changed (fifty plugins starting make a
    /// few writes, not a hundred in a row).
    pub async fn publish(&self, listing: impl FnOnce() -> BTreeMap<String, String>) -> Result<Option<String>, RequestError> {
        if !self.leadership.is_leader() {
            return Ok(None);
        }
        let ticket = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
        let mut published = self.publishing.lock().await;
        if published.covers >= ticket {
            return Ok(published.uid.clone());
        }
        let covers = self.requested.load(Ordering::SeqCst);
        self.write(&mut published, covers, listing()).await
    }

    /// Writes the listing if it differs from the last one written: for what changes without a
    /// load or an unload (objects quarantined and released). Nothing on a standby.
    pub async fn refresh(&self, listing: impl FnOnce() -> BTreeMap<String, String>) -> Result<(), RequestError> {
        if !self.leadership.is_leader() {
            return Ok(());
        }
        let mut published = self.publishing.lock().await;
        let listing = listing();
        if published.listing.as_ref() != Some(&listing) {
            let covers = published.covers;
            self.write(&mut published, covers, listing).await?;
        }
        Ok(())
    }

    async fn write(&self, published: &mut Published, covers: u64, listing: BTreeMap<String, String>) -> Result<Option<String>, RequestError> {
        let object = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.object.name, "namespace": self.object.namespace, "labels": {"app.kubernetes.io/managed-by": "kubewasm"}},
            "data": &listing,
        });
        let request = WriteRequest {
            resource: Gvk::new("", "v1", "ConfigMap"),
            namespace: Some(self.object.namespace.clone()),
            name: self.object.name.clone(),
            op: WriteOp::Apply { object, force: true, status: false },
        };
        let stored = self.api.write(request).await?;
        *published = Published { covers, uid: stored.and_then(|json| uid_of(&json)), listing: Some(listing) };
        Ok(published.uid.clone())
    }

    /// Logs and counts one load, reload, rejection, rollback or unload, and records it as an
    /// Event on the status ConfigMap (after `uid` says which one it is).
    pub fn record(&self, plugin: &str, outcome: Transition, note: &str, uid: Option<String>) {
        let note = note.replace('\n', " ");
        let warning = matches!(outcome, Transition::Rejected | Transition::RolledBack);
        if warning {
            tracing::warn!(plugin, result = outcome.label(), "{note}");
        } else {
            tracing::info!(plugin, result = outcome.label(), "{note}");
        }
        self.metrics.reloads(plugin, outcome.label()).inc();
        if outcome == Transition::RolledBack {
            self.metrics.rollbacks(plugin).inc();
        }
        if !self.leadership.is_leader() {
            return;
        }
        self.events.publish(ObjectEvent {
            regarding: Gvk::new("", "v1", "ConfigMap"),
            key: ObjectKey::new(Some(&self.object.namespace), &self.object.name),
            uid,
            warning,
            reason: outcome.reason().into(),
            action: "Load".into(),
            note,
        });
    }
}

/// One running plugin's line in the status ConfigMap.
pub fn running_entry(version: &str, digest: &str, file: &str, finalizer: Option<&str>) -> String {
    let mut entry = format!("version={version} digest=sha256:{digest} file={file}");
    if let Some(finalizer) = finalizer {
        entry.push_str(&format!(" finalizer={finalizer}"));
    }
    entry
}

/// The fields a running plugin's entry gets while objects are quarantined for it: how many and
/// the first of them (`quarantined=2 keys=ns/a,ns/b`).
pub fn quarantine_fields(quarantined: &QuarantineListing) -> Option<String> {
    (quarantined.count > 0).then(|| {
        let keys: Vec<String> = quarantined.first.iter().map(ToString::to_string).collect();
        format!(" quarantined={} keys={}", quarantined.count, keys.join(","))
    })
}

/// The fields a running plugin's entry gets while a candidate runs in its shadow: the
/// candidate and how its reconciles compared (`candidate=1.1 candidate-digest=sha256:…
/// shadow=same:12,differs:1,error:0,fault:0,skipped:0`).
pub fn shadow_fields(report: &ShadowReport) -> String {
    format!(" candidate={} candidate-digest=sha256:{} shadow={}", report.version, report.digest, report.counts_field())
}

/// The key of a plugin's shadow report in the status ConfigMap (plugin names have no dots).
pub fn rollout_key(plugin: &str) -> String {
    format!("{plugin}.rollout")
}

/// `plugin`'s shadow report in the `data` of the status ConfigMap `configmap` (`kubewasm rollout
/// status`), or what to do when it has none.
pub fn rollout_of<'a>(data: &'a BTreeMap<String, String>, plugin: &str, configmap: &str) -> Result<&'a str, String> {
    match (data.get(&rollout_key(plugin)), data.get(plugin)) {
        (Some(report), _) => Ok(report),
        (None, Some(entry)) => Err(format!("no candidate runs in the shadow of {plugin}: copy one to NAME.next.wasm beside it (it runs {entry})")),
        (None, None) => Err(format!("the status ConfigMap {configmap} lists no plugin {plugin:?}")),
    }
}

/// A shadow run's report for people (`kubewasm rollout status`): the counts, the keys that
/// did not agree, and the first diffs.
pub fn rollout_report(plugin: &str, live: &str, report: &ShadowReport) -> String {
    let mut out = format!("candidate {} (sha256:{}) in the shadow of {plugin} {live}\n", report.version, report.digest);
    out.push_str(&format!("reconciles: {}\n", report.summary()));
    let agreeing = report.keys.values().filter(|a| **a == Agreement::Same).count();
    out.push_str(&format!("keys: {} agree, {} do not\n", agreeing, report.keys.len() - agreeing));
    let others: Vec<String> = report.keys.iter().filter(|(_, a)| **a != Agreement::Same).take(20).map(|(k, a)| format!("{k} ({})", a.label())).collect();
    if !others.is_empty() {
        out.push_str(&format!("not agreeing: {}\n", others.join(", ")));
    }
    for (key, diff) in &report.diffs {
        out.push_str(&format!("\n--- {key}\n{diff}"));
    }
    out
}

/// A removed plugin whose finalizer objects still carry: what `kubewasm finalizers release`
/// reads back.
pub fn removed_entry(finalizer: &str, primary: &Gvk, objects: usize) -> String {
    format!("state=removed finalizer={finalizer} primary={primary} objects={objects}")
}

/// The fields of a status ConfigMap entry.
pub fn parse_entry(entry: &str) -> BTreeMap<&str, &str> {
    entry.split_whitespace().filter_map(|field| field.split_once('=')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollout_report_is_read_where_it_is_written() {
        let mut data = BTreeMap::from([("a".to_string(), "version=1".to_string())]);
        let missing = rollout_of(&data, "a", "ns/status").unwrap_err();
        assert!(missing.contains("no candidate runs in the shadow of a") && missing.contains("version=1"), "{missing}");
        assert_eq!(rollout_of(&data, "b", "ns/status").unwrap_err(), "the status ConfigMap ns/status lists no plugin \"b\"");
        data.insert(rollout_key("a"), "candidate 2".into());
        assert_eq!(rollout_of(&data, "a", "ns/status"), Ok("candidate 2"));
    }

    #[test]
    fn entries_read_back() {
        let entry = removed_entry("example.com/cleanup", &Gvk::new("example.com", "v1", "Foo"), 3);
        let fields = parse_entry(&entry);
        assert_eq!(fields["state"], "removed");
        assert_eq!(fields["finalizer"], "example.com/cleanup");
        assert_eq!(fields["primary"], "Foo.v1.example.com");
        let running = running_entry("1.0", "abc", "/p/a.wasm", Some("x.io/y"));
        assert_eq!(parse_entry(&running)["finalizer"], "x.io/y");
        let quarantined = QuarantineListing { count: 3, first: vec![ObjectKey::new(Some("ns"), "a").into(), ObjectKey::new(Some("ns"), "b").into()] };
        let entry = running + &quarantine_fields(&quarantined).unwrap();
        assert_eq!(parse_entry(&entry)["quarantined"], "3");
        assert_eq!(parse_entry(&entry)["keys"], "ns/a,ns/b");
        assert_eq!(quarantine_fields(&QuarantineListing::default()), None);
    }
}
