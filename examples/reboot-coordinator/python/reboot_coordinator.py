"""A node reboot coordinator as a kubewasm plugin, in Python.

A node agent annotates a Node `reboot.kubewasm.io/reboot-needed`. This controller grants
`reboot.kubewasm.io/reboot-now: "true"` to waiting nodes while fewer than `maxUnavailable`
nodes (a setting, default 1) are unavailable: rebooting (reboot-now set) or not Ready. The agent
reboots a granted node and clears both annotations once it is back.

Every Node event re-evaluates every waiting node (`map_related`), so a node coming back Ready
lets the next one go.
"""

import json
from typing import Any

from kubewasm import Action, Context, Controller, Gvk, Manifest, Mapping, Object, ObjectKey, SettingsError, kinds
from kubewasm import objects as o

REBOOT_NEEDED = "reboot.kubewasm.io/reboot-needed"
REBOOT_NOW = "reboot.kubewasm.io/reboot-now"


def is_waiting(node: Object) -> bool:
    return o.has_annotation(node, REBOOT_NEEDED) and not o.has_annotation(node, REBOOT_NOW)


def is_unavailable(node: Object) -> bool:
    return o.has_annotation(node, REBOOT_NOW) or o.condition_status(node, "Ready") != "True"


class RebootCoordinator(Controller):
    # reboot-coordinator.toml: how many Nodes may be unavailable at once.
    settings_defaults = {"maxUnavailable": 1}

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        value = settings["maxUnavailable"]
        # As in the Rust version: an integer (not 2.0, not a bool, which Python counts as an int)
        # of at least 1.
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SettingsError(f"maxUnavailable must be an integer of at least 1, not {json.dumps(value)}")
        self.max_unavailable = value

    def manifest(self) -> Manifest:
        return (
            Manifest("reboot-coordinator", "0.1.0")
            .primary(kinds.NODE)
            .watches(kinds.NODE, Mapping.map_related())
            .permission(kinds.NODE, ["patch"])
            .max_concurrency(1)
        )

    def reconcile(self, node: Object, ctx: Context) -> Action:
        if not is_waiting(node):
            return Action.done()
        unavailable = sum(1 for n in ctx.list(kinds.NODE) if is_unavailable(n))
        if unavailable < self.max_unavailable:
            ctx.patch(kinds.NODE, None, o.name(node), {"metadata": {"annotations": {REBOOT_NOW: "true"}}})
            ctx.info(
                "granted reboot",
                node=o.name(node),
                unavailable=unavailable,
                maxUnavailable=self.max_unavailable,
            )
        return Action.done()

    def map_related(self, resource: Gvk, obj: Object, ctx: Context) -> list[ObjectKey]:
        waiting = [n for n in ctx.list(kinds.NODE) if is_waiting(n)]
        return sorted((ObjectKey(None, o.name(n)) for n in waiting), key=lambda k: k.name)
