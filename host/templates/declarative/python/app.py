"""{{name}}: a declarative kubewasm controller plugin.

Every Namespace labeled `{{name}}.example.com/enabled=true` is a parent whose one child is a
summary ConfigMap in it, `<namespace>-summary`, that lists the keys of the namespace's labels.
`sync` answers what the children should be; the host creates the summary owned by its parent,
applies changes in place, and deletes children no longer answered.

`manifest` says what the parents and children are; `sync` is the logic.
"""

from kubewasm import CompositeController, Manifest, SettingsError, SyncRequest, SyncResponse, UpdateStrategy, kinds
from kubewasm import objects as o

# The label that makes a Namespace a parent.
LABEL = "{{name}}.example.com/enabled"


class Summarizer(CompositeController):
    # Every setting the plugin takes, with its default: any other key in `{{name}}.toml` refuses
    # the plugin. A summary is named `<namespace>-<suffix>`.
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
            .primary(kinds.NAMESPACE)
            .primary_selector(f"{LABEL}=true")
            .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)
        )

    def sync(self, request: SyncRequest) -> SyncResponse:
        namespace = request.parent
        keys = sorted(o.labels(namespace))
        summary = o.new_object(
            kinds.CONFIG_MAP,
            f"{o.name(namespace)}-{self.suffix}",
            o.name(namespace),
            data={"source": o.name(namespace), "keys": ",".join(keys), "count": str(len(keys))},
        )
        self.ctx.info(f"{len(keys)} labels on {o.name(namespace)}")
        # The Namespace's status is the API server's: none leaves it alone.
        return SyncResponse(children=[summary])
