// Unit tests of the CronJob controller's schedule arithmetic under plain Node (the shared table
// tests in ../cases run the whole plugin).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ScheduleError, nextSchedule } from './cronjob.js';

const cronJob = (created) => ({ metadata: { creationTimestamp: created } });
const iso = (date) => date?.toISOString().replace('.000Z', 'Z');

test('the missed run counts from the last run or the creation, no further back than the deadline', () => {
  const now = new Date('2026-12-03T10:00:30Z');
  const made = cronJob('2026-12-03T09:58:10Z');
  const cases = [
    [{ schedule: '*/1 * * * *' }, undefined, '2026-12-03T10:00:00Z', '2026-12-03T10:01:00Z'],
    [{ schedule: '*/1 * * * *' }, new Date('2026-12-03T10:00:00Z'), undefined, '2026-12-03T10:01:00Z'],
    [{ schedule: '*/1 * * * *', startingDeadlineSeconds: 20 }, undefined, undefined, '2026-12-03T10:01:00Z'],
    [{ schedule: '@hourly' }, undefined, '2026-12-03T10:00:00Z', '2026-12-03T11:00:00Z'],
  ];
  for (const [spec, last, missed, next] of cases) {
    const runs = nextSchedule(spec, made, last, now);
    assert.deepEqual([iso(runs.missed), iso(runs.next)], [missed, next], JSON.stringify(spec));
  }
});

test('a schedule it cannot follow is a ScheduleError with the reason the status gives', () => {
  const now = new Date('2026-12-03T10:00:30Z');
  for (const [schedule, reason] of [
    ['61 * * * *', 'InvalidSchedule'],
    ['*/1 * * * *', 'TooManyMissedStartTimes'],
  ]) {
    assert.throws(
      () => nextSchedule({ schedule }, cronJob('2026-12-01T00:00:00Z'), undefined, now),
      (e) => e instanceof ScheduleError && e.reason === reason,
    );
  }
});
