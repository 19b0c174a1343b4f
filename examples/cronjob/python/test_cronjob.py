"""Unit tests of the CronJob controller under plain CPython: `pytest` in this directory (with the
SDK installed: `pip install ../../../plugins/python`; conftest.py puts croniter within reach). The
shared table tests of the built component are in ../cases (`make cases`)."""

import datetime as dt

import cronjob
import pytest
from cronjob import CRON_JOB, SCHEDULED_TIME_ANNOTATION, CronJobController, ScheduleError, next_schedule

from kubewasm import Forbidden, LogLevel, ObjectKey, kinds
from kubewasm.testing import Harness

NOW = dt.datetime(2026, 12, 3, 10, 0, 30, tzinfo=dt.UTC)
KEY = ObjectKey("default", "hello")


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def cron_job(created="2026-12-03T09:58:10Z", **spec):
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "hello", "namespace": "default", "uid": "cj-uid", "generation": 1, "creationTimestamp": created},
        "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox"}]}}}}} | spec,
    }


def job(run: str, started: str | None = None, finished: str | None = None):
    """A Job of the CronJob for the run at `run` (HH:MM on the day of NOW), running or finished
    ("Complete" or "Failed")."""
    when = at(f"2026-12-03T{run}:00Z")
    status = {} if started is None else {"startTime": f"2026-12-03T{started}Z"}
    if finished is not None:
        status["conditions"] = [{"type": finished, "status": "True"}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"hello-{int(when.timestamp())}",
            "namespace": "default",
            "uid": f"job-{run}",
            "annotations": {SCHEDULED_TIME_ANNOTATION: cronjob.rfc3339(when)},
            "ownerReferences": [{"apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob", "name": "hello", "uid": "cj-uid", "controller": True}],
        },
        "status": status,
    }


@pytest.fixture(autouse=True)
def stopped_clock(monkeypatch):
    """The plugin's clock stands still at NOW, as a table case's `now:` stops it."""
    monkeypatch.setattr(cronjob, "now", lambda: NOW)


def test_manifest():
    m = Harness(CronJobController).manifest
    assert (m.name, m.version, m.primary, m.owns) == ("cronjob", "0.1.0", CRON_JOB, [kinds.JOB])
    assert [(p.resource, p.subresource, [v.value for v in p.verbs]) for p in m.permissions] == [
        (kinds.JOB, None, ["create", "delete"]),
        (CRON_JOB, "status", ["update"]),
    ]


@pytest.mark.parametrize(
    ("spec", "last", "missed", "next_run"),
    [
        ({"schedule": "*/1 * * * *"}, None, "2026-12-03T10:00:00Z", "2026-12-03T10:01:00Z"),
        ({"schedule": "*/1 * * * *"}, "2026-12-03T10:00:00Z", None, "2026-12-03T10:01:00Z"),
        ({"schedule": "*/1 * * * *", "startingDeadlineSeconds": 20}, None, None, "2026-12-03T10:01:00Z"),
        ({"schedule": "@hourly"}, None, "2026-12-03T10:00:00Z", "2026-12-03T11:00:00Z"),
        ({"schedule": "30 9 * dec thu"}, None, None, "2026-12-10T09:30:00Z"),
        # Day of month or day of week when both are restricted (Dec 7 is a Monday) ...
        ({"schedule": "0 0 1 * mon"}, None, None, "2026-12-07T00:00:00Z"),
        ({"schedule": "0 0 5 * mon"}, None, None, "2026-12-05T00:00:00Z"),
        # ... both when one starts with `*`, as robfig/cron has it.
        ({"schedule": "0 0 */2 * mon"}, None, None, "2026-12-07T00:00:00Z"),
    ],
)
def test_the_missed_run_counts_from_the_last_run_or_the_creation_no_further_back_than_the_deadline(spec, last, missed, next_run):
    runs = next_schedule(spec, cron_job(), at(last) if last else None, NOW)
    assert (runs.missed, runs.next) == (at(missed) if missed else None, at(next_run))


