"""Runs a `Controller` or a `CompositeController` against a `Host`: what the component's exports
do, minus the WIT types.

`kubewasm._guest` wires this to the WIT bindings inside a component; `kubewasm.testing` wires it
to a fake host under plain CPython. Keeping the dispatch here means the tests exercise exactly
the code the component runs.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any, Literal, TypeVar

from . import bounds
from .composite import CompositeController, Encoded, Objects, RelatedRule, SyncRequest, SyncResponse, encode
from .context import Context, Host
from .controller import Controller
from .core import DONE, Action, Gvk, ObjectKey
from .errors import Invalid, KubewasmError, Other, SettingsError
from .manifest import ClusterScope, Composition, Manifest, ManifestSpec, Rule
from .objects import Object
from .webhook import AdmissionHook, Denied, Review

# The controller methods the host calls with a primary object.
Method = Literal["reconcile", "finalize", "released"]
# The declarative controller methods the host calls with a sync request.
SyncMethod = Literal["sync", "finalize"]

# Either kind of plugin class an author's module defines.
AnyController = Controller | CompositeController
_KINDS = (Controller, CompositeController)

T = TypeVar("T")


class Refused(Exception):
    """`describe` refuses to load the plugin; the message says why."""


def find_controller(module: ModuleType) -> type[AnyController]:
    """The controller class of an author's module: `module.controller` if set, else the one
    `Controller` or `CompositeController` subclass the module defines."""
    explicit = getattr(module, "controller", None)
    if explicit is not None:
        if inspect.isclass(explicit) and issubclass(explicit, _KINDS):
            return explicit
        raise TypeError(f"{module.__name__}.controller must be a Controller or CompositeController subclass, not {explicit!r}")
    found = [
        obj for obj in vars(module).values() if inspect.isclass(obj) and issubclass(obj, _KINDS) and obj not in _KINDS and obj.__module__ == module.__name__
    ]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise TypeError(
            f"{module.__name__} must define exactly one Controller or CompositeController subclass (found: {names}); "
            "with several, say which one with `controller = MyController`"
        )
    return found[0]


def _describe_error(e: BaseException) -> str:
    if isinstance(e, (SettingsError, Refused)):
        return str(e)
    return f"{type(e).__name__}: {e}"


def _settings(controller_cls: type[AnyController], parsed: dict[str, Any]) -> dict[str, Any]:
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


def parsed_object(text: str | None, what: str) -> Object | None:
    """An admission request's object (None for none); a 400 denial when it does not parse."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise Denied(f"{what} does not parse: {e}", code=400) from None


