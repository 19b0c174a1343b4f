// The kubebuilder book's CronJob controller ("Tutorial: Building CronJob") as a kubewasm plugin,
// in JavaScript: the same behaviour and table cases as the Go and Rust ports beside it, with
// croner for the schedule (cron-parser needs Intl, which the component's JavaScript engine lacks). What it does, step by step, is in ../README.md; the step numbers
// below are the tutorial's.

import { Action, Controller, Manifest, NotFound, gvk, kinds, objects as o } from '@kubewasm/sdk';
import { Cron } from 'croner';

export const CRON_JOB = gvk('batch.tutorial.kubebuilder.io', 'v1', 'CronJob');

// Records on each Job the run it was started for: what the controller reads back to know the
// last run, since it never trusts its own status.
export const SCHEDULED_TIME_ANNOTATION = 'batch.tutorial.kubebuilder.io/scheduled-at';

// How many missed runs are counted before giving up (the tutorial's 100).
const MAX_MISSED_STARTS = 100;

/** A schedule the controller cannot follow: the reason and message of its condition and Event. */
export class ScheduleError extends Error {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
}

const rfc3339 = (date) => date.toISOString().replace(/\.\d{3}Z$/, 'Z');

export default class CronJobController extends Controller {
  manifest() {
    return new Manifest('cronjob', '0.1.0')
      .primary(CRON_JOB)
      .owns(kinds.JOB)
      .permission(kinds.JOB, ['create', 'delete'])
      .statusPermission(CRON_JOB, ['update']);
  }

  reconcile(cronJob, ctx) {
    const now = new Date();
    const spec = cronJob.spec ?? {};
    const namespace = o.namespace(cronJob);

    // 2: the child Jobs, active, successful and failed; the most recent scheduled run.
    const active = [];
    const successful = [];
    const failed = [];
    let mostRecent;
    for (const job of ctx.listControlled(kinds.JOB, o.uid(cronJob) ?? '', namespace)) {
      const raw = o.annotations(job)[SCHEDULED_TIME_ANNOTATION];
      if (raw) {
        const at = new Date(raw);
        if (Number.isNaN(at.getTime())) ctx.error('unable to parse schedule time for child job', { job: o.name(job) });
        else if (mostRecent === undefined || at > mostRecent) mostRecent = at;
      }
      const finished = finishedType(job);
      if (finished === undefined) active.push(job);
      else if (finished === 'Failed') failed.push(job);
      else successful.push(job);
    }

    // Where the schedule stands decides the condition the status reports.
    const suspended = spec.suspend === true;
    let runs;
    let scheduleError;
    const condition = {
      type: 'Available',
      status: 'False',
      reason: 'Suspended',
      message: 'suspended: no Job is started',
      observedGeneration: o.generation(cronJob),
      now: rfc3339(now),
    };
    if (!suspended) {
      try {
        runs = nextSchedule(spec, cronJob, mostRecent, now);
        Object.assign(condition, { status: 'True', reason: 'Scheduled', message: `next run at ${rfc3339(runs.next)}` });
      } catch (e) {
        if (!(e instanceof ScheduleError)) throw e;
        scheduleError = e;
        Object.assign(condition, { reason: e.reason, message: e.message });
      }
    }

    // 2 (cont.): the status, written when it changed.
    const before = JSON.stringify(cronJob.status ?? null);
    cronJob.status = { ...(cronJob.status ?? {}) };
    if (mostRecent !== undefined) cronJob.status.lastScheduleTime = rfc3339(mostRecent);
    else delete cronJob.status.lastScheduleTime;
    if (active.length > 0) {
      cronJob.status.active = active.map((job) => ({ apiVersion: 'batch/v1', kind: 'Job', namespace: o.namespace(job), name: o.name(job), uid: o.uid(job) }));
    } else {
      delete cronJob.status.active;
    }
    o.setCondition(cronJob, condition);
    if (JSON.stringify(cronJob.status) !== before) ctx.updateStatus(cronJob);

    // 3: the oldest finished Jobs beyond the history limits.
    prune(ctx, failed, spec.failedJobsHistoryLimit, 'failed');
    prune(ctx, successful, spec.successfulJobsHistoryLimit, 'successful');

    // 4: nothing more while suspended.
    if (suspended) {
      ctx.debug('cronjob suspended, skipping');
      return Action.done();
    }
    if (scheduleError !== undefined) {
      // Not requeued: only a change of the CronJob can fix it.
      ctx.event(cronJob, 'warning', scheduleError.reason, 'Reconcile', scheduleError.message);
      return Action.done();
    }

    // 5 and 6: the missed run, if it is still due and the concurrency policy lets it start.
    const scheduled = Action.requeueAfter(runs.next.getTime() - now.getTime());
    if (runs.missed === undefined) {
      ctx.debug('no upcoming scheduled times, sleeping until next', { next: rfc3339(runs.next) });
      return scheduled;
    }
    if (spec.startingDeadlineSeconds != null && runs.missed.getTime() + spec.startingDeadlineSeconds * 1000 < now.getTime()) {
      ctx.debug('missed starting deadline for last run, sleeping till next');
      return scheduled;
    }
    const policy = spec.concurrencyPolicy ?? 'Allow';
    if (policy === 'Forbid' && active.length > 0) {
      ctx.debug('concurrency policy blocks concurrent runs, skipping');
      return scheduled;
    }
    if (policy === 'Replace') {
      for (const job of active) ignoreNotFound(() => ctx.delete(kinds.JOB, o.namespace(job), o.name(job)));
    }
    ctx.create(jobFor(cronJob, spec, runs.missed));
    ctx.debug('created Job for CronJob run', { run: rfc3339(runs.missed) });
    // 7: back at the next run.
    return scheduled;
  }
}

