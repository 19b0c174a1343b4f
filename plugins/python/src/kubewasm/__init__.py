"""kubewasm SDK for Python: write a Kubernetes controller as a class, build it into a
WebAssembly component with `kubewasm-py build app.py -o app.wasm`, drop it into a kubewasm host.

    from kubewasm import Action, Context, Controller, Manifest, kinds, objects

    class Echo(Controller):
        def manifest(self) -> Manifest:
            return Manifest("echo", "0.1.0").primary(kinds.CONFIG_MAP)

        def reconcile(self, obj: dict, ctx: Context) -> Action:
            ctx.info("saw a ConfigMap", name=objects.name(obj))
            return Action.done()

A declarative controller subclasses `CompositeController` instead: `sync(request)` answers
which children a parent should have and its status (`SyncResponse`), and the host makes every
write (contract 0.1.3; see `kubewasm.composite`).

A plugin may serve or reach member clusters besides the host's own (contract 0.1.4):
`Manifest.serve_members(Members.ALL)`, `.reach_members(Members.matching("env=prod"))`, then
`ctx.cluster()`, `ctx.clusters()` and `ctx.in_cluster(name)` to read and write in one.

A controller serves admission and conversion webhooks (contract 0.1.6) that its manifest
declares (`Manifest.webhook(Webhook.validating(...))`, `.converts(gvk)`) with its `validate`,
`mutate` and `convert` methods (see `kubewasm.webhook`).

Objects are dicts (parsed JSON); `kubewasm.objects` has the metadata, owner reference,
condition and status helpers. Host calls are methods of `Context`; they raise `KubewasmError`
subclasses (`NotFound`, `Conflict`, ...). `kubewasm.testing` runs a controller under plain
CPython against a fake host.

Nothing in this package imports the WIT bindings except `kubewasm._guest`, which only the
generated component entry module loads.
"""

from . import kinds, objects
from .composite import CompositeController, RelatedRule, SyncRequest, SyncResponse
from .context import Cluster, Context, Host
from .controller import Controller
from .core import DONE, Action, ChildSelector, ErrorCode, EventType, Gvk, LogLevel, ObjectKey, PatchType, UpdateStrategy, Verb
from .errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    KubewasmError,
    NotFound,
    Other,
    SettingsError,
    Unavailable,
)
from .manifest import ChildRule, ClusterScope, Composition, Limits, Manifest, ManifestSpec, Mapping, Members, Permission, Rule, Watch
from .objects import Object
from .webhook import AdmissionHook, Denied, FailurePolicy, MatchCondition, Operation, Review, SideEffects, UserInfo, Webhook

__version__ = "0.1.0"

__all__ = [
    "DONE",
    "Action",
    "AdmissionHook",
    "AlreadyExists",
    "ChildRule",
    "ChildSelector",
    "Cluster",
    "ClusterScope",
    "CompositeController",
    "Composition",
    "Conflict",
    "Context",
    "Controller",
    "Denied",
    "ErrorCode",
    "EventType",
    "FailurePolicy",
    "Forbidden",
    "Gvk",
    "Host",
    "Invalid",
    "KubewasmError",
    "Limits",
    "LogLevel",
    "Manifest",
    "ManifestSpec",
    "Mapping",
    "MatchCondition",
    "Members",
    "NotFound",
    "Object",
    "ObjectKey",
    "Operation",
    "Other",
    "PatchType",
    "Permission",
    "RelatedRule",
    "Review",
    "Rule",
    "SettingsError",
    "SideEffects",
    "SyncRequest",
    "SyncResponse",
    "Unavailable",
    "UpdateStrategy",
    "UserInfo",
    "Verb",
    "Watch",
    "Webhook",
    "kinds",
    "objects",
]
