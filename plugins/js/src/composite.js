// Declarative controllers (contract 0.1.3, the WIT `composite` interface): for a parent object,
// the plugin answers which children should exist and what the parent's status is; the host
// claims, applies, prunes and writes the status.
//
//   export default class Site extends Composite {
//     manifest() {
//       return new Manifest('site', '0.1.0').primary(SITE).child(kinds.CONFIG_MAP, UpdateStrategy.IN_PLACE);
//     }
//     sync(request, ctx) {
//       const page = o.newObject(kinds.CONFIG_MAP, `${o.name(request.parent)}-page`, undefined, { data: { html: '...' } });
//       return { status: { pages: request.childrenOf(kinds.CONFIG_MAP).length }, children: [page] };
//     }
//   }
//
// Or, the short form, a module whose own exports are the controller: `manifest(settings)`,
// `sync(request, ctx)`, and optionally `customize(parent, ctx)`, `finalize(request, ctx)` and
// `settingsDefaults` (see `findController` in runtime.js).

import { wholeMilliseconds } from './core.js';

/**
 * A declarative controller plugin. Extend it, export the class (as a `Controller` is exported),
 * and declare the parent as the manifest's `primary` and each child kind with `.child(gvk,
 * strategy)`.
 *
 * The host calls `sync(request, ctx)` for each parent with the children it claimed, and makes
 * the world match the answer (`{ status, children, resyncAfter }`): it creates what is missing,
 * updates per the kind's update strategy, deletes what is no longer answered (only once every
 * apply succeeded), and replaces the parent's status (with `observedGeneration`). With a
 * manifest finalizer, a parent being deleted gets `finalize(request, ctx)` instead.
 *
 * `customize`, `sync` and `finalize` may read the cache and log through `ctx`; every write and
 * Event is refused (`Forbidden`): the host makes every write from their answers. Settings,
 * construction and faults are those of `Controller`: a `KubewasmError` thrown is an answer (the
 * host retries the parent with backoff and changes nothing), anything else thrown, or an answer
 * that is not a `SyncResponse`, is a bug: the call traps.
 */
export class Composite {
  /** Every setting the controller takes, with its default (top-level keys of `NAME.toml`). */
  static settingsDefaults = {};

  constructor(settings = {}) {
    this.settings = settings;
  }

  /** The parent kind (`.primary()`), the child kinds (`.child()`) and what else the plugin needs. */
  manifest() {
    throw new Error(`${this.constructor.name} must define manifest()`);
  }

  /**
   * The related objects a parent needs besides its children: an array of `RelatedRule`s (the
   * objects they select come in `request.related`). Asked once per parent and
   * `metadata.generation`. None by default.
   */
  customize(_parent, _ctx) {
    return [];
  }

  /** The children and status the parent (`request.parent`) should have: a `SyncResponse`. */
  sync(_request, _ctx) {
    throw new Error(`${this.constructor.name} must define sync()`);
  }

  /**
   * The same for a parent being deleted that carries the manifest's finalizer: by default no
   * children (the host deletes them) and `finalized` (the finalizer may go).
   */
  finalize(_request, _ctx) {
    return { children: [], finalized: true };
  }
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Objects of one kind: `{ resource, items }`, items parsed. */
function objectsOf(groups, resource) {
  return groups.filter((g) => g.resource.group === resource.group && g.resource.kind === resource.kind).flatMap((g) => g.items);
}

/**
 * One parent and what it has: `parent` (a copy, as the cache holds it), `children` and `related`
 * (one `{ resource, items }` entry per child kind and per `customize` rule), `finalizing`.
 */
export class SyncRequest {
  constructor(parent, children = [], related = [], finalizing = false) {
    this.parent = parent;
    this.children = children;
    this.related = related;
    this.finalizing = finalizing;
  }

  /** The parent's children of a kind (matched by group and kind), sorted by namespace and name; [] when none. */
  childrenOf(resource) {
    return objectsOf(this.children, resource);
  }

