//! The node reboot coordinator: a node agent marks Nodes that need a reboot with the
//! `reboot-needed` annotation; this plugin gives `reboot-now` to as many of them as it can while
//! at most `maxUnavailable` Nodes are unavailable — rebooting (`reboot-now`) or not Ready —
//! counted from the cache. The agent reboots a Node with `reboot-now`, then clears both
//! annotations. Any Node's change re-evaluates the waiting ones (a `map-related` watch).

use kubewasm_sdk::k8s_openapi::api::core::v1::Node;
use kubewasm_sdk::prelude::*;
use kubewasm_sdk::{PatchType, gvk_of};

const REBOOT_NEEDED: &str = "reboot.kubewasm.io/reboot-needed";
const REBOOT_NOW: &str = "reboot.kubewasm.io/reboot-now";

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Settings {
    #[serde(default = "one")]
    max_unavailable: i64,
}

fn one() -> i64 {
    1
}

impl Default for Settings {
    fn default() -> Self {
        Settings { max_unavailable: one() }
    }
}

struct RebootCoordinator {
    max_unavailable: usize,
}

fn waiting(node: &Node) -> bool {
    node.annotation(REBOOT_NEEDED).is_some() && node.annotation(REBOOT_NOW).is_none()
}

fn unavailable(node: &Node) -> bool {
    let ready = node.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    node.annotation(REBOOT_NOW).is_some() || ready.is_none_or(|c| c.status != "True")
}

impl Controller for RebootCoordinator {
    type Primary = Node;
    type Settings = Settings;

    fn new(settings: Settings) -> Result<Self, String> {
        match usize::try_from(settings.max_unavailable) {
            Ok(n) if n >= 1 => Ok(RebootCoordinator { max_unavailable: n }),
            _ => Err(format!("maxUnavailable must be at least 1, got {}", settings.max_unavailable)),
        }
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("reboot-coordinator", "0.1.0")
            .primary::<Node>()
            .watches::<Node>(Mapping::MapRelated)
            .permission::<Node>(&[Verb::Patch])
            .max_concurrency(1)
    }

    fn reconcile(&self, node: Node, ctx: &Context) -> Result<Action> {
        if !waiting(&node) {
            return Ok(Action::Done);
        }
        let busy = ctx.list::<Node>(None, None)?.iter().filter(|n| unavailable(n)).count();
        if busy < self.max_unavailable {
            let body = kubewasm_sdk::serde_json::json!({"metadata": {"annotations": {REBOOT_NOW: "true"}}});
            ctx.patch(&gvk_of::<Node>(), None, node.name(), PatchType::Merge, &body)?;
            ctx.info(&format!("{}: reboot now ({busy} of {} unavailable)", node.name(), self.max_unavailable));
        }
        Ok(Action::Done)
    }

    fn map_related(&self, _: &Gvk, _: DynamicObject, ctx: &Context) -> Result<Vec<ObjectKey>> {
        let nodes = ctx.list::<Node>(None, None)?;
        let mut keys: Vec<ObjectKey> = nodes.iter().filter(|n| waiting(n)).map(|n| n.key()).collect();
        keys.sort();
        Ok(keys)
    }
}

kubewasm_sdk::export_controller!(RebootCoordinator);
