// Webhooks (contract 0.1.6) through the harness, as the host calls them, and through the
// component's exports: the kubebuilder tutorial's CronJob defaulter, validator and v1 <-> v2
// conversion, cut down.
import assert from 'node:assert/strict';
import { register } from 'node:module';
import { test } from 'node:test';

import { Controller, Denied, Forbidden, MAX_DENIAL_MESSAGE, Manifest, Webhook, gvk, objects as o } from '@kubewasm/sdk';
import { FakeHost, Harness } from '@kubewasm/sdk/testing';

// The component glue imports the WIT imports: stand-ins, as in guest.test.js.
register('./fixtures/wit-hooks.js', import.meta.url);
const { exportsFor } = await import('../src/guest.js');

const CRONJOB_V1 = gvk('batch.tutorial.kubebuilder.io', 'v1', 'CronJob');
const CRONJOB_V2 = gvk('batch.tutorial.kubebuilder.io', 'v2', 'CronJob');
const V2 = 'batch.tutorial.kubebuilder.io/v2';

class CronJobHooks extends Controller {
  manifest() {
    return new Manifest('cronjob', '0.1.0')
      .primary(CRONJOB_V1)
      .webhook(Webhook.mutating('default-cronjob').kind(CRONJOB_V1))
      .webhook(Webhook.validating('validate-cronjob').kind(CRONJOB_V1).operations('create', 'update', 'delete').timeoutSeconds(4.5))
      .converts(CRONJOB_V1);
  }

  reconcile() {}

  mutate(review) {
    const obj = review.object;
    if (obj.spec.concurrencyPolicy !== undefined) return undefined;
    obj.spec.concurrencyPolicy = 'Allow';
    review.warn('concurrencyPolicy defaulted');
    return obj;
  }

  validate(review, ctx) {
    const { spec } = review.object ?? review.oldObject;
    if (spec.reason !== undefined) throw new Denied(spec.reason, { code: 422, warnings: ['refused'] });
    if (review.name.length > 52) throw new Denied('metadata.name: must be no more than 52 characters');
    if (review.operation === 'update') assert.throws(() => ctx.apply(o.newObject(CRONJOB_V1, 'side-effect', 'default')), Forbidden);
    return ['spec.startingDeadlineSeconds is unset'];
  }

  convert(obj, desiredApiVersion) {
    const { spec } = obj;
    if (desiredApiVersion === V2) spec.schedule = { cron: spec.schedule };
    else if (desiredApiVersion === 'batch.tutorial.kubebuilder.io/v1') spec.schedule = spec.schedule.cron;
    else throw new Denied(`unknown version ${desiredApiVersion}`);
    return { ...obj, apiVersion: desiredApiVersion };
  }
}

const cronjob = (name, spec = {}) => ({ ...o.newObject(CRONJOB_V1, name, 'default'), spec });

test('the hooks are declared in the WIT shape', () => {
  const { admission, conversion } = new Harness(CronJobHooks).runner.hooks();
  assert.deepEqual(
    admission.map((h) => [h.name, h.mutating]),
    [
      ['default-cronjob', true],
      ['validate-cronjob', false],
    ],
  );
  assert.equal(admission[1].timeoutSeconds, 5);
  assert.deepEqual(admission[1].operations, ['create', 'update', 'delete']);
  assert.deepEqual(conversion, [{ resource: CRONJOB_V1 }]);
});

test('a validator allows with warnings and denies', () => {
  const h = new Harness(CronJobHooks);
  assert.deepEqual(h.admit({ hook: 'validate-cronjob', operation: 'create', object: cronjob('ok') }), {
    allowed: true,
    warnings: ['spec.startingDeadlineSeconds is unset'],
  });
  const denied = h.admit({ hook: 'validate-cronjob', operation: 'create', object: cronjob('n'.repeat(53)) });
  assert.deepEqual([denied.allowed, denied.code, denied.message], [false, 403, 'metadata.name: must be no more than 52 characters']);
  const invalid = h.admit({ hook: 'validate-cronjob', operation: 'create', object: cronjob('bad', { reason: 'bad schedule' }) });
  assert.deepEqual([invalid.code, invalid.message, invalid.warnings], [422, 'bad schedule', ['refused']]);
  assert.ok(h.admit({ hook: 'validate-cronjob', operation: 'update', object: cronjob('ok'), oldObject: cronjob('ok') }).allowed);
  assert.equal(h.host.get(CRONJOB_V1, 'default', 'side-effect'), undefined, 'a write is refused');
  assert.ok(h.admit({ hook: 'validate-cronjob', operation: 'delete', oldObject: cronjob('ok') }).allowed);
  assert.throws(() => h.admit({ hook: 'nope', operation: 'create', object: cronjob('ok') }), /declares no hook/);
});

