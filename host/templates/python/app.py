"""{{name}}: a kubewasm controller plugin.

Every ConfigMap labeled `{{name}}.example.com/enabled=true` gets a summary ConfigMap,
`<name>-summary`, that lists the keys of its data and is owned by it (so Kubernetes deletes the
summary with it). One server-side apply per reconcile; the host does the rest (watches, cache,
queue, retries).

`manifest` says what the plugin reconciles and what it may do; `reconcile` is the logic.
"""

from kubewasm import Action, Context, Controller, Manifest, Object, SettingsError, kinds
from kubewasm import objects as o

# The label that selects the ConfigMaps this controller reconciles.
LABEL = "{{name}}.example.com/enabled"


class Summarizer(Controller):
    # Every setting the plugin takes, with its default: any other key in `{{name}}.toml` refuses
    # the plugin. A summary is named `<name>-<suffix>`.
    settings_defaults = {"suffix": "summary"}

    def __init__(self, settings: dict) -> None:
        """`settings`: `{{name}}.toml` beside `{{name}}.wasm` in the host's plugin directory."""
        super().__init__(settings)
        suffix = settings["suffix"]
        if not isinstance(suffix, str) or not suffix:
            raise SettingsError("suffix must be a non-empty string")
        self.suffix = suffix

    def manifest(self) -> Manifest:
        return (
            Manifest("{{name}}", "0.1.0")
            .primary(kinds.CONFIG_MAP)
            .primary_selector(f"{LABEL}=true")
            .permission(kinds.CONFIG_MAP, ["create", "patch"])
        )

    def reconcile(self, cm: Object, ctx: Context) -> Action:
        keys = sorted(cm.get("data") or {})
        summary = o.new_object(
            kinds.CONFIG_MAP,
            f"{o.name(cm)}-{self.suffix}",
            o.namespace(cm),
            data={"source": o.name(cm), "keys": ",".join(keys), "count": str(len(keys))},
        )
        summary["metadata"]["ownerReferences"] = [o.controller_owner_ref(cm)]
        ctx.apply(summary)
        ctx.info(f"summarized {len(keys)} keys of {o.name(cm)}")
        return Action.done()
