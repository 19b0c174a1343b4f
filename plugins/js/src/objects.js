// Kubernetes objects as plain JavaScript objects (parsed JSON), and the helpers controllers
// need: metadata, owner references, finalizers, conditions and status.
//
// Readers never throw on a missing field: they return undefined (or an empty object/array).
// Writers (`setLabel`, `addFinalizer`, `setCondition`, ...) change the object in place and
// create the parents they need.

import { apiVersion, gvkOf, objectKey } from './core.js';

// --- identity -------------------------------------------------------------------------------

/** A new object of a kind: apiVersion, kind, metadata (name, namespace), then `fields`. */
export function newObject(resource, name, namespace = undefined, fields = {}) {
  const metadata = { name };
  if (namespace !== undefined && namespace !== null) metadata.namespace = namespace;
  return { apiVersion: apiVersion(resource), kind: resource.kind, metadata, ...fields };
}

export { gvkOf };

/** `metadata`, or an empty object. */
export function metadata(obj) {
  return obj?.metadata ?? {};
}

function metaMut(obj) {
  if (obj.metadata === undefined || obj.metadata === null) obj.metadata = {};
  return obj.metadata;
}

/** `metadata.name` ("" when missing). */
export function name(obj) {
  return metadata(obj).name ?? '';
}

/** `metadata.namespace`, undefined for cluster-scoped objects. */
export function namespace(obj) {
  return metadata(obj).namespace || undefined;
}

/** `{ namespace, name }` of an object. */
export function key(obj) {
  return objectKey(namespace(obj), name(obj));
}

export function uid(obj) {
  return metadata(obj).uid || undefined;
}

/** `metadata.generation`: bumped by the API server on every change of the spec. */
export function generation(obj) {
  return metadata(obj).generation ?? undefined;
}

export function resourceVersion(obj) {
  return metadata(obj).resourceVersion || undefined;
}

/** `{ resource, namespace, name }`: what identifies any object. */
export function objectRef(obj) {
  return { resource: gvkOf(obj), namespace: namespace(obj), name: name(obj) };
}

// --- fields ---------------------------------------------------------------------------------

/**
 * A nested field, or `fallback` if any step is missing (or null). `path` is dotted
 * ("spec.replicas") or an array of keys and indexes (["metadata", "annotations", "a.b/c"]).
 */
export function field(obj, path, fallback = undefined) {
  const steps = typeof path === 'string' ? path.split('.') : path;
  let current = obj;
  for (const step of steps) {
    if (current === null || typeof current !== 'object') return fallback;
    if (Array.isArray(current) !== (typeof step === 'number')) return fallback;
    if (!Object.hasOwn(current, step)) return fallback;
    current = current[step];
    if (current === undefined || current === null) return fallback;
  }
  return current;
}

/** Sets a nested field, creating the objects on the way. */
export function setField(obj, path, value) {
  const steps = typeof path === 'string' ? path.split('.') : path;
  let current = obj;
  for (const step of steps.slice(0, -1)) {
    if (current[step] === null || typeof current[step] !== 'object') current[step] = {};
    current = current[step];
  }
  current[steps[steps.length - 1]] = value;
}

// --- labels and annotations -----------------------------------------------------------------

export function labels(obj) {
  return metadata(obj).labels ?? {};
}

export function label(obj, k, fallback = undefined) {
  return labels(obj)[k] ?? fallback;
}

export function setLabel(obj, k, value) {
  const meta = metaMut(obj);
  meta.labels ??= {};
  meta.labels[k] = value;
}

export function annotations(obj) {
  return metadata(obj).annotations ?? {};
}

export function annotation(obj, k, fallback = undefined) {
  return annotations(obj)[k] ?? fallback;
}

export function hasAnnotation(obj, k) {
  return Object.hasOwn(annotations(obj), k);
}

export function setAnnotation(obj, k, value) {
  const meta = metaMut(obj);
  meta.annotations ??= {};
  meta.annotations[k] = value;
}

// --- owner references -----------------------------------------------------------------------

export function ownerReferences(obj) {
  return [...(metadata(obj).ownerReferences ?? [])];
}

/** The owner reference with `controller: true`, if any. */
export function controllerRef(obj) {
  return ownerReferences(obj).find((r) => r.controller === true);
}

/** Whether `owner` is `obj`'s controller: an owner reference with `controller: true` and the owner's uid. */
export function isControlledBy(obj, owner) {
  const ownerUid = uid(owner);
  return ownerUid !== undefined && ownerReferences(obj).some((r) => r.controller === true && r.uid === ownerUid);
}

