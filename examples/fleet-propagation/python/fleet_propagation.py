"""Fleet propagation, in Python: a ConfigMap of the hub (the host's own cluster) labelled
`fleet.kubewasm.io/propagate=true` is copied, data and all, into the same namespace of every
member cluster whose labels match the `members` setting (`env=prod` by default). A copy is
labelled `fleet.kubewasm.io/source=<name>`; the finalizer deletes the copies before the source
goes. A member engaged later gets its copies at once (the host reconciles every source again when
a member the plugin reaches is engaged); one that does not answer is tried again in 30 s without
holding up the others.
"""

from collections.abc import Callable
from typing import Any

from kubewasm import Action, Context, Controller, ErrorCode, EventType, KubewasmError, Manifest, Members, NotFound, Object, kinds
from kubewasm import objects as o

PROPAGATE = "fleet.kubewasm.io/propagate"
SOURCE = "fleet.kubewasm.io/source"
FINALIZER = "fleet.kubewasm.io/copies"
# How soon members that did not answer are tried again, in seconds.
RETRY = 30


def copy_of(source: Object) -> Object:
    """The copy of `source` a member gets."""
    copy: Object = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": o.name(source), "namespace": o.namespace(source), "labels": {SOURCE: o.name(source)}},
    }
    for field in ("data", "binaryData", "immutable"):
        if source.get(field) is not None:
            copy[field] = source[field]
    return copy


class FleetPropagation(Controller):
    # The member clusters to copy into: a label selector over their labels.
    settings_defaults = {"members": "env=prod"}

    def manifest(self) -> Manifest:
        return (
            Manifest("fleet-propagation", "0.1.0")
            .primary(kinds.CONFIG_MAP)
            .primary_selector(f"{PROPAGATE}=true")
            .reach_members(Members.matching(self.settings["members"]))
            .finalizer(FINALIZER)
            .permission(kinds.CONFIG_MAP, ["create", "patch", "delete"])
        )

    def in_members(self, ctx: Context, each: Callable[[Context], Any]) -> tuple[list[str], list[str]]:
        """Runs `each` in every member the plugin reaches now: the members it ran in, and those
        that did not answer. Any other failure fails the call, naming the member."""
        done: list[str] = []
        unavailable: list[str] = []
        for cluster in ctx.clusters():
            try:
                each(ctx.in_cluster(cluster.name))
            except KubewasmError as e:
                if e.code is not ErrorCode.UNAVAILABLE:
                    raise KubewasmError.from_code(e.code, f"cluster {cluster.name}: {e.message}") from None
                ctx.warn(f"cluster {cluster.name} did not answer: {e}")
                unavailable.append(cluster.name)
            else:
                done.append(cluster.name)
        return done, unavailable

    def reconcile(self, source: Object, ctx: Context) -> Action:
        copy = copy_of(source)
        copied, unavailable = self.in_members(ctx, lambda member: member.apply(copy))
        ctx.event(source, EventType.NORMAL, "Propagated", "Reconcile", f"copied to {len(copied)} member cluster(s): {','.join(copied)}")
        return Action.requeue_after(RETRY) if unavailable else Action.done()

    def finalize(self, source: Object, ctx: Context) -> Action:
        def delete(member: Context) -> None:
            try:
                member.delete(kinds.CONFIG_MAP, o.namespace(source), o.name(source))
            except NotFound:
                pass

        _, unavailable = self.in_members(ctx, delete)
        return Action.requeue_after(RETRY) if unavailable else Action.done()