  /** The related objects of a kind, over every `customize` rule that named it; [] when none. */
  relatedOf(resource) {
    return objectsOf(this.related, resource);
  }
}

/**
 * Objects a parent depends on besides its children, as `customize` returns them: plain objects
 * `{ resource, namespace, names, labelSelector }` (all but `resource` optional), or made here.
 * A rule selects by `names` or by `labelSelector`, not both, or every object of the kind when
 * neither is given; in `namespace`, or in every namespace when it is undefined.
 */
export const RelatedRule = Object.freeze({
  /** The objects of a kind named `names`, in `namespace` (any namespace when undefined). */
  named: (resource, namespace, names) => ({ resource, namespace, names: [...names], labelSelector: undefined }),
  /** The objects of a kind matching a label selector ('' for all), in `namespace` (every one when undefined). */
  selected: (resource, namespace, labelSelector) => ({ resource, namespace, names: [], labelSelector }),
});

const RULE_FIELDS = ['resource', 'namespace', 'names', 'labelSelector'];
const RESPONSE_FIELDS = ['status', 'children', 'resyncAfter', 'finalized'];

function describeValue(value) {
  if (value === undefined || value === null) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? `a ${value.constructor?.name ?? 'object'}` : `${typeof value} ${JSON.stringify(value)}`;
}

function checkFields(value, fields, what) {
  for (const key of Object.keys(value)) {
    if (!fields.includes(key)) throw new TypeError(`${what} has an unknown field ${JSON.stringify(key)} (it has: ${fields.join(', ')})`);
  }
}

const optString = (value, what) => {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, not ${describeValue(value)}`);
  return value;
};

function isGvk(value) {
  return isObject(value) && ['group', 'version', 'kind'].every((f) => typeof value[f] === 'string');
}

/**
 * What `customize` returned, as the WIT `related-rule` list. Anything else than an array of
 * rules is a bug (a TypeError: the call traps); `undefined` is no rules.
 */
export function relatedRules(value) {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new TypeError(`customize returned ${describeValue(value)}, not an array of RelatedRule`);
  return value.map((rule, i) => {
    const what = `customize rule ${i}`;
    if (!isObject(rule)) throw new TypeError(`${what} is ${describeValue(rule)}, not a RelatedRule`);
    checkFields(rule, RULE_FIELDS, what);
    if (!isGvk(rule.resource)) throw new TypeError(`${what}: resource must be a gvk ({ group, version, kind }), not ${describeValue(rule.resource)}`);
    const names = rule.names ?? [];
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) throw new TypeError(`${what}: names must be an array of strings`);
    const { group, version, kind } = rule.resource;
    return {
      resource: { group, version, kind },
      namespace: optString(rule.namespace, `${what}: namespace`),
      names: [...names],
      labelSelector: optString(rule.labelSelector, `${what}: labelSelector`),
    };
  });
}

function json(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new TypeError(`${what} is not JSON: ${e.message}`);
  }
  return text;
}

/**
 * What `sync` or `finalize` (`method`) returned, as the WIT `sync-response` minus its u64:
 * `{ status: JSON text | undefined, children: JSON texts, resyncAfter: whole ms | undefined,
 * finalized }`. Anything that is not a `SyncResponse` is a bug (a TypeError or RangeError: the
 * call traps); `undefined` too, since it would otherwise delete every child.
 */
export function syncResponse(value, method) {
  if (!isObject(value)) {
    throw new TypeError(
      `${method} returned ${describeValue(value)}, not a SyncResponse ({ status, children, resyncAfter, finalized }; { children: [] } for none)`,
    );
  }
  const what = `the SyncResponse of ${method}`;
  checkFields(value, RESPONSE_FIELDS, what);
  const { status, children = [], resyncAfter, finalized = false } = value;
  if (status !== undefined && status !== null && !isObject(status)) throw new TypeError(`${what}: status must be an object, not ${describeValue(status)}`);
  if (!Array.isArray(children)) throw new TypeError(`${what}: children must be an array, not ${describeValue(children)}`);
  if (typeof finalized !== 'boolean') throw new TypeError(`${what}: finalized must be a boolean, not ${describeValue(finalized)}`);
  return {
    status: status === undefined || status === null ? undefined : json(status, `${what}: status`),
    children: children.map((child, i) => {
      if (!isObject(child)) throw new TypeError(`${what}: children[${i}] is ${describeValue(child)}, not an object`);
      return json(child, `${what}: children[${i}]`);
    }),
    resyncAfter: resyncAfter === undefined || resyncAfter === null ? undefined : wholeMilliseconds(resyncAfter, 'resyncAfter'),
    finalized,
  };
}