/** 'Complete' or 'Failed' once a condition of that type is true; undefined while the Job runs. */
function finishedType(job) {
  const done = (job.status?.conditions ?? []).find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
  return done?.type;
}

function ignoreNotFound(call) {
  try {
    call();
  } catch (e) {
    if (!(e instanceof NotFound)) throw e;
  }
}

/** The most recent run missed since the last one (undefined when none) and the next run after now. */
export function nextSchedule(spec, cronJob, lastRun, now) {
  let cron;
  try {
    // Paused: only its arithmetic is used, in UTC.
    cron = new Cron(spec.schedule ?? '', { utcOffset: 0, paused: true });
  } catch {
    throw new ScheduleError('InvalidSchedule', `unparseable schedule ${JSON.stringify(spec.schedule)}`);
  }
  const nextAfter = (at) => cron.nextRun(at);
  // Since the last run, or since the CronJob was made; not before the starting deadline.
  const created = cronJob.metadata?.creationTimestamp;
  let earliest = lastRun ?? (created ? new Date(created) : now);
  if (spec.startingDeadlineSeconds != null) {
    const deadline = new Date(now.getTime() - spec.startingDeadlineSeconds * 1000);
    if (deadline > earliest) earliest = deadline;
  }
  if (earliest > now) return { missed: undefined, next: nextAfter(now) };
  let missed;
  let starts = 0;
  for (let t = nextAfter(earliest); t <= now; t = nextAfter(t)) {
    missed = t;
    if (++starts > MAX_MISSED_STARTS) {
      throw new ScheduleError(
        'TooManyMissedStartTimes',
        'too many missed start times (> 100): set or decrease .spec.startingDeadlineSeconds or check clock skew',
      );
    }
  }
  return { missed, next: nextAfter(now) };
}

/** Deletes the oldest of `jobs` (by start time, unstarted first) beyond `limit`; undefined keeps all. */
function prune(ctx, jobs, limit, what) {
  if (limit == null) return;
  const started = (job) => (job.status?.startTime ? Date.parse(job.status.startTime) : Number.NEGATIVE_INFINITY);
  jobs.sort((a, b) => started(a) - started(b));
  for (const job of jobs.slice(0, Math.max(0, jobs.length - limit))) {
    try {
      ignoreNotFound(() => ctx.delete(kinds.JOB, o.namespace(job), o.name(job)));
      ctx.debug(`deleted old ${what} job`, { job: o.name(job) });
    } catch (e) {
      ctx.error(`unable to delete old ${what} job`, { job: o.name(job), error: String(e) });
    }
  }
}

/** The Job of the run at `scheduled`: the template's labels, annotations and spec, the run's time in the annotation, controlled by the CronJob. */
function jobFor(cronJob, spec, scheduled) {
  const template = spec.jobTemplate ?? {};
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: `${o.name(cronJob)}-${Math.floor(scheduled.getTime() / 1000)}`,
      namespace: o.namespace(cronJob),
      labels: { ...(template.metadata?.labels ?? {}) },
      annotations: { ...(template.metadata?.annotations ?? {}), [SCHEDULED_TIME_ANNOTATION]: rfc3339(scheduled) },
      ownerReferences: [o.controllerOwnerRef(cronJob)],
    },
    spec: template.spec,
  };
}
