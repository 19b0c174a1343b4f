// The manifest builder: what a controller reconciles and what it needs.
//
//   new Manifest('sample-controller', '0.1.0')
//     .primary(FOO)
//     .owns(kinds.DEPLOYMENT)
//     .permission(kinds.DEPLOYMENT, ['create', 'patch'])
//     .statusPermission(FOO, ['patch'])
//     .maxConcurrency(2)
//
// Each method returns the manifest, so calls chain. What was built is in `.spec`, shaped like the
// WIT `manifest` record (memoryBytes as a number; the glue makes it the u64 BigInt the WIT wants).

import { Verb } from './core.js';

/** How an event on a watched object becomes keys of primary objects (the WIT `mapping` variant). */
export const Mapping = Object.freeze({
  /** The object's owners of the primary kind, in its namespace. */
  ownerReferences: () => ({ tag: 'owner-references' }),
  /** The primary named by the value of this label on the object, in its namespace. */
  label: (key) => ({ tag: 'label', val: key }),
  /** The controller's `mapRelated` decides. */
  mapRelated: () => ({ tag: 'map-related' }),
});

function verbs(list) {
  return (typeof list === 'string' ? [list] : [...list]).map(Verb.parse);
}

/**
 * What a controller reconciles and needs. Defaults: one worker, and the host's deadline, memory
 * cap (64 MiB) and resync. A JS plugin instance holds about 9 MiB of linear memory after
 * describing itself; ask for more (`.limits({ memoryBytes })`) when a reconcile holds many or
 * large objects at once.
 */
export class Manifest {
  constructor(name, version) {
    this.spec = {
      name,
      version,
      primary: undefined,
      primarySelector: undefined,
      owns: [],
      watches: [],
      finalizer: undefined,
      resyncSeconds: undefined,
      maxConcurrency: 1,
      limits: { deadlineMs: undefined, memoryBytes: undefined },
      permissions: [],
    };
  }

  /** The reconciled resource. */
  primary(resource) {
    this.spec.primary = resource;
    return this;
  }

  /** Reconcile only primaries matching this label selector. */
  primarySelector(selector) {
    this.spec.primarySelector = selector;
    return this;
  }

  /** Objects this controller creates with an owner reference to the primary. */
  owns(resource) {
    this.spec.owns.push(resource);
    return this;
  }

  /** React to events on another resource (by default through `mapRelated`). */
  watches(resource, mapping = Mapping.mapRelated(), labelSelector = undefined) {
    this.spec.watches.push({ resource, mapping, labelSelector });
    return this;
  }

  /** The finalizer the host adds to primaries so that `finalize` runs before they go. */
  finalizer(name) {
    this.spec.finalizer = name;
    return this;
  }

  /** Reconcile every primary at least this often, in seconds; 0 disables resync. */
  resyncSeconds(seconds) {
    this.spec.resyncSeconds = Math.trunc(seconds);
    return this;
  }

  maxConcurrency(workers) {
    this.spec.maxConcurrency = workers;
    return this;
  }

  /** Asks for other limits; undefined keeps the host default (5000 ms; 64 MiB). */
  limits({ deadlineMs = undefined, memoryBytes = undefined } = {}) {
    this.spec.limits = { deadlineMs, memoryBytes };
    return this;
  }

  /** Grants `verbs` on a resource (in `namespaces`, or every namespace). */
  permission(resource, verbList, namespaces = []) {
    return this.grant(resource, undefined, verbList, namespaces);
  }

  /** Grants `verbs` on a resource's status subresource. */
  statusPermission(resource, verbList, namespaces = []) {
    return this.grant(resource, 'status', verbList, namespaces);
  }

  /** The general form: a resource, an optional subresource, verbs and namespaces. */
  grant(resource, subresource, verbList, namespaces = []) {
    this.spec.permissions.push({ resource, subresource, verbs: verbs(verbList), namespaces: [...namespaces] });
    return this;
  }
}
