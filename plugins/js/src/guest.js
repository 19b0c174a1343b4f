// The component glue: the WIT imports as a host, and the `plugin`, `reconciler`, `access`,
// `release`, `views`, `composite`, `clusters`, `projections` and `webhooks` exports
// componentize-js wires to the world's exported interfaces. Bundled only into components (the `kubewasm:controller/*` modules exist only
// there); `kubewasm-js build` generates the entry:
//
//   import * as app from './app.js';
//   import { exportsFor } from '@kubewasm/sdk/guest';
//   export const { plugin, reconciler, access, release, views, composite, clusters, projections, webhooks } = exportsFor(app);
//
// Every plugin exports all of them (one set of bindings serves both kinds of plugin): a plain
// controller answers `describe-composition` with none and the host calls its `reconciler`; a
// declarative one (a `Composite`) answers its composition and the host calls `composite`'s
// `customize`, `sync` and `finalize`. An export of the other kind traps if called.
//
// WIT conventions of componentize-js used here: option = undefined, u64 = BigInt, enums are
// their case names, variants are { tag, val }, a failed import throws an error whose `payload`
// is the WIT error, and whatever an export with a result type throws becomes its `err` (an
// Error's `payload` if it has one, else the thrown value itself). So a `KubewasmError` (the
// controller's answer) is thrown as a plain `{ code, message }`, and anything else (a bug) as
// an `err` that cannot be lowered, which aborts the instance: a trap, as in every SDK.

import { get, listControlled, listObjects } from 'kubewasm:controller/cache@0.1.6';
import * as client from 'kubewasm:controller/client@0.1.6';
import { publish } from 'kubewasm:controller/events@0.1.6';
import * as fleet from 'kubewasm:controller/fleet@0.1.6';
import { emit } from 'kubewasm:controller/log@0.1.6';

import { cut } from './bounds.js';
import { MAX_REQUEUE_MS } from './core.js';
import { KubewasmError } from './errors.js';
import { findController, Refused, Runner } from './runtime.js';
import { Denied } from './webhook.js';

function call(fn, ...args) {
  try {
    return fn(...args);
  } catch (e) {
    const err = e?.payload;
    if (err && typeof err === 'object' && typeof err.code === 'string') throw KubewasmError.fromCode(err.code, String(err.message ?? ''));
    throw e;
  }
}

/** The WIT imports as the host a `Context` calls. */
export const wasmHost = {
  cacheGet: (resource, namespace, name) => call(get, resource, namespace, name),
  cacheList: (resource, namespace, labelSelector) => call(listObjects, resource, namespace, labelSelector),
  cacheListControlled: (resource, namespace, owner) => call(listControlled, resource, namespace, owner),
  apply: (obj, force) => call(client.apply, obj, force),
  applyStatus: (obj, force) => call(client.applyStatus, obj, force),
  create: (obj) => call(client.create, obj),
  update: (obj) => call(client.update, obj),
  updateStatus: (obj) => call(client.updateStatus, obj),
  patch: (resource, namespace, name, patchType, body) => call(client.patch, resource, namespace, name, patchType, body),
  delete: (resource, namespace, name) => call(client.delete, resource, namespace, name),
  publishEvent: (event) => call(publish, event),
  log: (level, message, fields) => emit(level, message, fields),
  currentCluster: () => fleet.current(),
  clusters: () => fleet.clusters(),
  fleetGet: (cluster, resource, namespace, name) => call(fleet.get, cluster, resource, namespace, name),
  fleetList: (cluster, resource, namespace, labelSelector) => call(fleet.listObjects, cluster, resource, namespace, labelSelector),
  fleetApply: (cluster, obj, force) => call(fleet.apply, cluster, obj, force),
  fleetApplyStatus: (cluster, obj, force) => call(fleet.applyStatus, cluster, obj, force),
  fleetCreate: (cluster, obj) => call(fleet.create, cluster, obj),
  fleetUpdate: (cluster, obj) => call(fleet.update, cluster, obj),
  fleetUpdateStatus: (cluster, obj) => call(fleet.updateStatus, cluster, obj),
  fleetPatch: (cluster, resource, namespace, name, patchType, body) => call(fleet.patch, cluster, resource, namespace, name, patchType, body),
  fleetDelete: (cluster, resource, namespace, name) => call(fleet.delete, cluster, resource, namespace, name),
};

