"""The kubebuilder book's CronJob controller ("Tutorial: Building CronJob") as a kubewasm plugin,
in Python: the same behaviour and table cases as the Go, Rust and JavaScript ports beside it,
with `kubewasm.k8s`'s typed Jobs and croniter for the schedule (bundled into the component from
requirements.txt: `make` installs it into `deps/` and builds with `-p deps`). What it does, step by
step, is in ../README.md; the step numbers below are the tutorial's.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

from croniter import croniter
from croniter.croniter import CroniterError

from kubewasm import Action, Context, Controller, EventType, Gvk, KubewasmError, Manifest, NotFound, Object, kinds
from kubewasm import objects as o

if TYPE_CHECKING:
    from kubewasm import k8s

CRON_JOB = Gvk("batch.tutorial.kubebuilder.io", "v1", "CronJob")

# Records on each Job the run it was started for: what the controller reads back to know the
# last run, since it never trusts its own status.
SCHEDULED_TIME_ANNOTATION = "batch.tutorial.kubebuilder.io/scheduled-at"

# How many missed runs are counted before giving up (the tutorial's 100).
MAX_MISSED_STARTS = 100


class CronJobSpec(TypedDict, total=False):
    """The tutorial's."""

    schedule: str
    startingDeadlineSeconds: int
    concurrencyPolicy: str
    suspend: bool
    jobTemplate: k8s.JobTemplateSpec
    successfulJobsHistoryLimit: int
    failedJobsHistoryLimit: int


def now() -> dt.datetime:
    """The host's clock (the WASI wall clock, which `kubewasm test` stops at a case's `now:`)."""
    return dt.datetime.now(dt.UTC)


class CronJobController(Controller):
    def manifest(self) -> Manifest:
        return (
            Manifest("cronjob", "0.1.0").primary(CRON_JOB).owns(kinds.JOB).permission(kinds.JOB, ["create", "delete"]).status_permission(CRON_JOB, ["update"])
        )

    def reconcile(self, cronjob: Object, ctx: Context) -> Action:
        at = now()
        spec = cast(CronJobSpec, cronjob.get("spec") or {})

        # 2: the child Jobs, active, successful and failed; the most recent scheduled run.
        active: list[k8s.Job] = []
        successful: list[k8s.Job] = []
        failed: list[k8s.Job] = []
        most_recent: dt.datetime | None = None
        for job in cast("list[k8s.Job]", ctx.list_controlled(kinds.JOB, o.uid(cronjob) or "", o.namespace(cronjob))):
            raw = o.annotation(job, SCHEDULED_TIME_ANNOTATION)
            if raw:
                try:
                    scheduled = parse_time(raw)
                except ValueError as e:
                    ctx.error("unable to parse schedule time for child job", job=o.name(job), error=str(e))
                else:
                    most_recent = scheduled if most_recent is None else max(most_recent, scheduled)
            finished = finished_type(job)
            if finished is None:
                active.append(job)
            elif finished == "Failed":
                failed.append(job)
            else:
                successful.append(job)

        # Where the schedule stands decides the condition the status reports.
        suspended = spec.get("suspend") is True
        runs: Runs | None = None
        schedule_error: ScheduleError | None = None
        status, reason, message = "False", "Suspended", "suspended: no Job is started"
        if not suspended:
            try:
                runs = next_schedule(spec, cronjob, most_recent, at)
                status, reason, message = "True", "Scheduled", f"next run at {rfc3339(runs.next)}"
            except ScheduleError as e:
                schedule_error = e
                reason, message = e.reason, e.message

        # 2 (cont.): the status, written when it changed.
        before = copy.deepcopy(cronjob.get("status"))
        if not isinstance(cronjob.get("status"), dict):
            cronjob["status"] = {}
        fields: dict[str, Any] = cronjob["status"]
        if most_recent is not None:
            fields["lastScheduleTime"] = rfc3339(most_recent)
        else:
            fields.pop("lastScheduleTime", None)
        if active:
            fields["active"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "namespace": o.namespace(job), "name": o.name(job), "uid": o.uid(job)} for job in active
            ]
        else:
            fields.pop("active", None)
        o.set_condition(cronjob, "Available", status, reason, message, observed_generation=o.generation(cronjob), now=rfc3339(at))
        if cronjob["status"] != before:
            ctx.update_status(cronjob)

        # 3: the oldest finished Jobs beyond the history limits.
        prune(ctx, failed, spec.get("failedJobsHistoryLimit"), "failed")
        prune(ctx, successful, spec.get("successfulJobsHistoryLimit"), "successful")

        # 4: nothing more while suspended.
        if suspended:
            ctx.debug("cronjob suspended, skipping")
            return Action.done()
        if schedule_error is not None:
            # Not requeued: only a change of the CronJob can fix it.
            ctx.event(cronjob, EventType.WARNING, schedule_error.reason, "Reconcile", schedule_error.message)
            return Action.done()
        assert runs is not None

        # 5 and 6: the missed run, if it is still due and the concurrency policy lets it start.
        scheduled = Action.requeue_after(max(runs.next - at, dt.timedelta(0)))
        if runs.missed is None:
            ctx.debug("no upcoming scheduled times, sleeping until next", next=rfc3339(runs.next))
            return scheduled
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and runs.missed + dt.timedelta(seconds=deadline) < at:
            ctx.debug("missed starting deadline for last run, sleeping till next", run=rfc3339(runs.missed))
            return scheduled
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            ctx.debug("concurrency policy blocks concurrent runs, skipping", active=len(active))
            return scheduled
        if policy == "Replace":
            for job in active:
                try:
                    ctx.delete(kinds.JOB, o.namespace(job), o.name(job))
                except NotFound:
                    pass
        ctx.create(job_for(cronjob, spec, runs.missed))
        ctx.debug("created Job for CronJob run", run=rfc3339(runs.missed))
        # 7: back at the next run.
        return scheduled


