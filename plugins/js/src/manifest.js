// The manifest builder: what a controller reconciles and what it needs.
//
//   new Manifest('sample-controller', '0.1.0')
//     .primary(FOO)
//     .owns(kinds.DEPLOYMENT)
//     .permission(kinds.DEPLOYMENT, ['create', 'patch'])
//     .statusPermission(FOO, ['patch'])
//     .maxConcurrency(2)
//
// A hub that writes into member clusters (contract 0.1.4) says which it reaches:
//
//   new Manifest('fleet-propagation', '0.1.0').primary(kinds.CONFIG_MAP).reachMembers(Members.matching('env=prod'))
//
// Each builder method returns the manifest, so calls chain. What was built is in `.spec`, shaped
// like the WIT `manifest` record (memoryBytes as a number; the glue makes it the u64 BigInt the
// WIT wants) plus `rules`, the `access` export's answer, `metadataOnly`, the `views` export's,
// `readsFields` (`{ resource, fields }` with dotted paths), the `projections` export's,
// `composition`, a declarative plugin's `composite.describe-composition` answer (`.child()`,
// `.childSelector()`), and `scope`, the `clusters` export's (`.serveMembers()`, `.serveLocal()`,
// `.reachMembers()`), and `webhooks` (WIT `admission-hook`s) and `conversions` (kinds), the
// `webhooks` export's `declare` answer (`.webhook()`, `.converts()`); what the plugin describes
// to the host is `.forHost()`.
//
// Everything declared is what the plugin's identity needs: the host refuses to start a plugin
// whose ServiceAccount RBAC does not grant it, and `kubewasm rbac` prints Roles that do.

import { ChildSelector, UpdateStrategy, Verb, sameGvk } from './core.js';
import { CLUSTER_ROLE } from './kinds.js';

/** How an event on a watched object becomes keys of primary objects (the WIT `mapping` variant). */
export const Mapping = Object.freeze({
  /** The object's owners of the primary kind, in its namespace. */
  ownerReferences: () => ({ tag: 'owner-references' }),
  /** The primary named by the value of this label on the object, in its namespace. */
  label: (key) => ({ tag: 'label', val: key }),
  /** The controller's `mapRelated` decides. */
  mapRelated: () => ({ tag: 'map-related' }),
});

/**
 * A choice of member clusters (contract 0.1.4; the WIT `clusters.members` variant): the clusters
 * a host engages besides its own. `Members.none`, `Members.all` (every engaged member) or
 * `Members.matching('env=prod,region in (eu,us)')` (the members whose labels match a Kubernetes
 * label selector, at most 4096 bytes; the host refuses the plugin for an invalid one, naming the
 * field).
 */
export const Members = Object.freeze({
  none: Object.freeze({ tag: 'none' }),
  all: Object.freeze({ tag: 'all' }),
  /** The engaged members whose labels match this label selector. */
  matching(selector) {
    if (typeof selector !== 'string') throw new TypeError(`a member selector is a label selector string, not ${describe(selector)}`);
    return Object.freeze({ tag: 'matching', val: selector });
  },
});

function describe(value) {
  return Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value === 'object' ? JSON.stringify(value) : typeof value;
}

/** A `Members` value, checked: the builder's argument is what the WIT variant gets. */
function members(value) {
  const ok = value?.tag === 'none' || value?.tag === 'all' || (value?.tag === 'matching' && typeof value.val === 'string');
  if (!ok) throw new TypeError(`expected Members.none, Members.all or Members.matching(selector), not ${describe(value)}`);
  return value;
}

/** What the `clusters` export answers for a plugin that says nothing: the host's own cluster only. */
export const DEFAULT_SCOPE = Object.freeze({ serveLocal: true, serve: Members.none, reach: Members.none });

/** The verbs a rule may name: RBAC's, without "*". */
const RBAC_VERBS = [...Verb.values, 'deletecollection', 'bind', 'escalate', 'impersonate', 'approve', 'sign', 'use'];