function witManifest(spec) {
  const { memoryBytes, deadlineMs } = spec.limits ?? {};
  return {
    name: spec.name,
    version: spec.version,
    primary: spec.primary,
    primarySelector: spec.primarySelector,
    owns: spec.owns,
    watches: spec.watches.map((w) => ({ resource: w.resource, mapping: w.mapping, labelSelector: w.labelSelector })),
    finalizer: spec.finalizer,
    resyncSeconds: spec.resyncSeconds,
    maxConcurrency: spec.maxConcurrency,
    limits: { deadlineMs, memoryBytes: memoryBytes === undefined ? undefined : BigInt(memoryBytes) },
    permissions: spec.permissions.map((p) => ({
      resource: p.resource,
      subresource: p.subresource,
      verbs: p.verbs,
      namespaces: p.namespaces,
    })),
  };
}

/** Whole milliseconds (or Infinity) as the WIT's u64, saturating. */
function witMillis(ms) {
  const value = ms === Infinity ? MAX_REQUEUE_MS : BigInt(ms);
  return value > MAX_REQUEUE_MS ? MAX_REQUEUE_MS : value;
}

function witAction(action) {
  if (action.requeueAfterMs === undefined) return { tag: 'done' };
  return { tag: 'requeue-after', val: witMillis(action.requeueAfterMs) };
}

/** The runner's sync response as the WIT `sync-response`: only `resyncAfter` changes, to a u64. */
function witSyncResponse(response) {
  return { ...response, resyncAfter: response.resyncAfter === undefined ? undefined : witMillis(response.resyncAfter) };
}

function witError(e) {
  // A plain object, not an Error: componentize-js makes a thrown non-Error value the `err`.
  return { code: e.code, message: e.message };
}

/**
 * What a bug throws out of an export, its stack in the host log first: an Error whose payload's
 * code is no `error-code`, so componentize-js (0.23, which gives JavaScript no other way to
 * trap) fails to lower it and aborts — a trap, whatever the thrown value looked like (an Error
 * that happened to carry a valid `code` would otherwise pass for an answer). `map-related`,
 * without a result type, aborts on anything thrown.
 */
function trap(e) {
  console.error(e instanceof Error && e.stack ? `${e.name}: ${e.message}\n${e.stack}` : `uncaught: ${String(e)}`);
  const error = e instanceof Error ? e : new Error(String(e));
  error.payload = { code: 'uncaught-exception', message: error.message };
  return error;
}

/**
 * Runs an export with a result type: a `KubewasmError` becomes its `err`, anything else thrown
 * traps.
 */
function answer(run) {
  try {
    return run();
  } catch (e) {
    throw e instanceof KubewasmError ? witError(e) : trap(e);
  }
}

/** A `Denied` as the WIT `denial`, a plain object (see `witError`). */
function witDenial(denied) {
  return { code: denied.code, message: denied.message, warnings: denied.warnings };
}

/** Runs a webhook export: a `Denied` becomes its `err` (as `refusal` makes it), anything else thrown traps. */
function refusing(run, refusal) {
  try {
    return run();
  } catch (e) {
    throw e instanceof Denied ? refusal(e) : trap(e);
  }
}

/** The world's exports for the controller an author's module exports. */
export function exportsFor(mod, host = wasmHost) {
  const runner = new Runner(findController(mod), host);
  const call = (method, request) => answer(() => witAction(runner.call(method, request.key, request.object, request.retries)));
  return {
    plugin: {
      describe(settings) {
        try {
          return witManifest(runner.describe(settings));
        } catch (e) {
          throw e instanceof Refused ? e.message : cut(`describe: ${e}`);
        }
      },
    },
    reconciler: {
      reconcile: (request) => call('reconcile', request),
      finalize: (request) => call('finalize', request),
      mapRelated: (resource, object) => {
        try {
          return runner.mapRelated(resource, object);
        } catch (e) {
          throw trap(e);
        }
      },
    },
    // Rules and kinds are already in the WIT `rule` and `gvk` shapes.
    access: { rules: () => runner.rules() },
    release: { released: (request) => call('released', request) },
    views: { metadataOnly: () => runner.metadataOnly() },
    composite: {
      describeComposition: () => runner.describeComposition(),
      customize: (parent) => answer(() => runner.customize(parent)),
      sync: (request) => answer(() => witSyncResponse(runner.sync('sync', request))),
      finalize: (request) => answer(() => witSyncResponse(runner.sync('finalize', request))),
    },
    // The scope is already in the WIT `cluster-scope` shape.
    clusters: { scope: () => runner.scope() },
    projections: { fields: () => runner.projections() },
    // The declaration is already in the WIT shape; a `Denied` is the `err` of the answer.
    webhooks: {
      declare: () => runner.hooks(),
      validate: (request) => refusing(() => runner.validate(request), witDenial),
      mutate: (request) => refusing(() => runner.mutate(request), witDenial),
      convert: (objects, desiredApiVersion) =>
        refusing(
          () => runner.convert(objects, desiredApiVersion),
          (d) => d.message,
        ),
    },
  };
}