/** An owner reference to `owner`. */
export function ownerRef(owner, { controller = false, blockOwnerDeletion = false } = {}) {
  const ref = { apiVersion: owner.apiVersion ?? '', kind: owner.kind ?? '', name: name(owner), uid: uid(owner) ?? '' };
  if (controller) ref.controller = true;
  if (blockOwnerDeletion) ref.blockOwnerDeletion = true;
  return ref;
}

/**
 * An owner reference making `owner` the controller of a child (`controller` and
 * `blockOwnerDeletion` true), so the child is garbage-collected with it and the child's events
 * reach `owner`'s controller.
 */
export function controllerOwnerRef(owner) {
  return ownerRef(owner, { controller: true, blockOwnerDeletion: true });
}

// --- finalizers and deletion ----------------------------------------------------------------

export function finalizers(obj) {
  return [...(metadata(obj).finalizers ?? [])];
}

export function hasFinalizer(obj, finalizer) {
  return finalizers(obj).includes(finalizer);
}

/** Adds a finalizer; false if it was there already. */
export function addFinalizer(obj, finalizer) {
  const meta = metaMut(obj);
  meta.finalizers ??= [];
  if (meta.finalizers.includes(finalizer)) return false;
  meta.finalizers.push(finalizer);
  return true;
}

/** Removes a finalizer; false if it was not there. */
export function removeFinalizer(obj, finalizer) {
  const meta = metaMut(obj);
  if (!(meta.finalizers ?? []).includes(finalizer)) return false;
  meta.finalizers = meta.finalizers.filter((f) => f !== finalizer);
  return true;
}

/** Whether the object has a deletion timestamp (it goes once its finalizers are gone). */
export function isDeleting(obj) {
  return Boolean(metadata(obj).deletionTimestamp);
}

// --- status and conditions ------------------------------------------------------------------

/** `status`, or an empty object. */
export function status(obj) {
  return obj?.status ?? {};
}

/**
 * The smallest object that server-side applies `status` to `obj`'s status subresource:
 * apiVersion, kind, metadata (name, namespace) and status. For `ctx.applyStatus`.
 */
export function statusObject(obj, statusValue) {
  const body = newObject(gvkOf(obj), name(obj), namespace(obj));
  body.status = { ...statusValue };
  return body;
}

/** `status.conditions`, or an empty array. */
export function conditions(obj) {
  return [...(status(obj).conditions ?? [])];
}

/** The condition of a type (e.g. "Ready"), if present. */
export function getCondition(obj, type) {
  return conditions(obj).find((c) => c.type === type);
}

/** "True", "False", "Unknown", or undefined when the object has no condition of that type. */
export function conditionStatus(obj, type) {
  return getCondition(obj, type)?.status;
}

export function isConditionTrue(obj, type) {
  return conditionStatus(obj, type) === 'True';
}

function now() {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

/**
 * Sets a condition in `status.conditions` the way Kubernetes' `meta.SetStatusCondition` does:
 * `lastTransitionTime` changes only when the status changes. `status` is a boolean or
 * "True"/"False"/"Unknown". Returns whether anything changed.
 */
export function setCondition(obj, { type, status: value, reason, message = '', observedGeneration = undefined, now: at = undefined }) {
  if (typeof value === 'boolean') value = value ? 'True' : 'False';
  if (!['True', 'False', 'Unknown'].includes(value)) {
    throw new TypeError(`condition status must be True, False or Unknown, not ${JSON.stringify(value)}`);
  }
  if (obj.status === null || typeof obj.status !== 'object') obj.status = {};
  obj.status.conditions ??= [];
  const conds = obj.status.conditions;
  const wanted = { type, status: value, reason, message };
  if (observedGeneration !== undefined) wanted.observedGeneration = observedGeneration;
  const existing = conds.find((c) => c.type === type);
  if (existing === undefined) {
    conds.push({ ...wanted, lastTransitionTime: at ?? now() });
    return true;
  }
  let changed = false;
  if (existing.status !== value) {
    existing.lastTransitionTime = at ?? now();
    changed = true;
  }
  for (const [k, v] of Object.entries(wanted)) {
    if (existing[k] !== v) {
      existing[k] = v;
      changed = true;
    }
  }
  return changed;
}

/** Removes the condition of a type; false if there was none. */
export function removeCondition(obj, type) {
  const conds = obj?.status?.conditions;
  if (!Array.isArray(conds)) return false;
  const kept = conds.filter((c) => c.type !== type);
  obj.status.conditions = kept;
  return kept.length !== conds.length;
}

/** The keys of objects, sorted by namespace then name (cluster-scoped first). */
export function sortedKeys(objs) {
  return objs.map(key).sort((a, b) => compare(a.namespace ?? '', b.namespace ?? '') || compare(a.name, b.name));
}

function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}
