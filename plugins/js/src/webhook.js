// Admission and conversion webhooks (contract 0.1.6): a plugin declares its hooks in its manifest
// and answers them with methods of its controller class, each optional:
//
//   manifest() {
//     return new Manifest('cronjob', '0.1.0')
//       .primary(CRONJOB)
//       .webhook(Webhook.mutating('default-cronjob').kind(CRONJOB))
//       .webhook(Webhook.validating('validate-cronjob').kind(CRONJOB).operations('create', 'update'))
//       .converts(CRONJOB);
//   }
//   mutate(review, ctx) { review.object.spec.concurrencyPolicy ??= 'Allow'; return review.object; }
//   validate(review, ctx) { if (review.name.length > 52) throw new Denied('name too long', { code: 422 }); return []; }
//   convert(obj, desiredApiVersion) { ...; return { ...obj, apiVersion: desiredApiVersion }; }
//
// The host serves HTTPS, writes the webhook configurations and computes the JSON patch of a
// mutation. A hook may read the cache and log through `ctx`; a write or an Event throws
// `Forbidden`. `Denied` is a hook's answer; anything else thrown is a fault, which the host
// answers by the hook's failure policy.

import { cut } from './bounds.js';

/** What a denial's message (and a conversion's refusal) may hold: a longer one is cut. */
export const MAX_DENIAL_MESSAGE = 4096;

/** A hook's refusal: `code` is the HTTP status the user sees (400 to 599; 403 when in doubt, 422 for an invalid object). */
export class Denied extends Error {
  constructor(message, { code = 403, warnings = [] } = {}) {
    super(cut(String(message), MAX_DENIAL_MESSAGE));
    this.name = 'Denied';
    this.code = code;
    this.warnings = [...warnings];
  }
}

/** Builds an admission hook, in the WIT `admission-hook` shape (`.hook`), for `Manifest.webhook`. */
export class Webhook {
  constructor(name, mutating) {
    this.hook = {
      name,
      mutating,
      kinds: [],
      operations: ['create', 'update'],
      failurePolicy: 'fail',
      timeoutSeconds: 10,
      sideEffects: 'none',
      matchConditions: [],
    };
  }

  /**
   * A validating hook named `name` (a DNS label, unique in the plugin) for create and update,
   * failing closed, with a 10 s timeout, no side effects and no kinds yet; answered by `validate`.
   */
  static validating(name) {
    return new Webhook(name, false);
  }

  /** A mutating (defaulting) hook, otherwise as `validating`; answered by `mutate`. */
  static mutating(name) {
    return new Webhook(name, true);
  }

  /** Admits objects of this kind. */
  kind(resource) {
    this.hook.kinds.push(resource);
    return this;
  }

  /** Replaces the operations it admits: 'create', 'update', 'delete', 'connect'. */
  operations(...operations) {
    this.hook.operations = operations;
    return this;
  }

  /** 'fail' (refuse the change when the hook cannot answer) or 'ignore' (let it through). */
  failurePolicy(policy) {
    this.hook.failurePolicy = policy;
    return this;
  }

  /** How long the API server waits: whole seconds, 1 to 30 (rounded up). */
  timeoutSeconds(seconds) {
    this.hook.timeoutSeconds = Math.ceil(seconds);
    return this;
  }

  /** 'none', or 'none-on-dry-run' for a hook that logs differently. */
  sideEffects(sideEffects) {
    this.hook.sideEffects = sideEffects;
    return this;
  }

  /** Calls the hook only when the CEL `expression` is true (`matchConditions`). */
  matchCondition(name, expression) {
    this.hook.matchConditions.push({ name, expression });
    return this;
  }
}

/**
 * One admission request, the WIT `admission-request` with its objects parsed (copies: change
 * `object` and return it from `mutate`), and the warnings shown beside the answer (`warn`).
 */
export class Review {
  constructor(request, object, oldObject) {
    Object.assign(this, request);
    this.object = object;
    this.oldObject = oldObject;
    this.warnings = [];
  }

  /** Shows the user a warning beside the answer (at most 32, each at most 512 bytes). */
  warn(message) {
    this.warnings.push(message);
  }
}
