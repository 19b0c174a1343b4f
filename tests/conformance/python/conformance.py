"""The SDK conformance plugin in Python: what each `data.do` of a primary ConfigMap and each
`do` annotation of a watched Secret makes it do is in tests/conformance/README.md, the same in
every language."""

from kubewasm import Action, Context, Controller, EventType, Gvk, KubewasmError, Manifest, Mapping, Object, ObjectKey, Other, kinds
from kubewasm import objects as o


class Conformance(Controller):
    settings_defaults = {"prefix": "conformance"}

    def manifest(self) -> Manifest:
        return Manifest("conformance", "0.1.0").primary(kinds.CONFIG_MAP).watches(kinds.SECRET, Mapping.map_related()).permission(kinds.CONFIG_MAP, ["patch"])

    def reconcile(self, cm: Object, ctx: Context) -> Action:
        data = cm.get("data") or {}
        do = data.get("do", "done")
        if do == "done":
            return Action.done()
        if do == "requeue":
            # Python's unit of time is the second.
            return Action.requeue_after(int(data["after-us"]) / 1_000_000)
        if do == "error":
            raise KubewasmError.from_code(data["code"], f"{self.settings['prefix']}: {data['code']}")
        if do == "long-error":
            raise Other("é" * 40_000)
        if do == "panic":
            raise RuntimeError("conformance panics on purpose")
        if do == "get-long-name":
            ctx.get(kinds.CONFIG_MAP, o.namespace(cm), "a" * 254)
        elif do == "list-long-selector":
            ctx.list(kinds.CONFIG_MAP, o.namespace(cm), "a" * 4097)
        elif do == "event-long-note":
            ctx.event(cm, EventType.NORMAL, "Checked", "Reconcile", "n" * 1025)
        elif do == "event-empty-reason":
            ctx.event(cm, EventType.NORMAL, "", "Reconcile", "")
        elif do == "read-pod":
            ctx.get(kinds.POD, o.namespace(cm), "x")
        else:
            raise Other(f"unknown do {do!r}")
        return Action.done()

    def map_related(self, resource: Gvk, secret: Object, ctx: Context) -> list[ObjectKey]:
        do = o.annotation(secret, "do")
        if do == "panic":
            raise RuntimeError("conformance panics on purpose in map-related")
        if do == "error":
            raise KubewasmError.from_code("invalid", "conformance fails map-related on purpose")
        primary = o.label(secret, "primary")
        return [ObjectKey(o.namespace(secret), primary)] if primary else []
