// `Context`: everything the host offers one call — cache reads, API writes, events, logs — with
// objects as plain JavaScript objects and failures as `KubewasmError` exceptions.
//
// A Context talks to a host: inside a component that is the WIT imports (`guest.js`); in unit
// tests it is `FakeHost` from `@kubewasm/sdk/testing`. Both see the same JSON text.
//
// Member clusters (contract 0.1.4): `ctx.cluster()` names the cluster of the call's object,
// `ctx.clusters()` lists the members the plugin serves or reaches, and `ctx.inCluster(name)` is a
// context whose reads and writes go to a named cluster (the WIT `fleet` import).
//
// The host interface (all objects are JSON text; failures throw KubewasmError):
//   cacheGet(resource, namespace, name) -> string | undefined
//   cacheList(resource, namespace, labelSelector) -> string[]
//   cacheListControlled(resource, namespace, owner) -> string[]
//   apply(obj, force) / applyStatus(obj, force) / create(obj) / update(obj) / updateStatus(obj) -> string
//   patch(resource, namespace, name, patchType, body) -> string
//   delete(resource, namespace, name)
//   publishEvent({ regarding, eventType, reason, action, note })
//   log(level, message, fields: [{ key, value }])
//   currentCluster() -> string | undefined
//   clusters() -> [{ name, labels: [[key, value], ...] }]
//   fleetGet / fleetList / fleetApply / fleetApplyStatus / fleetCreate / fleetUpdate /
//   fleetUpdateStatus / fleetPatch / fleetDelete: the cache and client calls above with a first
//   argument `cluster` (string, or undefined for the host's own)

import { MAX_CLUSTER, MAX_LABEL_SELECTOR, MAX_NAMESPACE, MAX_OBJECT, MAX_OWNER, MAX_PATCH_BODY, atMost, checkEvent, checkGvk, checkTarget } from './bounds.js';
import { EventType, LogLevel, PatchType } from './core.js';
import { Invalid, NotFound } from './errors.js';
import { name, namespace, objectRef, uid } from './objects.js';

function parse(text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Invalid(`the host returned an object that does not parse: ${e.message}`);
  }
}

function json(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new Invalid(`${what} is not JSON: ${e.message}`);
  }
  if (text === undefined) throw new Invalid(`${what} is not JSON`);
  return text;
}

/** An object's JSON text for a client call, within the host's bound. */
function dump(value) {
  const text = json(value, 'object');
  atMost('object', text, MAX_OBJECT);
  return text;
}

function opt(value) {
  return value === null || value === '' ? undefined : value;
}

/**
 * The host, as seen from one call. Every method may throw a `KubewasmError` subclass.
 *
 * Every method checks the sizes the host takes before calling it (names, namespaces, kinds,
 * objects, patches, selectors, Event texts: see `bounds.js`): an over-long value throws
 * `Invalid` with the host's own message, e.g. "name is 254 bytes; at most 253".
 *
 * Reads and writes act in the cluster of the call's object (the host's own, or the member it
 * lives in for a plugin that serves members), unless the context comes from `inCluster`.
 */
export class Context {
  #host;
  #key;
  #retries;
  /**
   * Where reads and writes go: undefined for the call's own cluster (the `cache` and `client`
   * imports), else `{ cluster }`, the cluster named with `inCluster` (the `fleet` import).
   */
  #named;

  constructor(host, key = undefined, retries = 0) {
    this.#host = host;
    this.#key = key;
    this.#retries = retries;
  }

  /** The key being reconciled (undefined in `mapRelated`). */
  get key() {
    return this.#key;
  }

  /** How many times in a row this key failed before this call. */
  get retries() {
    return this.#retries;
  }

  // --- clusters (contract 0.1.4) ---

  /**
   * The member cluster the call's object lives in; undefined for the host's own cluster (always,
   * in a plugin that serves no member). The same in a context from `inCluster`.
   */
  cluster() {
    return this.#host.currentCluster() ?? undefined;
  }