test('a long denial is cut at a character boundary', () => {
  const reason = `${'x'.repeat(MAX_DENIAL_MESSAGE - 1)}é${'y'.repeat(100)}`;
  const denied = new Harness(CronJobHooks).admit({ hook: 'validate-cronjob', operation: 'create', object: cronjob('long', { reason }) });
  assert.equal(denied.message, 'x'.repeat(MAX_DENIAL_MESSAGE - 1));
});

test('a defaulter changes the object', () => {
  const h = new Harness(CronJobHooks);
  const defaulted = h.admit({ hook: 'default-cronjob', operation: 'create', object: cronjob('a', { schedule: '* * * * *' }) });
  assert.equal(defaulted.object.spec.concurrencyPolicy, 'Allow');
  assert.equal(defaulted.object.metadata.name, 'a');
  assert.deepEqual(defaulted.warnings, ['concurrencyPolicy defaulted']);
  const unchanged = h.admit({ hook: 'default-cronjob', operation: 'create', object: cronjob('a', { concurrencyPolicy: 'Forbid' }) });
  assert.deepEqual(unchanged, { allowed: true, warnings: [], object: undefined });
});

test('a converter changes the version and keeps the name', () => {
  const h = new Harness(CronJobHooks);
  const v1 = cronjob('a', { schedule: '*/5 * * * *' });
  const [v2] = h.convert([v1], V2);
  assert.equal(v2.apiVersion, V2);
  assert.equal(v2.metadata.name, 'a');
  assert.deepEqual(v2.spec.schedule, { cron: '*/5 * * * *' });
  assert.deepEqual(h.convert([v2], 'batch.tutorial.kubebuilder.io/v1'), [v1]);
  assert.throws(
    () => h.convert([v1], 'batch.tutorial.kubebuilder.io/v3'),
    (e) => e instanceof Denied && e.message === 'a: unknown version batch.tutorial.kubebuilder.io/v3',
  );
});

test('the webhooks export answers in the WIT shapes', () => {
  const exports = exportsFor({ default: CronJobHooks }, new FakeHost());
  exports.plugin.describe('');
  assert.equal(exports.webhooks.declare().admission.length, 2);
  const request = (hook, object) => ({
    hook,
    uid: 'u',
    kind: CRONJOB_V1,
    namespace: 'default',
    name: 'a',
    operation: 'create',
    user: { username: 'alice', uid: 'u-1', groups: [] },
    object: JSON.stringify(object),
    dryRun: false,
  });
  assert.deepEqual(exports.webhooks.validate(request('validate-cronjob', cronjob('a'))), ['spec.startingDeadlineSeconds is unset']);
  assert.throws(
    () => exports.webhooks.validate(request('validate-cronjob', cronjob('a', { reason: 'no' }))),
    (e) => !(e instanceof Error) && e.code === 422 && e.message === 'no',
  );
  assert.throws(
    () => exports.webhooks.validate({ ...request('validate-cronjob'), object: '{' }),
    (e) => e.code === 400,
  );
  const mutation = exports.webhooks.mutate(request('default-cronjob', cronjob('a')));
  assert.deepEqual(JSON.parse(mutation.object).spec, { concurrencyPolicy: 'Allow' });
  const [v2] = exports.webhooks.convert([JSON.stringify(cronjob('a', { schedule: '@daily' }))], V2);
  assert.deepEqual(JSON.parse(v2).spec.schedule, { cron: '@daily' });
  assert.throws(
    () => exports.webhooks.convert([JSON.stringify(cronjob('a', { schedule: '@daily' }))], 'x/v9'),
    (e) => e === 'a: unknown version x/v9',
  );
});

test('a hook the controller does not define is denied with 500', () => {
  class Bare extends Controller {
    manifest() {
      return new Manifest('bare', '0.1.0').primary(CRONJOB_V2).webhook(Webhook.validating('v').kind(CRONJOB_V2));
    }

    reconcile() {}
  }
  const denied = new Harness(Bare).admit({ hook: 'v', operation: 'create', object: { ...cronjob('a'), apiVersion: V2 } });
  assert.deepEqual([denied.allowed, denied.code], [false, 500]);
  assert.match(denied.message, /does not define validate\(\)/);
});