def rfc3339(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def parse_time(raw: str) -> dt.datetime:
    """An RFC 3339 time (what Kubernetes writes: `2026-12-03T10:00:00Z`), in UTC; `ValueError`
    for anything else (`fromisoformat` alone would take a date without a time or a zone)."""
    text = raw.upper()
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"not an RFC 3339 time: {raw!r}")
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC)


def finished_type(job: k8s.Job) -> str | None:
    """`Complete` or `Failed` once a condition of that type is true; None while the Job runs."""
    for condition in job.get("status", {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


@dataclass(frozen=True)
class Runs:
    """The most recent run missed since the last one (None when none) and the next run after now."""

    missed: dt.datetime | None
    next: dt.datetime


class ScheduleError(Exception):
    """A schedule the controller cannot follow: the reason and message of the condition and Event
    that say so."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def parse_schedule(schedule: str) -> croniter:
    """The schedule as `cron.ParseStandard` takes it: five fields (minute, hour, day of month,
    month, day of week; names, ranges, steps and lists) or a descriptor (`@hourly`, `@daily`,
    `@weekly`, `@monthly`, `@yearly`, ...), in UTC. croniter would also take a sixth field
    (seconds) and a seventh (year): refused, as the other ports refuse them. A day of month and a
    day of week both restricted match either (OR), unless one starts with `*` (`*/2`): then both
    must match, as robfig/cron has it (croniter's `implement_cron_bug`)."""
    fields = schedule.split()
    if not (len(fields) == 5 or (len(fields) == 1 and fields[0].startswith("@"))):
        raise ScheduleError("InvalidSchedule", f"unparseable schedule {quoted(schedule)}")
    try:
        return croniter(schedule, dt.datetime(1970, 1, 1, tzinfo=dt.UTC), ret_type=dt.datetime, implement_cron_bug=True)
    except (CroniterError, ValueError, KeyError, IndexError) as e:
        raise ScheduleError("InvalidSchedule", f"unparseable schedule {quoted(schedule)}") from e


def quoted(text: str) -> str:
    """`text` quoted as Go's %q and JSON quote it (for what a schedule holds)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def next_schedule(spec: CronJobSpec, cronjob: Object, last_run: dt.datetime | None, at: dt.datetime) -> Runs:
    """The most recent run missed since the last one and the next run after `at`; `ScheduleError`
    for a schedule that does not parse or more than 100 missed runs."""
    schedule = spec.get("schedule") or ""
    cron = parse_schedule(schedule)

    def next_after(t: dt.datetime) -> dt.datetime:
        try:
            cron.set_current(t, force=True)
            return cron.get_next(dt.datetime)
        except (CroniterError, ValueError) as e:  # no such date within croniter's 50 years
            raise ScheduleError("InvalidSchedule", f"unparseable schedule {quoted(schedule)}") from e

    # Since the last run, or since the CronJob was made; not before the starting deadline.
    earliest = last_run
    if earliest is None:
        created = o.field(cronjob, "metadata.creationTimestamp")
        try:
            earliest = parse_time(created) if created else at
        except ValueError:
            earliest = at
    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None:
        earliest = max(earliest, at - dt.timedelta(seconds=deadline))
    if earliest > at:
        return Runs(None, next_after(at))
    missed = None
    t = next_after(earliest)
    starts = 0
    while t <= at:
        missed = t
        starts += 1
        if starts > MAX_MISSED_STARTS:
            raise ScheduleError(
                "TooManyMissedStartTimes",
                "too many missed start times (> 100): set or decrease .spec.startingDeadlineSeconds or check clock skew",
            )
        t = next_after(t)
    return Runs(missed, next_after(at))


def prune(ctx: Context, jobs: list[k8s.Job], limit: int | None, what: str) -> None:
    """Deletes the oldest of `jobs` (by start time, unstarted first) beyond `limit`; None keeps all."""
    if limit is None:
        return

    def started(job: k8s.Job) -> float:
        raw = job.get("status", {}).get("startTime")
        try:
            return parse_time(raw).timestamp() if raw else float("-inf")
        except ValueError:
            return float("-inf")

    jobs = sorted(jobs, key=started)
    for job in jobs[: max(0, len(jobs) - max(0, limit))]:
        try:
            ctx.delete(kinds.JOB, o.namespace(job), o.name(job))
        except NotFound:
            pass
        except KubewasmError as e:  # logged, not fatal: the next reconcile tries again
            ctx.error(f"unable to delete old {what} job", job=o.name(job), error=str(e))
            continue
        ctx.debug(f"deleted old {what} job", job=o.name(job))


def job_for(cronjob: Object, spec: CronJobSpec, scheduled: dt.datetime) -> k8s.Job:
    """The Job of the run at `scheduled`: the template's labels, annotations and spec, the run's
    time in the annotation, controlled by the CronJob."""
    template = spec.get("jobTemplate") or {}
    meta = template.get("metadata") or {}
    job: k8s.Job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{o.name(cronjob)}-{int(scheduled.timestamp())}",
            "namespace": o.namespace(cronjob) or "",
            "labels": dict(meta.get("labels") or {}),
            "annotations": {**(meta.get("annotations") or {}), SCHEDULED_TIME_ANNOTATION: rfc3339(scheduled)},
            "ownerReferences": [cast("k8s.OwnerReference", o.controller_owner_ref(cronjob))],
        },
    }
    if "spec" in template:
        job["spec"] = copy.deepcopy(template["spec"])
    return job
