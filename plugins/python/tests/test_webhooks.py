"""Webhooks (contract 0.1.6) through the harness, as the host calls them: the kubebuilder
tutorial's CronJob defaulter, validator and v1 <-> v2 conversion, cut down."""

import pytest

from kubewasm import Controller, Denied, Forbidden, Gvk, Manifest, Webhook
from kubewasm import objects as o
from kubewasm.testing import Harness
from kubewasm.webhook import MAX_DENIAL_MESSAGE

CRONJOB_V1 = Gvk("batch.tutorial.kubebuilder.io", "v1", "CronJob")
CRONJOB_V2 = Gvk("batch.tutorial.kubebuilder.io", "v2", "CronJob")


class CronJobHooks(Controller):
    def manifest(self):
        return (
            Manifest("cronjob", "0.1.0")
            .primary(CRONJOB_V1)
            .webhook(Webhook.mutating("default-cronjob").kind(CRONJOB_V1))
            .webhook(Webhook.validating("validate-cronjob").kind(CRONJOB_V1).operations("create", "update", "delete").timeout(4.5))
            .converts(CRONJOB_V1)
        )

    def reconcile(self, obj, ctx):
        return None

    def mutate(self, review, ctx):
        obj = review.object
        if "concurrencyPolicy" in obj["spec"]:
            return None
        obj["spec"]["concurrencyPolicy"] = "Allow"
        review.warn("concurrencyPolicy defaulted")
        return obj

    def validate(self, review, ctx):
        spec = (review.object or review.old_object)["spec"]
        if "reason" in spec:
            raise Denied(spec["reason"], code=422, warnings=["refused"])
        if len(review.name) > 52:
            raise Denied("metadata.name: must be no more than 52 characters")
        if review.operation == "update":
            with pytest.raises(Forbidden):
                ctx.apply(o.new_object(CRONJOB_V1, "side-effect", "default"))
        return ["spec.startingDeadlineSeconds is unset"]

    def convert(self, obj, desired_api_version):
        spec = obj["spec"]
        if desired_api_version == CRONJOB_V2.api_version:
            spec["schedule"] = {"cron": spec["schedule"]}
        elif desired_api_version == CRONJOB_V1.api_version:
            spec["schedule"] = spec["schedule"]["cron"]
        else:
            raise Denied(f"unknown version {desired_api_version}")
        obj["apiVersion"] = desired_api_version
        return obj


def cronjob(name, **spec):
    obj = o.new_object(CRONJOB_V1, name, "default")
    obj["spec"] = spec
    return obj


def test_the_hooks_are_declared():
    h = Harness(CronJobHooks)
    admission, conversion = h.runner.hooks()
    assert [(hook.name, hook.mutating) for hook in admission] == [("default-cronjob", True), ("validate-cronjob", False)]
    assert admission[1].timeout_seconds == 5 and admission[1].operations == ["create", "update", "delete"]
    assert conversion == [CRONJOB_V1]


def test_a_validator_allows_with_warnings_and_denies():
    h = Harness(CronJobHooks)
    allowed = h.admit("validate-cronjob", "create", cronjob("ok"))
    assert allowed.allowed and allowed.warnings == ["spec.startingDeadlineSeconds is unset"]
    denied = h.admit("validate-cronjob", "create", cronjob("n" * 53))
    assert (denied.allowed, denied.code, denied.message) == (False, 403, "metadata.name: must be no more than 52 characters")
    invalid = h.admit("validate-cronjob", "create", cronjob("bad", reason="bad schedule"))
    assert (invalid.code, invalid.message, invalid.warnings) == (422, "bad schedule", ["refused"])
    updated = h.admit("validate-cronjob", "update", cronjob("ok"), cronjob("ok"))
    assert updated.allowed and h.host.get(CRONJOB_V1, "default", "side-effect") is None, "a write is refused"
    assert h.admit("validate-cronjob", "delete", old_object=cronjob("ok")).allowed
    with pytest.raises(ValueError, match="declares no hook"):
        h.admit("nope", "create", cronjob("ok"))


def test_a_long_denial_is_cut_at_a_character_boundary():
    reason = "x" * (MAX_DENIAL_MESSAGE - 1) + "é" + "y" * 100
    denied = Harness(CronJobHooks).admit("validate-cronjob", "create", cronjob("long", reason=reason))
    assert denied.message == "x" * (MAX_DENIAL_MESSAGE - 1)


def test_a_defaulter_changes_the_object():
    h = Harness(CronJobHooks)
    defaulted = h.admit("default-cronjob", "create", cronjob("a", schedule="* * * * *"))
    assert defaulted.allowed and defaulted.object["spec"]["concurrencyPolicy"] == "Allow"
    assert defaulted.object["metadata"]["name"] == "a" and defaulted.warnings == ["concurrencyPolicy defaulted"]
    unchanged = h.admit("default-cronjob", "create", cronjob("a", concurrencyPolicy="Forbid"))
    assert unchanged.allowed and unchanged.object is None


def test_a_converter_changes_the_version_and_keeps_the_name():
    h = Harness(CronJobHooks)
    v1 = cronjob("a", schedule="*/5 * * * *")
    [v2] = h.convert([v1], CRONJOB_V2.api_version)
    assert v2["apiVersion"] == CRONJOB_V2.api_version and v2["metadata"]["name"] == "a"
    assert v2["spec"]["schedule"] == {"cron": "*/5 * * * *"}
    assert h.convert([v2], CRONJOB_V1.api_version) == [v1]
    with pytest.raises(Denied, match="^a: unknown version batch.tutorial.kubebuilder.io/v3$"):
        h.convert([v1], "batch.tutorial.kubebuilder.io/v3")


def test_a_hook_without_its_method_is_refused_with_500():
    class Bare(Controller):
        def manifest(self):
            return Manifest("bare", "0.1.0").primary(CRONJOB_V1).webhook(Webhook.validating("v").kind(CRONJOB_V1))

        def reconcile(self, obj, ctx):
            return None

    denied = Harness(Bare).admit("v", "create", cronjob("a"))
    assert (denied.allowed, denied.code) == (False, 500) and "does not define validate()" in denied.message