/** Parses a list of verbs, or one. */
function each(list, parse) {
  return (typeof list === 'string' ? [list] : [...list]).map(parse);
}

function rbacVerb(value) {
  const verb = String(value).toLowerCase();
  if (!RBAC_VERBS.includes(verb)) throw new TypeError(`${JSON.stringify(value)} is not an RBAC verb (one of: ${RBAC_VERBS.join(', ')})`);
  return verb;
}

/** Whether a permission on the resource itself (any version) grants `verb`. */
function grants(permissions, resource, verb) {
  return permissions.some(
    (p) => p.resource.group === resource.group && p.resource.kind === resource.kind && p.subresource === undefined && p.verbs.includes(verb),
  );
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
      metadataOnly: [],
      readsFields: [],
      finalizer: undefined,
      resyncSeconds: undefined,
      maxConcurrency: 1,
      limits: { deadlineMs: undefined, memoryBytes: undefined },
      permissions: [],
      rules: [],
      composition: { children: [], selector: ChildSelector.GENERATED },
      scope: { ...DEFAULT_SCOPE },
      webhooks: [],
      conversions: [],
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

  /**
   * A declarative controller's (`Composite`'s) child kind: an `owns` kind (added once) whose
   * objects the host creates, updates per `strategy` and deletes as `sync` answers.
   * `UpdateStrategy.ON_DELETE` (the default) never updates an existing child, `RECREATE` deletes
   * it so that it is created again as desired, `IN_PLACE` server-side applies the desired state
   * over it. Declaring a kind again replaces its strategy. Ignored by a plain `Controller`
   * (beyond `owns`).
   */
  child(resource, strategy = UpdateStrategy.ON_DELETE) {
    const rule = { resource, updateStrategy: UpdateStrategy.parse(strategy) };
    if (!this.spec.owns.some((g) => sameGvk(g, resource))) this.spec.owns.push(resource);
    const { children } = this.spec.composition;
    const i = children.findIndex((r) => sameGvk(r.resource, resource));
    if (i < 0) children.push(rule);
    else children[i] = rule;
    return this;
  }

  /**
   * Which objects are a declarative controller's children: by default
   * (`ChildSelector.GENERATED`) the host labels each child with its parent's uid and selects by
   * that label; `PARENT_SPEC_SELECTOR` selects by the parent's `spec.selector` and adopts the
   * orphans it matches.
   */
  childSelector(selector) {
    this.spec.composition.selector = ChildSelector.parse(selector);
    return this;
  }

  /** React to events on another resource (by default through `mapRelated`). */
  watches(resource, mapping = Mapping.mapRelated(), labelSelector = undefined) {
    this.spec.watches.push({ resource, mapping, labelSelector });
    return this;
  }

  /**
   * Hands the plugin only `apiVersion`, `kind` and `metadata` of this kind's objects (cache reads
   * and `mapRelated`), so the host may cache just their metadata. It must be an `owns` kind or the
   * kind of a `watches` entry; writes are unaffected.
   */
  metadataOnly(resource) {
    this.spec.metadataOnly.push(resource);
    return this;
  }

  /**
   * Hands the plugin only these fields of this kind's objects (the primary kind, an `owns` kind
   * or the kind of a `watches` entry; contract 0.1.5), each a dotted path from the object's top:
   * `readsFields(kinds.DEPLOYMENT, 'status.availableReplicas')`. Every object of the kind the
   * plugin is handed — the one it reconciles, cache reads, `mapRelated`'s, and the answers of its
   * writes — carries `apiVersion`, `kind`, `metadata` and, of the rest, only these fields: the
   * plugin does not parse what it never reads. A path through a list keeps the list; a field
   * whose name holds a dot is named by its parent. `ctx.update` of the kind is then refused (the
   * object lacks fields): apply or patch it.
   */
  readsFields(resource, ...fields) {
    const entry = this.spec.readsFields.find((p) => sameGvk(p.resource, resource));
    if (entry) entry.fields.push(...fields);
    else this.spec.readsFields.push({ resource, fields: [...fields] });
    return this;
  }

  /**
   * Also reconciles the primaries of these member clusters, each where it lives: the reads,
   * writes and Events of a call act in its object's cluster (`ctx.cluster()` names it). The
   * plugin's identity needs the same RBAC in each.
   */
  serveMembers(value) {
    this.spec.scope.serve = members(value);
    return this;
  }

  /** Whether it reconciles the primaries of the host's own cluster (yes, unless said here). */
  serveLocal(serve) {
    this.spec.scope.serveLocal = Boolean(serve);
    return this;
  }

  /**
   * Reads and writes in these member clusters through `ctx.inCluster(name)`, reconciling nothing
   * there: a hub writing into members. When one is engaged, every primary is reconciled once (so
   * that the hub writes into the new member).
   */
  reachMembers(value) {
    this.spec.scope.reach = members(value);
    return this;
  }

  /**
   * Serves an admission hook (contract 0.1.6), answered by the controller's `validate` or
   * `mutate`: `.webhook(Webhook.validating('validate-cronjob').kind(CRONJOB))`.
   */
  webhook(hook) {
    this.spec.webhooks.push(hook.hook);
    return this;
  }

  /**
   * Serves the conversion webhook of this custom resource (its CRD's versions; the version given
   * is ignored), answered by the controller's `convert` (contract 0.1.6).
   */
  converts(resource) {
    this.spec.conversions.push(resource);
    return this;
  }

  /**
   * The finalizer the host adds to primaries so that `finalize` runs before they go. The host
   * adds and removes it with a patch made as the plugin: the manifest grants `patch` on the
   * primary for it (`forHost` adds the grant when no permission has it).
   */
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
    this.spec.permissions.push({ resource, subresource, verbs: each(verbList, Verb.parse), namespaces: [...namespaces] });
    return this;
  }

  /**
   * Grants `verbs` on the named objects of a resource only (RBAC's `resourceNames`), in
   * `namespaces` (empty for every namespace). Reads of such objects go to the API server.
   */
  grantNamed(resource, verbList, namespaces = [], names = []) {
    return this.rule(resource, undefined, verbList, namespaces, names);
  }

  /**
   * Lets the plugin create RoleBindings and ClusterRoleBindings to the ClusterRole `name` without
   * holding its permissions itself (RBAC's `bind` verb), e.g. `edit` for a namespace-onboarding
   * controller.
   */
  bindClusterRole(name) {
    return this.rule(CLUSTER_ROLE, undefined, ['bind'], [], [name]);
  }

  /**
   * The most general grant: any subresource, any RBAC verb (get ... delete, deletecollection,
   * bind, escalate, impersonate, approve, sign, use), namespaces and object names (empty for all).
   */
  rule(resource, subresource, verbList, namespaces = [], names = []) {
    this.spec.rules.push({ resource, subresource, verbs: each(verbList, rbacVerb), namespaces: [...namespaces], resourceNames: [...names] });
    return this;
  }

  /**
   * The owned kinds, each as `[gvk, mayDelete]`: whether the manifest grants `delete` on it. What
   * the default `Controller.released` passes to `Context.deleteControlled`.
   */
  owned() {
    return this.spec.owns.map((resource) => [resource, grants(this.spec.permissions, resource, 'delete')]);
  }

  /**
   * The manifest as the plugin describes itself to the host: the spec, plus a `patch` grant on
   * the primary when a finalizer is set and no permission has one (the host refuses a finalizer
   * without it). Done here rather than in `finalizer()`, so the order of the builder calls does
   * not matter.
   */
  forHost() {
    const { spec } = this;
    if (spec.finalizer === undefined || spec.primary === undefined || grants(spec.permissions, spec.primary, 'patch')) return spec;
    return { ...spec, permissions: [...spec.permissions, { resource: spec.primary, subresource: undefined, verbs: ['patch'], namespaces: [] }] };
  }
}