  /**
   * The member clusters engaged now that the plugin serves or reaches, sorted by name (the host's
   * own cluster is not listed), as `{ name, labels }` (labels an object). Engaged does not mean
   * reachable: a call there may still throw `Unavailable`.
   */
  clusters() {
    return this.#host.clusters().map(({ name, labels }) => ({ name, labels: Object.fromEntries(labels) }));
  }

  /**
   * This context with its reads and writes in `cluster` (undefined: the host's own), e.g.
   * `ctx.inCluster('eu').apply(copy)`. The plugin acts as its own identity there, and its grants
   * are checked as here; a member outside its `clusters` scope throws `Forbidden`, one not engaged
   * now (or whose caches have not synced yet, or whose API server does not answer)
   * `Unavailable`. Events and logs stay with the call; `listControlled` reads the call's own
   * cluster only (`Invalid` here: list by label instead).
   */
  inCluster(cluster) {
    const named = cluster ?? undefined;
    if (named !== undefined) {
      if (typeof named !== 'string') throw new TypeError(`a cluster is named by a string, not ${typeof named}`);
      atMost('cluster', named, MAX_CLUSTER);
    }
    const other = new Context(this.#host, this.#key, this.#retries);
    other.#named = { cluster: named };
    return other;
  }

  // --- the cache: reads without an API round trip ---

  /** An object from the cache (a copy), or undefined. `namespace` is undefined for cluster-scoped resources. */
  get(resource, namespace, name) {
    checkTarget(resource, opt(namespace), name);
    const text =
      this.#named === undefined
        ? this.#host.cacheGet(resource, opt(namespace), name)
        : this.#host.fleetGet(this.#named.cluster, resource, opt(namespace), name);
    return text === undefined || text === null ? undefined : parse(text);
  }

  /**
   * Objects from the cache: in `namespace` (every readable one when undefined), matching a label
   * selector such as "app=web,tier!=db", sorted by namespace then name.
   */
  list(resource, namespace = undefined, labelSelector = undefined) {
    checkGvk(resource);
    atMost('namespace', opt(namespace), MAX_NAMESPACE);
    atMost('label selector', opt(labelSelector), MAX_LABEL_SELECTOR);
    const found =
      this.#named === undefined
        ? this.#host.cacheList(resource, opt(namespace), opt(labelSelector))
        : this.#host.fleetList(this.#named.cluster, resource, opt(namespace), opt(labelSelector));
    return found.map(parse);
  }

  /**
   * The objects of `resource` from the cache whose controller owner reference (`controller:
   * true`) names the object of uid `owner` (a parent's children, e.g.
   * `ctx.listControlled(kinds.DEPLOYMENT, parent.metadata.uid, parent.metadata.namespace)`): in
   * `namespace` (every readable one when undefined), sorted by namespace then name. Served from
   * the host's index of controller owners, so it costs the children's count, not the
   * namespace's; refused and bounded as `list` is. The call's own cluster only: `Invalid` in a
   * context from `inCluster`.
   */
  listControlled(resource, owner, namespace = undefined) {
    if (this.#named !== undefined) throw new Invalid("listControlled reads the call's own cluster only: list by label in another");
    checkGvk(resource);
    atMost('namespace', opt(namespace), MAX_NAMESPACE);
    atMost('owner', owner, MAX_OWNER);
    return this.#host.cacheListControlled(resource, opt(namespace), owner).map(parse);
  }

  // --- the client: writes as field manager `kubewasm/<plugin>` ---

  /**
   * Server-side apply: owns the given fields and sets them; creates the object if needed. With
   * `force` (the default, what controllers usually want) takes over fields other managers set;
   * without it such a clash throws `Conflict`. Returns the stored object.
   */
  apply(obj, force = true) {
    const text = dump(obj);
    return parse(this.#named === undefined ? this.#host.apply(text, force) : this.#host.fleetApply(this.#named.cluster, text, force));
  }

  /** Server-side apply of the status subresource (see `statusObject`). */
  applyStatus(obj, force = true) {
    const text = dump(obj);
    return parse(this.#named === undefined ? this.#host.applyStatus(text, force) : this.#host.fleetApplyStatus(this.#named.cluster, text, force));
  }

  /** Creates the object; `AlreadyExists` if the name is taken. */
  create(obj) {
    const text = dump(obj);
    return parse(this.#named === undefined ? this.#host.create(text) : this.#host.fleetCreate(this.#named.cluster, text));
  }

  /** Replaces the object; `Conflict` if its `metadata.resourceVersion` is stale. */
  update(obj) {
    const text = dump(obj);
    return parse(this.#named === undefined ? this.#host.update(text) : this.#host.fleetUpdate(this.#named.cluster, text));
  }

  /** Replaces the status; `Conflict` if the resourceVersion is stale. */
  updateStatus(obj) {
    const text = dump(obj);
    return parse(this.#named === undefined ? this.#host.updateStatus(text) : this.#host.fleetUpdateStatus(this.#named.cluster, text));
  }

  /**
   * Patches an object: a merge patch by default (an object), or 'json' (an array of operations)
   * or 'strategic'. Returns the stored object.
   */
  patch(resource, namespace, name, body, patchType = PatchType.MERGE) {
    checkTarget(resource, opt(namespace), name);
    const text = typeof body === 'string' ? body : json(body, 'patch body');
    atMost('patch body', text, MAX_PATCH_BODY);
    const kind = PatchType.parse(patchType);
    return parse(
      this.#named === undefined
        ? this.#host.patch(resource, opt(namespace), name, kind, text)
        : this.#host.fleetPatch(this.#named.cluster, resource, opt(namespace), name, kind, text),
    );
  }

  /** Deletes an object (dependents are garbage-collected); `NotFound` if already gone. */
  delete(resource, namespace, name) {
    checkTarget(resource, opt(namespace), name);
    if (this.#named === undefined) this.#host.delete(resource, opt(namespace), name);
    else this.#host.fleetDelete(this.#named.cluster, resource, opt(namespace), name);
  }

  /**
   * Deletes the objects of `kinds` (`[gvk, mayDelete]` pairs) that `owner` controls (in its
   * namespace), skipping kinds the plugin may not delete, with a warning. What the default
   * `Controller.released` does, with `Manifest.owned()` as `kinds`.
   */
  deleteControlled(owner, kinds) {
    const ownerUid = uid(owner);
    if (ownerUid === undefined) return;
    for (const [resource, mayDelete] of kinds) {
      if (!mayDelete) {
        this.warn(`leaving the ${resource.kind} objects of ${name(owner)} in place: the manifest grants no delete on them`);
        continue;
      }
      for (const child of this.listControlled(resource, ownerUid, namespace(owner))) {
        try {
          this.delete(resource, namespace(child), name(child));
        } catch (e) {
          if (!(e instanceof NotFound)) throw e;
        }
      }
    }
  }

  // --- events and logs ---

  /**
   * Records a Kubernetes Event about `regarding` (an object): `reason` in PascalCase, `action`
   * what was done or attempted, `note` for humans.
   */
  event(regarding, eventType, reason, action, note = '') {
    const ref = objectRef(regarding);
    checkTarget(ref.resource, ref.namespace, ref.name);
    checkEvent(reason, action, note);
    this.#host.publishEvent({ regarding: ref, eventType: EventType.parse(eventType), reason, action, note });
  }

  /** A structured log record in the host's log; `fields` become key=value pairs. */
  log(level, message, fields = {}) {
    const list = Object.entries(fields).map(([key, value]) => ({ key, value: String(value) }));
    this.#host.log(LogLevel.parse(level), message, list);
  }

  trace(message, fields = {}) {
    this.log('trace', message, fields);
  }

  debug(message, fields = {}) {
    this.log('debug', message, fields);
  }

  info(message, fields = {}) {
    this.log('info', message, fields);
  }

  warn(message, fields = {}) {
    this.log('warn', message, fields);
  }

  error(message, fields = {}) {
    this.log('error', message, fields);
  }
}
