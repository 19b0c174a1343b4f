# The README's declarative controller, kept here so the tests run it (test_composite.py) and build
# it (test_build.py, with KUBEWASM_BUILD_TESTS=1).
from kubewasm import CompositeController, Gvk, Manifest, SyncRequest, SyncResponse, UpdateStrategy, kinds
from kubewasm import objects as o

GREETING = Gvk("example.com", "v1", "Greeting")


class Greetings(CompositeController):
    """For every Greeting, a ConfigMap NAME-greeting holding its text; the Greeting's status
    names it and says whether it exists yet."""

    settings_defaults = {"salutation": "Hello"}  # every setting, with its default

    def __init__(self, settings: dict) -> None:  # settings: NAME.toml over the defaults
        super().__init__(settings)
        self.salutation = settings["salutation"]

    def manifest(self) -> Manifest:
        return (
            Manifest("greetings", "0.1.0")
            .primary(GREETING)  # the parent kind
            .child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE)  # a child kind, updated in place
        )

    def sync(self, request: SyncRequest) -> SyncResponse:
        greeting = request.parent
        name = o.name(greeting) + "-greeting"
        text = f"{self.salutation}, {o.field(greeting, 'spec.to', 'world')}!"
        config_map = o.new_object(kinds.CONFIG_MAP, name, data={"text": text})  # in the parent's namespace
        exists = any(o.name(c) == name for c in request.children_of(kinds.CONFIG_MAP))
        self.ctx.debug("synced", greeting=o.name(greeting), exists=exists)
        return SyncResponse(status={"configMap": name, "ready": exists}, children=[config_map])