def _parse(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise Invalid(f"{what} does not parse: {e}") from None


class Runner:
    """One controller instance (a `Controller` or a `CompositeController`) and the host it
    calls."""

    def __init__(self, controller_cls: type[AnyController], host: Host) -> None:
        self.controller_cls = controller_cls
        self.host = host
        self.controller: AnyController | None = None
        self.manifest: ManifestSpec | None = None

    @property
    def declarative(self) -> bool:
        """Whether the plugin is a declarative controller (`CompositeController`)."""
        return issubclass(self.controller_cls, CompositeController)

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
        spec = manifest.for_host()
        if self.declarative:
            # A declarative controller always answers a composition: without child rules, its
            # `owns` kinds are children with the strategy ON_DELETE.
            spec = replace(spec, composition=spec.composition or Composition())
        elif spec.composition is not None:
            raise Refused(
                f"manifest: child() and child_selector() declare the children of a declarative controller; "
                f"{self.controller_cls.__name__} is a Controller (subclass CompositeController, or declare owns())"
            )
        self.controller = controller
        self.manifest = spec
        return self.manifest

    def rules(self) -> list[Rule]:
        """What the `access` export answers, right after `describe`: the manifest's rules."""
        return self.manifest.rules if self.manifest is not None else []

    def metadata_only(self) -> list[Gvk]:
        """What the `views` export answers, right after `describe`: the manifest's metadata-only kinds."""
        return self.manifest.metadata_only if self.manifest is not None else []

    def reads_fields(self) -> dict[Gvk, list[str]]:
        """What the `projections` export answers, right after `describe`: the dotted fields the
        plugin reads of each kind it declared them for."""
        return self.manifest.reads_fields if self.manifest is not None else {}

    def scope(self) -> ClusterScope:
        """What the `clusters` export answers, right after `describe`: the clusters the plugin
        serves and reaches (the host's own cluster only, unless the manifest says more)."""
        return self.manifest.scope if self.manifest is not None else ClusterScope()

    def hooks(self) -> tuple[list[AdmissionHook], list[Gvk]]:
        """What the `webhooks` export's `declare` answers, right after `describe`: the admission
        hooks and the custom resources the plugin converts."""
        return (self.manifest.webhooks, self.manifest.conversions) if self.manifest is not None else ([], [])

    def _hooked(self) -> AnyController:
        if self.controller is None:
            raise Other("the host called the plugin before describe")
        return self.controller

    def _answer(self, handler: str, review: Review) -> Any:
        """Runs the controller's `handler` on the review; a `Denied` it raises carries the
        review's warnings too."""
        try:
            return getattr(self._hooked(), handler)(review, Context(self.host, ObjectKey(review.namespace, review.name)))
        except Denied as e:
            e.warnings[:0] = review.warnings
            raise

    def validate(self, review: Review) -> list[str]:
        """Runs `validate`: the warnings of an allowed change. Raises `Denied` for a refusal;
        any other exception is a bug and propagates (a trap in a component)."""
        warnings = self._answer("validate", review)
        return [*review.warnings, *(warnings or [])]

    def mutate(self, review: Review) -> tuple[str | None, list[str]]:
        """Runs `mutate`: the object as it should be stored (JSON text; None: unchanged) and the
        warnings. Raises like `validate`."""
        obj = self._answer("mutate", review)
        return (None if obj is None else json.dumps(obj)), review.warnings

    def convert(self, objects: Sequence[str], desired_api_version: str) -> list[str]:
        """Runs `convert` on each object (JSON text), in order. Raises `Denied` naming the first
        object that cannot be converted (its message cut to what the host takes)."""
        controller = self._hooked()
        converted = []
        for text in objects:
            obj = parsed_object(text, "an object")
            name = (obj.get("metadata") or {}).get("name", "")
            try:
                converted.append(json.dumps(controller.convert(obj, desired_api_version)))
            except Denied as e:
                raise Denied(f"{name}: {e.message}") from None
        return converted

    def composition(self) -> Composition | None:
        """What the `composite` export's `describe-composition` answers, right after `describe`:
        the composition of a declarative controller, None for a controller that reconciles
        itself."""
        return self.manifest.composition if self.manifest is not None else None

    def _described(self, kind: type[T], method: str) -> T:
        """The controller, of the kind whose `method` the host calls. The other kind's methods
        are never called by the host: a `RuntimeError`, which traps in a component."""
        if not issubclass(self.controller_cls, kind):
            what = "a declarative plugin (CompositeController)" if self.declarative else "a plugin that reconciles itself (Controller)"
            raise RuntimeError(f"the host called {method} of {what}; it never does")
        if self.controller is None:
            raise Other("the host called the plugin before describe")
        assert isinstance(self.controller, kind)
        return self.controller

    def call(self, method: Method, key: ObjectKey, obj: str, retries: int) -> Action:
        """Runs `reconcile`, `finalize` or `released` on the primary `obj` (JSON text). Raises
        `KubewasmError` (its message cut to what the host takes) for the controller's answer;
        any other exception is a bug and propagates: inside a component it traps (a fault)."""
        controller = self._described(Controller, method)
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
        keys = self._described(Controller, "map_related").map_related(resource, json.loads(obj), Context(self.host))
        return [k if isinstance(k, ObjectKey) else ObjectKey(*k) for k in keys or []]

    # --- a declarative controller ---

    def _declarative_call(self, composite: CompositeController, parent: Object, run: Any) -> Any:
        """Runs `run()` with `composite.ctx` set to a context for `parent`; a `KubewasmError` is
        the controller's answer (its message cut to what the host takes)."""
        composite._ctx = Context(self.host, ObjectKey.of(parent) if isinstance(parent, dict) else None)
        try:
            return run()
        except KubewasmError as e:
            raise _returned(e) from None
        finally:
            composite._ctx = None

    def customize(self, parent: str) -> list[RelatedRule]:
        """Runs `customize` on the parent (JSON text). Raises `KubewasmError` for the
        controller's answer; anything else it raises, or an answer that is not a list of
        `RelatedRule`, is a bug and propagates (a trap in a component)."""
        composite = self._described(CompositeController, "customize")
        parsed = _parse(parent, "the parent")
        rules = self._declarative_call(composite, parsed, lambda: composite.customize(parsed))
        if rules is None:
            return []
        rules = list(rules)
        for rule in rules:
            if not isinstance(rule, RelatedRule):
                raise TypeError(f"customize returned {rule!r} in its list, not a RelatedRule")
        return rules

    def sync(
        self,
        method: SyncMethod,
        parent: str,
        children: Sequence[tuple[Gvk, Sequence[str]]],
        related: Sequence[tuple[Gvk, Sequence[str]]],
        finalizing: bool,
    ) -> Encoded:
        """Runs `sync` or `finalize` on a request (the parent and the items of each kind as JSON
        text) and returns the answer as JSON text. Raises `KubewasmError` for the controller's
        answer; anything else it raises, or an answer that is not a `SyncResponse` (None too:
        it would delete every child), is a bug and propagates (a trap in a component)."""
        composite = self._described(CompositeController, method)
        parsed = _parse(parent, "the parent")

        def objects(entries: Sequence[tuple[Gvk, Sequence[str]]], what: str) -> list[Objects]:
            return [Objects(resource, [_parse(item, f"a {what} {resource}") for item in items]) for resource, items in entries]

        request = SyncRequest(parsed, objects(children, "child"), objects(related, "related"), finalizing)
        handler = composite.finalize if method == "finalize" else composite.sync
        response = self._declarative_call(composite, parsed, lambda: handler(request))
        if not isinstance(response, SyncResponse):
            raise TypeError(f"{method} returned {response!r}, not a SyncResponse")
        return encode(response)