@pytest.mark.parametrize(
    ("schedule", "reason"),
    [
        ("every minute", "InvalidSchedule"),
        ("61 * * * *", "InvalidSchedule"),
        ("* * * * * *", "InvalidSchedule"),  # a sixth field (croniter's seconds) is not standard
        ("@every 1h", "InvalidSchedule"),
        ("0 0 30 2 *", "InvalidSchedule"),  # February 30th never comes
        ("*/1 * * * *", "TooManyMissedStartTimes"),
    ],
)
def test_a_schedule_it_cannot_follow_is_a_schedule_error_with_the_reason_the_status_gives(schedule, reason):
    with pytest.raises(ScheduleError) as e:
        next_schedule({"schedule": schedule}, cron_job("2026-12-01T00:00:00Z"), None, NOW)
    assert e.value.reason == reason


def test_starts_the_missed_run_and_comes_back_at_the_next():
    cj = cron_job(jobTemplate={"metadata": {"labels": {"app": "hello"}, "annotations": {"team": "batch"}}, "spec": {"parallelism": 1}})
    h = Harness(CronJobController, objects=[cj])
    assert h.reconcile(KEY).requeue_after_ms == 30_000
    [status] = [c.object["status"] for c in h.host.writes("update_status")]
    assert status == {
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "Scheduled",
                "message": "next run at 2026-12-03T10:01:00Z",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-12-03T10:00:30Z",
            }
        ]
    }
    [created] = [c.object for c in h.host.writes("create")]
    assert created == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "hello-1796292000",
            "namespace": "default",
            "labels": {"app": "hello"},
            "annotations": {"team": "batch", SCHEDULED_TIME_ANNOTATION: "2026-12-03T10:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "batch.tutorial.kubebuilder.io/v1",
                    "kind": "CronJob",
                    "name": "hello",
                    "uid": "cj-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"parallelism": 1},
    }


def test_the_steady_state_writes_nothing():
    cj = cron_job()
    h = Harness(CronJobController, objects=[cj, job("10:00", started="10:00:01")])
    h.reconcile(KEY)
    assert [c.op for c in h.host.calls] == ["update_status"]
    h.host.calls.clear()
    assert h.reconcile(KEY).requeue_after_ms == 30_000
    assert h.host.calls == []


def test_prunes_the_oldest_finished_jobs_and_a_failed_delete_is_only_logged():
    cj = cron_job(successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0, concurrencyPolicy="Forbid")
    jobs = [
        job("09:56", started="09:56:01", finished="Complete"),
        job("09:57", started="09:57:01", finished="Failed"),
        job("09:58", started="09:58:01", finished="Complete"),
        job("09:59", finished="Complete"),  # never started: the oldest
        job("10:00", started="10:00:01"),
    ]
    h = Harness(CronJobController, objects=[cj, *jobs])
    h.host.fail("delete", Forbidden("jobs is forbidden"))
    assert h.reconcile(KEY).requeue_after_ms == 30_000
    assert [(c.op, c.name) for c in h.host.calls if c.op != "update_status"] == [
        ("delete", "hello-1796291820"),  # the failed one, refused
        ("delete", "hello-1796291940"),
        ("delete", "hello-1796291760"),
    ]
    assert (LogLevel.ERROR, "unable to delete old failed job", {"job": "hello-1796291820", "error": "forbidden: jobs is forbidden"}) in h.host.logs
    [status] = [c.object["status"] for c in h.host.writes("update_status")]
    assert status["lastScheduleTime"] == "2026-12-03T10:00:00Z"
    assert status["active"] == [{"apiVersion": "batch/v1", "kind": "Job", "namespace": "default", "name": "hello-1796292000", "uid": "job-10:00"}]


def test_an_invalid_schedule_says_so_and_waits_for_a_change():
    cj = cron_job(schedule="every minute")
    h = Harness(CronJobController, objects=[cj])
    assert h.reconcile(KEY).is_done
    assert [e["reason"] for e in h.host.events] == ["InvalidSchedule"]
    assert h.host.events[0]["note"] == 'unparseable schedule "every minute"'
    assert [c.op for c in h.host.calls] == ["update_status"]
