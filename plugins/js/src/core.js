// The small value types of the contract in JavaScript terms: kinds, keys, actions and the WIT
// enums. Values have the shapes the WIT bindings use (records as objects with camelCase fields,
// enums as their WIT case names), so they cross the boundary unchanged.

/** A Kubernetes kind: `{ group, version, kind }` (group "" for core). */
export function gvk(group, version, kind) {
  return Object.freeze({ group, version, kind });
}

/** Parses `apiVersion` and `kind` as objects carry them ("apps/v1", "v1"). */
export function gvkFromApiVersion(apiVersion, kind) {
  const slash = apiVersion.lastIndexOf('/');
  return slash < 0 ? gvk('', apiVersion, kind) : gvk(apiVersion.slice(0, slash), apiVersion.slice(slash + 1), kind);
}

/** The kind of an object, from its `apiVersion` and `kind`. */
export function gvkOf(obj) {
  return gvkFromApiVersion(String(obj?.apiVersion ?? ''), String(obj?.kind ?? ''));
}

/** `apiVersion` as objects carry it: "apps/v1", or "v1" for the core group. */
export function apiVersion(resource) {
  return resource.group ? `${resource.group}/${resource.version}` : resource.version;
}

/** kubectl's spelling of a kind: "Deployment.v1.apps", "Node.v1". */
export function gvkString(resource) {
  return [resource.kind, resource.version, resource.group].filter(Boolean).join('.');
}

export function sameGvk(a, b) {
  return a.group === b.group && a.version === b.version && a.kind === b.kind;
}

/** An object key: `{ namespace, name }`, namespace undefined for cluster-scoped objects. */
export function objectKey(namespace, name) {
  return Object.freeze({ namespace: namespace || undefined, name });
}

export function keyString(key) {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

/** The WIT's `requeue-after(u64)` (and `resync-after`), in milliseconds. */
export const MAX_REQUEUE_MS = 2n ** 64n - 1n;

/**
 * A delay in milliseconds as the host gets it: rounded up to a whole millisecond (through whole
 * microseconds, so that float noise such as 1000.0000000000001 does not add one), `Infinity`
 * kept (the glue sends the longest the WIT can say). `what` names the delay in the RangeError a
 * bad one throws.
 */
export function wholeMilliseconds(ms, what) {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < 0) throw new RangeError(`${what}: bad delay ${ms}`);
  return ms === Infinity ? ms : Math.ceil(Math.round(ms * 1000) / 1000);
}

/**
 * What the host does with the key after a successful reconcile, finalize or released:
 * `Action.done()` (or returning undefined), or `Action.requeueAfter(ms)`.
 *
 * Delays are in milliseconds, JavaScript's unit of time (`setTimeout`, `Date.now()`), and reach
 * the host as whole milliseconds, rounded up. Under a second a requeue means "again soon": it is
 * rate limited like a failure (per-key backoff from 5 ms and the plugin's token bucket), so ask
 * for 1000 or more for a fixed delay.
 */
export class Action {
  constructor(requeueAfterMs) {
    this.requeueAfterMs = requeueAfterMs;
    Object.freeze(this);
  }

  static done() {
    return DONE;
  }

  /**
   * Reconcile again after `ms` milliseconds even if nothing changes: rounded up to a whole
   * millisecond (through whole microseconds, so that float noise such as 1000.0000000000001
   * does not add one), `Infinity` the longest the WIT can say.
   */
  static requeueAfter(ms) {
    return new Action(wholeMilliseconds(ms, 'requeueAfter'));
  }

  get isDone() {
    return this.requeueAfterMs === undefined;
  }
}

export const DONE = new Action(undefined);

function enumOf(name, values) {
  const e = {};
  for (const v of values) e[v.toUpperCase().replace(/-/g, '_')] = v;
  e.values = Object.freeze([...values]);
  e.parse = (value) => {
    const v = String(value).toLowerCase();
    if (!values.includes(v)) throw new TypeError(`${JSON.stringify(value)} is not a ${name} (one of: ${values.join(', ')})`);
    return v;
  };
  return Object.freeze(e);
}

/** Kubernetes API verbs, with the meaning RBAC gives them. */
export const Verb = enumOf('Verb', ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
export const EventType = enumOf('EventType', ['normal', 'warning']);
/** The body of a patch: RFC 7386 merge, RFC 6902 JSON patch, or strategic merge. */
export const PatchType = enumOf('PatchType', ['merge', 'json', 'strategic']);
export const LogLevel = enumOf('LogLevel', ['trace', 'debug', 'info', 'warn', 'error']);
/** Why a host call failed (the WIT `error-code`). */
export const ErrorCode = enumOf('ErrorCode', ['not-found', 'already-exists', 'conflict', 'forbidden', 'invalid', 'unavailable', 'other']);
/** What the host does with an existing child whose desired state changed (`Manifest.child`). */
export const UpdateStrategy = enumOf('UpdateStrategy', ['on-delete', 'recreate', 'in-place']);
/** Which objects are a parent's children (`Manifest.childSelector`). */
export const ChildSelector = enumOf('ChildSelector', ['generated', 'parent-spec-selector']);
