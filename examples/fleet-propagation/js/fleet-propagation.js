// Fleet propagation, in JavaScript: a ConfigMap of the hub (the host's own cluster) labelled
// `fleet.kubewasm.io/propagate=true` is copied, data and all, into the same namespace of every
// member cluster whose labels match the `members` setting (`env=prod` by default). A copy is
// labelled `fleet.kubewasm.io/source=<name>`; the finalizer deletes the copies before the source
// goes. A member engaged later gets its copies at once (the host reconciles every source again when
// a member the plugin reaches is engaged); one that does not answer is tried again in 30 s without
// holding up the others.

import { Action, Controller, EventType, KubewasmError, Manifest, Members, NotFound, Unavailable, kinds, objects as o } from '@kubewasm/sdk';

export const PROPAGATE = 'fleet.kubewasm.io/propagate';
export const SOURCE = 'fleet.kubewasm.io/source';
export const FINALIZER = 'fleet.kubewasm.io/copies';
/** How soon members that did not answer are tried again, in milliseconds. */
export const RETRY_MS = 30_000;

/** The copy of `source` a member gets. */
export function copyOf(source) {
  const copy = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: o.name(source), namespace: o.namespace(source), labels: { [SOURCE]: o.name(source) } },
  };
  for (const field of ['data', 'binaryData', 'immutable']) if (source[field] !== undefined && source[field] !== null) copy[field] = source[field];
  return copy;
}

/**
 * Runs `each` in every member the plugin reaches now: `{ done, unavailable }`, the members it ran
 * in and those that did not answer. Any other failure fails the call, naming the member.
 */
function inMembers(ctx, each) {
  const done = [];
  const unavailable = [];
  for (const cluster of ctx.clusters()) {
    try {
      each(ctx.inCluster(cluster.name));
      done.push(cluster.name);
    } catch (e) {
      if (!(e instanceof KubewasmError)) throw e;
      if (!(e instanceof Unavailable)) throw KubewasmError.fromCode(e.code, `cluster ${cluster.name}: ${e.message}`);
      ctx.warn(`cluster ${cluster.name} did not answer: ${e.message}`);
      unavailable.push(cluster.name);
    }
  }
  return { done, unavailable };
}

export default class FleetPropagation extends Controller {
  // The member clusters to copy into: a label selector over their labels.
  static settingsDefaults = { members: 'env=prod' };

  manifest() {
    return new Manifest('fleet-propagation', '0.1.0')
      .primary(kinds.CONFIG_MAP)
      .primarySelector(`${PROPAGATE}=true`)
      .reachMembers(Members.matching(this.settings.members))
      .finalizer(FINALIZER)
      .permission(kinds.CONFIG_MAP, ['create', 'patch', 'delete']);
  }

  reconcile(source, ctx) {
    const copy = copyOf(source);
    const { done, unavailable } = inMembers(ctx, (member) => member.apply(copy));
    ctx.event(source, EventType.NORMAL, 'Propagated', 'Reconcile', `copied to ${done.length} member cluster(s): ${done.join(',')}`);
    return unavailable.length > 0 ? Action.requeueAfter(RETRY_MS) : Action.done();
  }

  finalize(source, ctx) {
    const { unavailable } = inMembers(ctx, (member) => {
      try {
        member.delete(kinds.CONFIG_MAP, o.namespace(source), o.name(source));
      } catch (e) {
        if (!(e instanceof NotFound)) throw e;
      }
    });
    return unavailable.length > 0 ? Action.requeueAfter(RETRY_MS) : Action.done();
  }
}
