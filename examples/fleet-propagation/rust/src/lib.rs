//! Fleet propagation: a ConfigMap of the hub (the host's own cluster) labelled
//! `fleet.kubewasm.io/propagate=true` is copied, data and all, into the same namespace of every
//! member cluster whose labels match the `members` setting (`env=prod` by default). A copy is
//! labelled `fleet.kubewasm.io/source=<name>`; the finalizer deletes the copies before the
//! source goes. A member engaged later gets its copies at once (the host reconciles every
//! source again when a member the plugin reaches is engaged); one that does not answer is
//! tried again in 30 s without holding up the others.

use std::time::Duration;

use kubewasm_sdk::gvk_of;
use kubewasm_sdk::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewasm_sdk::prelude::*;

const PROPAGATE: &str = "fleet.kubewasm.io/propagate";
const SOURCE: &str = "fleet.kubewasm.io/source";
const FINALIZER: &str = "fleet.kubewasm.io/copies";
/// How soon members that did not answer are tried again.
const RETRY: Duration = Duration::from_secs(30);

#[derive(serde::Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct Settings {
    /// The member clusters to copy into: a label selector over their labels.
    members: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { members: "env=prod".into() }
    }
}

struct Propagation {
    members: String,
}

/// The copy of `source` a member gets.
fn copy_of(source: &ConfigMap) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: source.metadata.name.clone(),
            namespace: source.metadata.namespace.clone(),
            labels: Some([(SOURCE.to_string(), source.name().to_string())].into()),
            ..Default::default()
        },
        data: source.data.clone(),
        binary_data: source.binary_data.clone(),
        immutable: source.immutable,
    }
}

impl Propagation {
    /// Runs `each` in every member the plugin reaches now; the members that did not answer.
    fn in_members(&self, ctx: &Context, each: impl Fn(&Context) -> Result<()>) -> Result<Vec<String>> {
        let mut unavailable = Vec::new();
        for cluster in ctx.clusters() {
            match each(&ctx.in_cluster(Some(&cluster.name))?) {
                Ok(()) => {}
                Err(e) if e.code == ErrorCode::Unavailable => {
                    ctx.warn(&format!("cluster {} did not answer: {e}", cluster.name));
                    unavailable.push(cluster.name);
                }
                Err(e) => return Err(Error::new(e.code, format!("cluster {}: {}", cluster.name, e.message))),
            }
        }
        Ok(unavailable)
    }
}

impl Controller for Propagation {
    type Primary = ConfigMap;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        Ok(Propagation { members: settings.members })
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("fleet-propagation", env!("CARGO_PKG_VERSION"))
            .primary::<ConfigMap>()
            .primary_selector(&format!("{PROPAGATE}=true"))
            .reach_members(Members::Matching(self.members.clone()))
            .finalizer(FINALIZER)
            .grant(&gvk_of::<ConfigMap>(), None, &[Verb::Create, Verb::Patch, Verb::Delete], &[])
    }

    fn reconcile(&self, source: ConfigMap, ctx: &Context) -> Result<Action> {
        let copy = copy_of(&source);
        let unavailable = self.in_members(ctx, |member| member.apply(&copy).map(drop))?;
        let copied: Vec<String> = ctx.clusters().into_iter().map(|c| c.name).filter(|c| !unavailable.contains(c)).collect();
        ctx.event(&source, EventType::Normal, "Propagated", "Reconcile", &format!("copied to {} member cluster(s): {}", copied.len(), copied.join(",")))?;
        if unavailable.is_empty() { Ok(Action::Done) } else { Ok(Action::RequeueAfter(RETRY)) }
    }

    fn finalize(&self, source: ConfigMap, ctx: &Context) -> Result<Action> {
        let unavailable = self.in_members(ctx, |member| match member.delete::<ConfigMap>(source.namespace(), source.name()) {
            Err(e) if e.code == ErrorCode::NotFound => Ok(()),
            deleted => deleted,
        })?;
        if unavailable.is_empty() { Ok(Action::Done) } else { Ok(Action::RequeueAfter(RETRY)) }
    }
}

kubewasm_sdk::export_controller!(Propagation);
