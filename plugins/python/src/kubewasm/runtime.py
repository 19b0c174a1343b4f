"""Runs a `Controller` against a `Host`: what the component's exports do, minus the WIT types.

`kubewasm._guest` wires this to the WIT bindings inside a component; `kubewasm.testing` wires it
to a fake host under plain CPython. Keeping the dispatch here means the tests exercise exactly
the code the component runs.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal

from . import bounds
from .context import Context, Host
from .controller import Controller
from .core import DONE, Action, Gvk, ObjectKey
from .errors import Invalid, KubewasmError, Other, SettingsError
from .manifest import Manifest, ManifestSpec, Rule

# The controller methods the host calls with a primary object.
Method = Literal["reconcile", "finalize", "released"]


class Refused(Exception):
    """`describe` refuses to load the plugin; the message says why."""


def find_controller(module: ModuleType) -> type[Controller]:
    """The controller class of an author's module: `module.controller` if set, else the one
    `Controller` subclass the module defines."""
    explicit = getattr(module, "controller", None)
    if explicit is not None:
        if inspect.isclass(explicit) and issubclass(explicit, Controller):
            return explicit
        raise TypeError(f"{module.__name__}.controller must be a Controller subclass, not {explicit!r}")
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Controller) and obj is not Controller and obj.__module__ == module.__name__
    ]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise TypeError(
            f"{module.__name__} must define exactly one Controller subclass (found: {names}); with several, say which one with `controller = MyController`"
        )
    return found[0]


def _describe_error(e: BaseException) -> str:
    if isinstance(e, (SettingsError, Refused)):
        return str(e)
    return f"{type(e).__name__}: {e}"


def _settings(controller_cls: type[Controller], parsed: dict[str, Any]) -> dict[str, Any]:
    """The settings the controller gets: its `settings_defaults` with the given keys over them.
    A key it does not declare there is refused (a typo, or a setting of another version)."""
    defaults = controller_cls.settings_defaults
    if not isinstance(defaults, Mapping):
        raise Refused(f"{controller_cls.__name__}.settings_defaults must be a dict, not {type(defaults).__name__}")
    for key in parsed:
        if key not in defaults:
            raise Refused(f"settings: unknown field {json.dumps(key)}")
    # A copy: an instance that changes its settings does not change the next one's defaults.
    return {**copy.deepcopy(dict(defaults)), **parsed}


def _returned(e: KubewasmError) -> KubewasmError:
    """The error as the host gets it: its message cut to what the host takes."""
    message = bounds.cut(e.message)
    return e if len(message) == len(e.message) else KubewasmError.from_code(e.code, message)


class Runner:
    """One controller instance and the host it calls."""

    def __init__(self, controller_cls: type[Controller], host: Host) -> None:
        self.controller_cls = controller_cls
        self.host = host
        self.controller: Controller | None = None
        self.manifest: ManifestSpec | None = None

    def describe(self, settings: str) -> ManifestSpec:
        """Parses the settings, builds the controller and returns its manifest as the host gets
        it (`Manifest.for_host`). Raises `Refused` with a message."""
        try:
            parsed: Any = json.loads(settings) if settings.strip() else {}
        except ValueError as e:
            raise Refused(f"settings are not JSON: {e}") from None
        if parsed is None:
            parsed = {}
        if not isinstance(parsed, dict):
            raise Refused(f"settings must be a table, not {type(parsed).__name__}")
        given = _settings(self.controller_cls, parsed)
        try:
            controller = self.controller_cls(given)
            manifest = controller.manifest()
        except Exception as e:
            raise Refused(bounds.cut(_describe_error(e))) from None
        if not isinstance(manifest, Manifest):
            raise Refused(f"{self.controller_cls.__name__}.manifest() must return a Manifest, not {manifest!r}")
        if manifest.spec.primary is None:
            raise Refused("manifest: primary is not set (call .primary(...))")
        self.controller = controller
        self.manifest = manifest.for_host()
        return self.manifest

    def rules(self) -> list[Rule]:
        """What the `access` export answers, right after `describe`: the manifest's rules."""
        return self.manifest.rules if self.manifest is not None else []

    def metadata_only(self) -> list[Gvk]:
        """What the `views` export answers, right after `describe`: the manifest's metadata-only kinds."""
        return self.manifest.metadata_only if self.manifest is not None else []

    def _controller(self) -> Controller:
        if self.controller is None:
            raise Other("the host called the plugin before describe")
        return self.controller

    def call(self, method: Method, key: ObjectKey, obj: str, retries: int) -> Action:
        """Runs `reconcile`, `finalize` or `released` on the primary `obj` (JSON text). Raises
        `KubewasmError` (its message cut to what the host takes) for the controller's answer;
        any other exception is a bug and propagates: inside a component it traps (a fault)."""
        controller = self._controller()
        try:
            parsed = json.loads(obj)
        except ValueError as e:
            raise Invalid(f"the primary object does not parse: {e}") from None
        ctx = Context(self.host, key, retries)
        try:
            action = getattr(controller, method)(parsed, ctx)
        except KubewasmError as e:
            raise _returned(e) from None
        if action is None:
            return DONE
        if not isinstance(action, Action):
            raise TypeError(f"{method} returned {action!r}, not an Action")
        return action

    def map_related(self, resource: Gvk, obj: str) -> list[ObjectKey]:
        """Runs `map_related`. The WIT function has no error value: anything it raises (a
        `KubewasmError` too) propagates, and inside a component traps (a fault the host retries
        and, repeated, quarantines)."""
        keys = self._controller().map_related(resource, json.loads(obj), Context(self.host))
        return [k if isinstance(k, ObjectKey) else ObjectKey(*k) for k in keys or []]
