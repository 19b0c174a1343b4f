"""The class a controller author subclasses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .context import Context
from .core import DONE, Action, Gvk, ObjectKey
from .manifest import Manifest
from .objects import Object
from .webhook import WebhookHandlers


class Controller(WebhookHandlers):
    """A controller plugin. Subclass it, then build the module with `kubewasm-py build`:

        class Echo(Controller):
            def manifest(self) -> Manifest:
                return Manifest("echo", "0.1.0").primary(kinds.CONFIG_MAP)

            def reconcile(self, obj: dict, ctx: Context) -> Action:
                ctx.info("saw", name=objects.name(obj))
                return Action.done()

    The host makes a fresh instance of the plugin now and then (on load, for concurrency, after
    a fault); each builds its controller once, `Controller(settings)`, from the settings in
    `NAME.toml` beside `NAME.wasm`, then handles many calls, one at a time. Raise from
    `__init__` (e.g. `SettingsError`) to refuse loading with a message.

    Settings are declared in `settings_defaults`: `settings` is a copy of it with the keys of
    `NAME.toml` over it, and a key it does not declare refuses the plugin
    (`settings: unknown field "KEY"`), as in every SDK.

    An exception other than a `KubewasmError` escaping a method is a bug, not an answer: the
    call traps (a fault), the instance is replaced, the key is retried with backoff, and an
    object the plugin keeps faulting on is quarantined (set aside until it changes). Raise a
    `KubewasmError` (or let a host call's through) for what the controller means to report.

    The webhooks its manifest declares are answered by `validate`, `mutate` and `convert`
    (`kubewasm.webhook`).
    """

    settings_defaults: ClassVar[Mapping[str, Any]] = {}
    """Every setting the controller takes, with its default (top-level keys of `NAME.toml`)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    def manifest(self) -> Manifest:
        """What the plugin reconciles and what it needs."""
        raise NotImplementedError(f"{type(self).__name__} must define manifest()")

    def reconcile(self, obj: Object, ctx: Context) -> Action:
        """Moves the world towards what `obj` (the primary object, a copy) asks for.
        Level-triggered: read the current state through `ctx`, don't assume what changed.
        Returning None means `Action.done()`; raising a `KubewasmError` fails the call (retried
        with backoff, a Warning Event unless `Conflict`)."""
        raise NotImplementedError(f"{type(self).__name__} must define reconcile()")

    def finalize(self, obj: Object, ctx: Context) -> Action:
        """Cleans up before an object carrying the manifest's finalizer goes away."""
        return DONE

    def map_related(self, resource: Gvk, obj: Object, ctx: Context) -> list[ObjectKey]:
        """Maps an event on a watched object (mapping `map-related`) to primary keys. It has no
        error value: anything it raises traps, and the host retries the watched object like a
        faulting reconcile. An empty list means no keys."""
        return []

    def released(self, obj: Object, ctx: Context) -> Action:
        """Lets go of a primary that stopped matching the manifest's primary selector (its labels
        changed): this controller no longer manages it, but what it made for it is still there.
        By default, deletes the objects of the `owns` kinds it controls (those the manifest may
        delete), as the garbage collector would had it been deleted; override to hand them over
        instead."""
        ctx.delete_controlled(obj, self.manifest().owned())
        return DONE
