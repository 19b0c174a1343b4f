"""Admission and conversion webhooks (contract 0.1.6): a plugin declares its hooks in its
manifest and answers them with methods of its controller class.

    class CronJobs(Controller):
        def manifest(self) -> Manifest:
            return (
                Manifest("cronjob", "0.1.0")
                .primary(CRONJOB)
                .webhook(Webhook.mutating("default-cronjob").kind(CRONJOB))
                .webhook(Webhook.validating("validate-cronjob").kind(CRONJOB).operations("create", "update"))
                .converts(CRONJOB)
            )

        def mutate(self, review: Review, ctx: Context) -> Object | None:
            obj = review.object
            obj["spec"].setdefault("concurrencyPolicy", "Allow")
            return obj

        def validate(self, review: Review, ctx: Context) -> list[str]:
            if len(review.name) > 52:
                raise Denied("metadata.name: must be no more than 52 characters", code=422)
            return []

        def convert(self, obj: Object, desired_api_version: str) -> Object: ...

The host serves HTTPS, writes the webhook configurations and computes the JSON patch of a
mutation. A hook may read the cache and log through `ctx`; a write or an Event raises
`Forbidden`. `Denied` is a hook's answer; any other exception is a fault, which the host answers
by the hook's failure policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from . import bounds
from .core import Gvk, _WitEnum
from .objects import Object

if TYPE_CHECKING:
    from .context import Context

MAX_DENIAL_MESSAGE = 4096
"""What a denial's message (and a conversion's refusal) may hold: a longer one is cut, at a
character boundary (the host would take it as a fault)."""


class Operation(_WitEnum):
    """What a change does, as the API server names it (in upper case)."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    CONNECT = "connect"


class FailurePolicy(_WitEnum):
    """What the API server does when the hook cannot answer (and the host when it faults)."""

    FAIL = "fail"
    IGNORE = "ignore"


class SideEffects(_WitEnum):
    """A plugin's hooks cannot write: `NONE`, or `NONE_ON_DRY_RUN` for one that logs differently."""

    NONE = "none"
    NONE_ON_DRY_RUN = "none-on-dry-run"


@dataclass
class MatchCondition:
    """A CEL expression the API server checks before calling the hook (`matchConditions`)."""

    name: str
    expression: str


@dataclass
class AdmissionHook:
    """One admission hook, field for field the WIT `admission-hook` record."""

    name: str
    mutating: bool
    kinds: list[Gvk] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=lambda: [Operation.CREATE, Operation.UPDATE])
    failure_policy: FailurePolicy = FailurePolicy.FAIL
    timeout_seconds: int = 10
    side_effects: SideEffects = SideEffects.NONE
    match_conditions: list[MatchCondition] = field(default_factory=list)


class Webhook:
    """Builds an `AdmissionHook` for `Manifest.webhook`; each method returns the builder."""

    def __init__(self, name: str, mutating: bool) -> None:
        self.hook = AdmissionHook(name, mutating)

    @classmethod
    def validating(cls, name: str) -> Webhook:
        """A validating hook named `name` (a DNS label, unique in the plugin) for create and
        update, failing closed, with a 10 s timeout, no side effects and no kinds yet; answered
        by `validate`."""
        return cls(name, mutating=False)

    @classmethod
    def mutating(cls, name: str) -> Webhook:
        """A mutating (defaulting) hook, otherwise as `validating`; answered by `mutate`."""
        return cls(name, mutating=True)

    def kind(self, resource: Gvk) -> Webhook:
        """Admits objects of this kind."""
        self.hook.kinds.append(resource)
        return self

    def operations(self, *operations: Operation | str) -> Webhook:
        """Replaces the operations it admits."""
        self.hook.operations = [Operation.parse(o) for o in operations]
        return self

    def failure_policy(self, policy: FailurePolicy | str) -> Webhook:
        self.hook.failure_policy = FailurePolicy.parse(policy)
        return self

    def timeout(self, timeout: float | timedelta) -> Webhook:
        """How long the API server waits: whole seconds (1 to 30), rounded up."""
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        self.hook.timeout_seconds = math.ceil(seconds)
        return self

    def side_effects(self, side_effects: SideEffects | str) -> Webhook:
        self.hook.side_effects = SideEffects.parse(side_effects)
        return self

    def match_condition(self, name: str, expression: str) -> Webhook:
        """Calls the hook only when the CEL `expression` is true."""
        self.hook.match_conditions.append(MatchCondition(name, expression))
        return self


@dataclass
class UserInfo:
    """Who asked for a change."""

    username: str = ""
    uid: str = ""
    groups: list[str] = field(default_factory=list)


@dataclass
class Review:
    """One admission request: which hook, what change, by whom, and the objects (dicts, copies:
    change `object` and return it from `mutate`)."""

    hook: str
    operation: Operation
    kind: Gvk
    name: str
    """Empty on a create whose name the API server generates."""
    namespace: str | None = None
    object: Object | None = None
    """The object as it would be stored (None on delete)."""
    old_object: Object | None = None
    """The object as it is (on update and delete)."""
    uid: str = ""
    subresource: str | None = None
    user: UserInfo = field(default_factory=UserInfo)
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    """Shown to the user beside the answer (at most 32, each at most 512 bytes): `warn` adds
    one, in any hook; `validate` may return more."""

    def warn(self, message: str) -> None:
        self.warnings.append(message)


class Denied(Exception):
    """A hook's refusal: `code` is the HTTP status the user sees (400 to 599: 403 Forbidden when
    in doubt, 422 for an invalid object), the message why (cut to `MAX_DENIAL_MESSAGE` bytes).
    Raised from `convert`, it fails the API server's request that needed the conversion (the
    code is not used)."""

    def __init__(self, message: str, code: int = 403, warnings: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = bounds.cut(message, MAX_DENIAL_MESSAGE)
        self.code = code
        self.warnings = list(warnings or [])


class WebhookHandlers:
    """The methods that answer the manifest's hooks, overridden by a controller that declares
    them (`Controller` and `CompositeController` both have them). A hook declared but not
    answered is refused with code 500."""

    def validate(self, review: Review, ctx: Context) -> list[str] | None:
        """Answers a validating hook (`review.hook` says which; `review.old_object` is the
        object on delete): returning allows the change, with the warnings returned (and
        `review.warn`'s); raising `Denied` refuses it — controller-runtime's CustomValidator."""
        raise Denied(f"the plugin declares hook {review.hook!r} but does not define validate()", code=500)

    def mutate(self, review: Review, ctx: Context) -> Object | None:
        """Answers a mutating hook: the object as it should be stored (the host sends the API
        server the patch to it), None to leave it unchanged; warnings by `review.warn`; raising
        `Denied` refuses the change — controller-runtime's CustomDefaulter."""
        raise Denied(f"the plugin declares hook {review.hook!r} but does not define mutate()", code=500)

    def convert(self, obj: Object, desired_api_version: str) -> Object:
        """Converts an object of a custom resource the manifest `converts` to
        `desired_api_version` ("group/version"): the same object (kind, name, namespace, uid;
        of its metadata only labels and annotations may change) in that version. Raise `Denied`
        when it cannot be."""
        raise Denied(f"the plugin declares a conversion but does not define convert() (to {desired_api_version})")
