// Types of @kubewasm/sdk. The WIT's own types come from types/wit/ (generated from the WIT by
// `npm run gen-types`), so the SDK's types follow the contract: a WIT change that breaks them
// fails type checking.
/// <reference path="./types/wit/controller.d.ts" />

import type * as wit from 'kubewasm:controller/types@0.1.6';
import type * as witPlugin from 'kubewasm:controller/plugin@0.1.6';
import type * as witAccess from 'kubewasm:controller/access@0.1.6';
import type * as witClient from 'kubewasm:controller/client@0.1.6';
import type * as witEvents from 'kubewasm:controller/events@0.1.6';
import type * as witLog from 'kubewasm:controller/log@0.1.6';
import type * as witComposite from 'kubewasm:controller/composite@0.1.6';
import type * as witClusters from 'kubewasm:controller/clusters@0.1.6';
import type * as witFleet from 'kubewasm:controller/fleet@0.1.6';
import type * as witWebhooks from 'kubewasm:controller/webhooks@0.1.6';
import type * as k8s from './k8s.js';

// --- values -----------------------------------------------------------------------------------

/** A Kubernetes kind: group ("" for core), version, kind. */
export type Gvk = Readonly<wit.Gvk>;
/**
 * A kind whose objects have the type `T`: the `kinds` constants are `Kind`s of the generated
 * types of `@kubewasm/sdk/k8s`, so `ctx.get(kinds.DEPLOYMENT, ns, name)` is a `Deployment`. A
 * plain `Gvk` is a `Kind` of `KubeObject` (or of the type given: `ctx.get<Foo>(FOO, ns, name)`).
 */
export type Kind<T extends KubeObject = KubeObject> = Gvk & { readonly __object?: T };
/** An object's namespace (undefined when cluster-scoped) and name. */
export type ObjectKey = Readonly<wit.ObjectKey>;
export type VerbName = witPlugin.Verb;
/** The verbs a rule may name: RBAC's, without "*". */
export type RbacVerbName = VerbName | 'deletecollection' | 'bind' | 'escalate' | 'impersonate' | 'approve' | 'sign' | 'use';
export type EventTypeName = witEvents.EventType;
export type PatchTypeName = witClient.PatchType;
export type LogLevelName = witLog.Level;
export type ErrorCodeName = wit.ErrorCode;
/** How an event on a watched object becomes primary keys (the WIT `mapping` variant). */
export type MappingValue = witPlugin.Mapping;
/** What the host does with an existing child whose desired state changed. */
export type UpdateStrategyName = witComposite.UpdateStrategy;
/** Which objects are a parent's children. */
export type ChildSelectorName = witComposite.ChildSelector;
/** A declarative controller's child kinds and selector: what `composite.describe-composition` answers. */
export type Composition = witComposite.Composition;
/** A choice of member clusters (the WIT `members` variant): `Members.none`, `Members.all` or `Members.matching(selector)`. */
export type MembersValue = Readonly<witClusters.Members>;
/** Which clusters a plugin serves and reaches: what the `clusters` export answers. */
export interface ClusterScope {
  /** Whether it reconciles the primaries of the host's own cluster. */
  serveLocal: boolean;
  /** The members whose primaries it reconciles too, each where it lives. */
  serve: MembersValue;
  /** The members it only reads and writes in, through `ctx.inCluster(name)`. */
  reach: MembersValue;
}
/** A member cluster the plugin serves or reaches, as `ctx.clusters()` lists it. */
export interface Cluster {
  /** At most 253 bytes. */
  name: string;
  labels: Record<string, string>;
}

/** A Kubernetes object: apiVersion, kind, metadata, and the rest (parsed JSON). */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [field: string]: any;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  deletionTimestamp?: string;
  [field: string]: any;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
  [field: string]: any;
}

export function gvk(group: string, version: string, kind: string): Gvk;
export function gvkFromApiVersion(apiVersion: string, kind: string): Gvk;
export function gvkOf(obj: KubeObject): Gvk;
export function apiVersion(resource: Gvk): string;
export function gvkString(resource: Gvk): string;
export function sameGvk(a: Gvk, b: Gvk): boolean;
export function objectKey(namespace: string | undefined | null, name: string): ObjectKey;
export function keyString(key: ObjectKey): string;

/** What the host does with the key after a successful reconcile, finalize or released. */
export class Action {
  private constructor(requeueAfterMs: number | undefined);
  readonly requeueAfterMs: number | undefined;
  readonly isDone: boolean;
  /** Nothing more until something changes (or the periodic resync). */
  static done(): Action;
  /**
   * Reconcile again after `ms` milliseconds even if nothing changes (rounded up to a whole
   * millisecond; under 1000 it is rate limited like a failure).
   */
  static requeueAfter(ms: number): Action;
}
export const DONE: Action;

interface WitEnum<T extends string> {
  readonly values: readonly T[];
  parse(value: string): T;
}
export const Verb: WitEnum<VerbName> & {
  GET: 'get';
  LIST: 'list';
  WATCH: 'watch';
  CREATE: 'create';
  UPDATE: 'update';
  PATCH: 'patch';
  DELETE: 'delete';
};
export const EventType: WitEnum<EventTypeName> & { NORMAL: 'normal'; WARNING: 'warning' };
export const PatchType: WitEnum<PatchTypeName> & { MERGE: 'merge'; JSON: 'json'; STRATEGIC: 'strategic' };
export const LogLevel: WitEnum<LogLevelName> & { TRACE: 'trace'; DEBUG: 'debug'; INFO: 'info'; WARN: 'warn'; ERROR: 'error' };
export const UpdateStrategy: WitEnum<UpdateStrategyName> & { ON_DELETE: 'on-delete'; RECREATE: 'recreate'; IN_PLACE: 'in-place' };
export const ChildSelector: WitEnum<ChildSelectorName> & { GENERATED: 'generated'; PARENT_SPEC_SELECTOR: 'parent-spec-selector' };
export const ErrorCode: WitEnum<ErrorCodeName> & {
  NOT_FOUND: 'not-found';
  ALREADY_EXISTS: 'already-exists';
  CONFLICT: 'conflict';
  FORBIDDEN: 'forbidden';
  INVALID: 'invalid';
  UNAVAILABLE: 'unavailable';
  OTHER: 'other';
};

// --- errors -----------------------------------------------------------------------------------

/** A failed host call or reconcile: `code` to branch on, `message` for humans. */
export class KubewasmError extends Error {
  constructor(message: string, code?: ErrorCodeName);
  readonly code: ErrorCodeName;
  static fromCode(code: ErrorCodeName, message: string): KubewasmError;
}
/** The object does not exist. */
export class NotFound extends KubewasmError {
  constructor(message: string);
  readonly code: 'not-found';
}
/** A create found an object of that name already there. */
export class AlreadyExists extends KubewasmError {
  constructor(message: string);
  readonly code: 'already-exists';
}
/** Another actor changed the object first: re-read, then retry (thrown from reconcile: requeued without a Warning Event). */
export class Conflict extends KubewasmError {
  constructor(message: string);
  readonly code: 'conflict';
}
/** The manifest does not grant this access, or Kubernetes RBAC refused it. */
export class Forbidden extends KubewasmError {
  constructor(message: string);
  readonly code: 'forbidden';
}
/** A malformed request: bad JSON, a missing name, a bad selector, an unserved resource... */
export class Invalid extends KubewasmError {
  constructor(message: string);
  readonly code: 'invalid';
}
/** The API server could not be reached, throttled, or this host is a standby. Retry later. */
export class Unavailable extends KubewasmError {
  constructor(message: string);
  readonly code: 'unavailable';
}
/** Anything else; the message says what. */
export class Other extends KubewasmError {
  constructor(message: string);
  readonly code: 'other';
}
/** Thrown from a controller's constructor to refuse loading, saying what is wrong with the settings. */
export class SettingsError extends Error {
  constructor(message: string);
}

// --- the manifest -----------------------------------------------------------------------------

export const Mapping: {
  /** The object's owners of the primary kind, in its namespace. */
  ownerReferences(): MappingValue;
  /** The primary named by the value of this label on the object, in its namespace. */
  label(key: string): MappingValue;
  /** The controller's `mapRelated` decides. */
  mapRelated(): MappingValue;
};

/**
 * A choice of member clusters (contract 0.1.4): the clusters a host engages besides its own. A
 * selector is a Kubernetes label selector over the members' labels, at most 4096 bytes (the host
 * refuses the plugin for an invalid one).
 */
export const Members: {
  /** None. */
  readonly none: MembersValue;
  /** Every engaged member. */
  readonly all: MembersValue;
  /** The engaged members whose labels match this label selector, e.g. 'env=prod,region in (eu,us)'. */
  matching(selector: string): MembersValue;
};

/** A grant the WIT `permission` record cannot hold (any RBAC verb, object names): the WIT `access` rule. */
export interface Rule extends Omit<witAccess.Rule, 'verbs'> {
  verbs: RbacVerbName[];
}

/**
 * The plain data of a manifest: the WIT `manifest` record, with `memoryBytes` as a number, plus
 * `rules` (the `access` export's answer), `metadataOnly` (the `views` export's), `readsFields`
 * (the `projections` export's),
 * `composition` (a declarative controller's `describe-composition` answer), `scope` (the
 * `clusters` export's), and `webhooks` and `conversions` (the `webhooks` export's `declare`).
 */
export interface ManifestSpec extends Omit<witPlugin.Manifest, 'limits' | 'primary'> {
  primary: Gvk | undefined;
  limits: { deadlineMs?: number; memoryBytes?: number };
  rules: Rule[];
  /** Owned or watched kinds the plugin is handed only the metadata of. */
  metadataOnly: witPlugin.Manifest['owns'];
  /** Kinds the plugin is handed only these dotted fields of (`readsFields()`): the `projections` export's answer. */
  readsFields: { resource: Gvk; fields: string[] }[];
  /** The child kinds (`child()`) and selector (`childSelector()`); used by a `Composite` only. */
  composition: Composition;
  /** The clusters it serves and reaches (`serveMembers()`, `serveLocal()`, `reachMembers()`). */
  scope: ClusterScope;
  /** Its admission hooks (`webhook()`). */
  webhooks: AdmissionHook[];
  /** The custom resources it converts (`converts()`). */
  conversions: Gvk[];
}

/** What a controller reconciles and needs. Start with `new Manifest(name, version)`, then chain. */
export class Manifest {
  constructor(name: string, version: string);
  readonly spec: ManifestSpec;
  /** The reconciled resource. */
  primary(resource: Gvk): this;
  /** Reconcile only primaries matching this label selector. */
  primarySelector(selector: string): this;
  /** Objects this controller creates with an owner reference to the primary. */
  owns(resource: Gvk): this;
  /**
   * A declarative controller's child kind: an `owns` kind (added once) that the host creates,
   * updates per `strategy` (default `UpdateStrategy.ON_DELETE`: never updated; `RECREATE`;
   * `IN_PLACE`: server-side applied) and deletes as `sync` answers. Again for a kind replaces its
   * strategy.
   */
  child(resource: Gvk, strategy?: UpdateStrategyName): this;
  /** Which objects are a parent's children: `GENERATED` (the default, a label with the parent's uid) or `PARENT_SPEC_SELECTOR`. */
  childSelector(selector: ChildSelectorName): this;
  /** React to events on another resource (by default through `mapRelated`). */
  watches(resource: Gvk, mapping?: MappingValue, labelSelector?: string): this;
  /**
   * Hands the plugin only `apiVersion`, `kind` and `metadata` of this kind's objects (cache reads
   * and `mapRelated`), so the host may cache just their metadata. It must be an `owns` kind or the
   * kind of a `watches` entry; writes are unaffected.
   */
  metadataOnly(resource: Gvk): this;
  /**
   * Hands the plugin only these fields of this kind's objects (the primary kind, an `owns` kind
   * or the kind of a `watches` entry; contract 0.1.5), each a dotted path:
   * `readsFields(kinds.DEPLOYMENT, 'status.availableReplicas')`. Every object of the kind it is
   * handed (the one it reconciles, cache reads, `mapRelated`'s, its writes' answers) carries
   * `apiVersion`, `kind`, `metadata` and only these fields of the rest. `ctx.update` of the kind
   * is then refused: apply or patch it.
   */
  readsFields(resource: Gvk, ...fields: string[]): this;
  /** Serves an admission hook (contract 0.1.6), answered by the controller's `validate` or `mutate`. */
  webhook(hook: Webhook): this;
  /** Serves the conversion webhook of this custom resource (the version is ignored), answered by `convert`. */
  converts(resource: Gvk): this;
  /**
   * Also reconciles the primaries of these member clusters, each where it lives: the reads,
   * writes and Events of a call act in its object's cluster (`ctx.cluster()` names it). The
   * plugin's identity needs the same RBAC in each.
   */
  serveMembers(members: MembersValue): this;
  /** Whether it reconciles the primaries of the host's own cluster (yes, unless said here). */
  serveLocal(serve: boolean): this;
  /**
   * Reads and writes in these member clusters through `ctx.inCluster(name)`, reconciling nothing
   * there: a hub writing into members. When one is engaged, every primary is reconciled once.
   */
  reachMembers(members: MembersValue): this;
  /**
   * The finalizer the host adds to primaries so that `finalize` runs before they go. It does so
   * with patches made as the plugin: `forHost` adds a `patch` grant on the primary when no
   * permission has one.
   */
  finalizer(name: string): this;
  /** Reconcile every primary at least this often; 0 disables resync. */
  resyncSeconds(seconds: number): this;
  maxConcurrency(workers: number): this;
  /** Asks for other limits; undefined keeps the host default (5000 ms; 64 MiB). */
  limits(limits: { deadlineMs?: number; memoryBytes?: number }): this;
  /** Grants verbs on a resource (in `namespaces`, or every namespace). */
  permission(resource: Gvk, verbs: VerbName | readonly VerbName[], namespaces?: readonly string[]): this;
  /** Grants verbs on a resource's status subresource. */
  statusPermission(resource: Gvk, verbs: VerbName | readonly VerbName[], namespaces?: readonly string[]): this;
  /** The general form: a resource, an optional subresource, verbs and namespaces. */
  grant(resource: Gvk, subresource: string | undefined, verbs: VerbName | readonly VerbName[], namespaces?: readonly string[]): this;
  /** Grants verbs on the named objects of a resource only (RBAC's `resourceNames`); reads of them go to the API server. */
  grantNamed(resource: Gvk, verbs: RbacVerbName | readonly RbacVerbName[], namespaces?: readonly string[], names?: readonly string[]): this;
  /** Lets the plugin bind the ClusterRole `name` (RBAC's `bind`) without holding its permissions. */
  bindClusterRole(name: string): this;
  /** The most general grant: any subresource, any RBAC verb, namespaces and object names (empty for all). */
  rule(
    resource: Gvk,
    subresource: string | undefined,
    verbs: RbacVerbName | readonly RbacVerbName[],
    namespaces?: readonly string[],
    names?: readonly string[],
  ): this;
  /** The owned kinds, each with whether the manifest grants `delete` on it (what the default `released` deletes). */
  owned(): [Gvk, boolean][];
  /** The spec as the plugin describes itself to the host: with a finalizer, plus a `patch` grant on the primary if none has it. */
  forHost(): ManifestSpec;
}

// --- the context ------------------------------------------------------------------------------

/** The host calls of the WIT world, in JavaScript types: objects are JSON text, failures throw KubewasmError. */
export interface Host {
  cacheGet(resource: Gvk, namespace: string | undefined, name: string): string | undefined;
  cacheList(resource: Gvk, namespace: string | undefined, labelSelector: string | undefined): string[];
  cacheListControlled(resource: Gvk, namespace: string | undefined, owner: string): string[];
  apply(obj: string, force: boolean): string;
  applyStatus(obj: string, force: boolean): string;
  create(obj: string): string;
  update(obj: string): string;
  updateStatus(obj: string): string;
  patch(resource: Gvk, namespace: string | undefined, name: string, patchType: PatchTypeName, body: string): string;
  delete(resource: Gvk, namespace: string | undefined, name: string): void;
  publishEvent(event: witEvents.Event): void;
  log(level: LogLevelName, message: string, fields: witLog.Field[]): void;
  /** `fleet.current`: the cluster of the call's object, undefined for the host's own. */
  currentCluster(): string | undefined;
  /** `fleet.clusters`: the members the plugin serves or reaches, labels as [key, value] pairs. */
  clusters(): witFleet.Cluster[];
  /** The cache and client calls in a named cluster (undefined: the host's own): the `fleet` import. */
  fleetGet(cluster: string | undefined, resource: Gvk, namespace: string | undefined, name: string): string | undefined;
  fleetList(cluster: string | undefined, resource: Gvk, namespace: string | undefined, labelSelector: string | undefined): string[];
  fleetApply(cluster: string | undefined, obj: string, force: boolean): string;
  fleetApplyStatus(cluster: string | undefined, obj: string, force: boolean): string;
  fleetCreate(cluster: string | undefined, obj: string): string;
  fleetUpdate(cluster: string | undefined, obj: string): string;
  fleetUpdateStatus(cluster: string | undefined, obj: string): string;
  fleetPatch(cluster: string | undefined, resource: Gvk, namespace: string | undefined, name: string, patchType: PatchTypeName, body: string): string;
  fleetDelete(cluster: string | undefined, resource: Gvk, namespace: string | undefined, name: string): void;
}

/** The host, as seen from one call. Every method may throw a `KubewasmError` subclass. */
export class Context {
  constructor(host: Host, key?: ObjectKey, retries?: number);
  /** The key being reconciled (undefined in `mapRelated`). */
  readonly key: ObjectKey | undefined;
  /** How many times in a row this key failed before this call. */
  readonly retries: number;
  /**
   * The member cluster the call's object lives in; undefined for the host's own cluster (always,
   * in a plugin that serves no member). The same in a context from `inCluster`.
   */
  cluster(): string | undefined;
  /**
   * The member clusters engaged now that the plugin serves or reaches, sorted by name (the host's
   * own is not listed). Engaged does not mean reachable: a call there may throw `Unavailable`.
   */
  clusters(): Cluster[];
  /**
   * This context with its reads and writes in `cluster` (undefined: the host's own; at most 253
   * bytes). A member outside the plugin's scope throws `Forbidden`, one not engaged now
   * `Unavailable`. Events and logs stay with the call; `listControlled` throws `Invalid` there.
   */
  inCluster(cluster: string | undefined): Context;
  /** An object from the cache (a copy), or undefined. */
  get<T extends KubeObject = KubeObject>(resource: Kind<T>, namespace: string | undefined, name: string): T | undefined;
  /** Objects from the cache, in `namespace` (every readable one when undefined), matching a label selector. */
  list<T extends KubeObject = KubeObject>(resource: Kind<T>, namespace?: string, labelSelector?: string): T[];
  /**
   * Objects from the cache whose controller owner reference (`controller: true`) names the object
   * of uid `owner` (a parent's children), in `namespace` (every readable one when undefined),
   * sorted by namespace then name. Served from the host's index of controller owners: it costs
   * the children's count, not the namespace's. `owner` is at most 253 bytes.
   */
  listControlled<T extends KubeObject = KubeObject>(resource: Kind<T>, owner: string, namespace?: string): T[];
  /** Server-side apply (force by default); returns the stored object. */
  apply<T extends KubeObject = KubeObject>(obj: KubeObject, force?: boolean): T;
  /** Server-side apply of the status subresource. */
  applyStatus<T extends KubeObject = KubeObject>(obj: KubeObject, force?: boolean): T;
  create<T extends KubeObject = KubeObject>(obj: KubeObject): T;
  /** Replaces the object; `Conflict` if its resourceVersion is stale. */
  update<T extends KubeObject = KubeObject>(obj: KubeObject): T;
  updateStatus<T extends KubeObject = KubeObject>(obj: KubeObject): T;
  /** Patches an object: merge patch by default, or 'json' / 'strategic'. */
  patch<T extends KubeObject = KubeObject>(resource: Kind<T>, namespace: string | undefined, name: string, body: object | string, patchType?: PatchTypeName): T;
  delete(resource: Gvk, namespace: string | undefined, name: string): void;
  /**
   * Deletes the objects of `kinds` that `owner` controls (in its namespace), skipping kinds the
   * plugin may not delete (`[gvk, false]`) with a warning. What the default `released` does.
   */
  deleteControlled(owner: KubeObject, kinds: Iterable<readonly [Gvk, boolean]>): void;
  /** Records a Kubernetes Event about `regarding`. */
  event(regarding: KubeObject, eventType: EventTypeName, reason: string, action: string, note?: string): void;
  log(level: LogLevelName, message: string, fields?: Record<string, unknown>): void;
  trace(message: string, fields?: Record<string, unknown>): void;
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

// --- the controller ---------------------------------------------------------------------------

/** A controller plugin: extend it and export the class (`export default class ... extends Controller`). */
/**
 * A controller plugin. Anything but a `KubewasmError` thrown out of a method is a bug: the call
 * traps (a fault; an object the plugin keeps faulting on is quarantined).
 */
export class Controller<Settings extends Record<string, any> = Record<string, any>, Primary extends KubeObject = KubeObject> {
  /** Every setting the controller takes, with its default; any other key refuses the plugin. */
  static settingsDefaults: Record<string, unknown>;
  constructor(settings: Settings);
  readonly settings: Settings;
  /** What the plugin reconciles and what it needs. */
  manifest(): Manifest;
  /** Moves the world towards what `obj` asks for; undefined means done. */
  reconcile(obj: Primary, ctx: Context): Action | void;
  /** Cleans up before an object carrying the manifest's finalizer goes away. */
  finalize(obj: Primary, ctx: Context): Action | void;
  /** Maps an event on a watched object (mapping map-related) to primary keys; throwing traps. */
  mapRelated(resource: Gvk, obj: KubeObject, ctx: Context): ObjectKey[];
  /**
   * Lets go of a primary that stopped matching the primary selector. By default, deletes the
   * objects of the `owns` kinds it controls (those the manifest may delete).
   */
  released(obj: Primary, ctx: Context): Action | void;
}

// --- webhooks (contract 0.1.6) ------------------------------------------------------------------

export type Operation = witWebhooks.Operation;
/** An admission hook, the WIT `admission-hook` record. */
export type AdmissionHook = witWebhooks.AdmissionHook;

/** Builds an admission hook for `Manifest.webhook`; each method returns the builder. */
export class Webhook {
  /** A validating hook for create and update, failing closed, 10 s, no side effects, no kinds yet; answered by `validate`. */
  static validating(name: string): Webhook;
  /** A mutating (defaulting) hook, otherwise as `validating`; answered by `mutate`. */
  static mutating(name: string): Webhook;
  readonly hook: AdmissionHook;
  /** Admits objects of this kind. */
  kind(resource: Gvk): this;
  /** Replaces the operations it admits. */
  operations(...operations: Operation[]): this;
  failurePolicy(policy: witWebhooks.FailurePolicy): this;
  /** Whole seconds, 1 to 30 (rounded up). */
  timeoutSeconds(seconds: number): this;
  sideEffects(sideEffects: witWebhooks.SideEffects): this;
  /** Calls the hook only when the CEL `expression` is true. */
  matchCondition(name: string, expression: string): this;
}

/** One admission request, its objects parsed (copies), and the warnings shown beside the answer. */
export class Review<T extends KubeObject = KubeObject> {
  /** Which of the manifest's hooks is asked. */
  readonly hook: string;
  readonly uid: string;
  readonly kind: Gvk;
  readonly subresource?: string;
  readonly namespace?: string;
  /** Empty on a create whose name the API server generates. */
  readonly name: string;
  readonly operation: Operation;
  readonly user: witWebhooks.UserInfo;
  readonly dryRun: boolean;
  /** The object as it would be stored (undefined on delete). */
  object?: T;
  /** The object as it is (on update and delete). */
  oldObject?: T;
  readonly warnings: string[];
  /** Shows the user a warning beside the answer (at most 32, each at most 512 bytes). */
  warn(message: string): void;
}

/** A hook's refusal: the HTTP status the user sees (403 by default, 422 for an invalid object), why (cut to 4 KiB), warnings. */
export class Denied extends Error {
  constructor(message: string, options?: { code?: number; warnings?: string[] });
  readonly code: number;
  readonly warnings: string[];
}

/** What a denial's message may hold (bytes); a longer one is cut. */
export const MAX_DENIAL_MESSAGE: number;

/**
 * The methods that answer the manifest's hooks, each optional (a hook declared but not answered
 * is denied with 500). A hook may read the cache and log through `ctx`; writes and Events throw
 * `Forbidden`. `Denied` is an answer; anything else thrown is a fault (the hook's failure policy).
 */
export interface WebhookHandlers<T extends KubeObject = KubeObject> {
  /** A validating hook: returns the warnings of an allowed change, or throws `Denied` (controller-runtime's CustomValidator). */
  validate?(review: Review<T>, ctx: Context): string[] | void;
  /** A mutating hook: the object as it should be stored (undefined: unchanged), or throws `Denied` (CustomDefaulter). */
  mutate?(review: Review<T>, ctx: Context): KubeObject | void;
  /** The object in `desiredApiVersion`, keeping its kind, name, namespace and uid; throws `Denied` when it cannot be. */
  convert?(obj: KubeObject, desiredApiVersion: string): KubeObject;
}

export interface Controller<Settings extends Record<string, any> = Record<string, any>, Primary extends KubeObject = KubeObject>
  extends WebhookHandlers<Primary> {}

// --- declarative controllers -----------------------------------------------------------------

/** Objects of one kind, as a `SyncRequest` holds them. */
export interface ObjectsOf<T extends KubeObject = KubeObject> {
  resource: Gvk;
  items: T[];
}

/** One parent and what it has: its children (one entry per child kind) and the related objects `customize` asked for. */
export class SyncRequest<Parent extends KubeObject = KubeObject> {
  constructor(parent: Parent, children?: ObjectsOf[], related?: ObjectsOf[], finalizing?: boolean);
  /** The parent as the cache holds it (a copy). */
  readonly parent: Parent;
  /** One entry per child kind (the composition's order, then the other `owns` kinds), even when empty. */
  readonly children: ObjectsOf[];
  /** One entry per `customize` rule, in its order. */
  readonly related: ObjectsOf[];
  /** Whether the parent is being deleted (a `finalize` call). */
  readonly finalizing: boolean;
  /** The children of a kind (matched by group and kind), sorted by namespace and name; [] when none. */
  childrenOf<T extends KubeObject = KubeObject>(resource: Gvk): T[];
  /** The related objects of a kind, over every rule that named it; [] when none. */
  relatedOf<T extends KubeObject = KubeObject>(resource: Gvk): T[];
}

/** What `sync` and `finalize` answer: a plain object. */
export interface SyncResponse {
  /** The parent's whole status (the host sets `observedGeneration`); none leaves the status as it is. */
  status?: Record<string, any> | null;
  /** Every child that should exist, whole (apiVersion, kind, metadata.name). None by default. */
  children?: readonly KubeObject[];
  /** Sync again after this many milliseconds even if nothing changes (rounded up to a whole one). */
  resyncAfter?: number;
  /** `finalize` only: the finalizer may go. */
  finalized?: boolean;
}

/**
 * Objects a parent depends on besides its children, of one kind: by `names` or by
 * `labelSelector` (not both), or every object when neither; in `namespace`, or every namespace.
 */
export interface RelatedRule {
  resource: Gvk;
  namespace?: string;
  names?: readonly string[];
  labelSelector?: string;
}
export const RelatedRule: {
  /** The objects of a kind named `names`, in `namespace` (any namespace when undefined). */
  named(resource: Gvk, namespace: string | undefined, names: readonly string[]): RelatedRule;
  /** The objects of a kind matching a label selector ('' for all), in `namespace` (every one when undefined). */
  selected(resource: Gvk, namespace: string | undefined, labelSelector: string): RelatedRule;
};

/**
 * A declarative controller plugin: extend it and export the class, as a `Controller`. The parent
 * is the manifest's primary, each child kind a `.child(gvk, strategy)`. `customize`, `sync` and
 * `finalize` may read the cache and log through `ctx`; its writes and Events are refused
 * (`Forbidden`): the host makes every write from the answer. A `KubewasmError` thrown is an
 * answer; anything else thrown, or an answer that is not a `SyncResponse`, traps.
 */
export class Composite<Settings extends Record<string, any> = Record<string, any>, Parent extends KubeObject = KubeObject> {
  /** Every setting the controller takes, with its default; any other key refuses the plugin. */
  static settingsDefaults: Record<string, unknown>;
  constructor(settings: Settings);
  readonly settings: Settings;
  /** The parent kind (`primary`), the child kinds (`child`) and what else the plugin needs. */
  manifest(): Manifest;
  /** The related objects a parent needs (handed in `request.related`); none by default. */
  customize(parent: Parent, ctx: Context): RelatedRule[] | void;
  /** The children and status the parent should have. */
  sync(request: SyncRequest<Parent>, ctx: Context): SyncResponse;
  /** The same for a parent being deleted with the manifest's finalizer; by default no children and finalized. */
  finalize(request: SyncRequest<Parent>, ctx: Context): SyncResponse;
}

export interface Composite<Settings extends Record<string, any> = Record<string, any>, Parent extends KubeObject = KubeObject>
  extends WebhookHandlers<Parent> {}

// --- object helpers ---------------------------------------------------------------------------

export namespace objects {
  function newObject(resource: Gvk, name: string, namespace?: string, fields?: Record<string, unknown>): KubeObject;
  function gvkOf(obj: KubeObject): Gvk;
  function metadata(obj: KubeObject): ObjectMeta;
  function name(obj: KubeObject): string;
  function namespace(obj: KubeObject): string | undefined;
  function key(obj: KubeObject): ObjectKey;
  function uid(obj: KubeObject): string | undefined;
  function generation(obj: KubeObject): number | undefined;
  function resourceVersion(obj: KubeObject): string | undefined;
  function objectRef(obj: KubeObject): { resource: Gvk; namespace: string | undefined; name: string };
  /** A nested field ("spec.replicas" or ["metadata", "annotations", "a.b/c"]), or `fallback`. */
  function field<T = any>(obj: unknown, path: string | readonly (string | number)[], fallback?: T): T;
  function setField(obj: object, path: string | readonly string[], value: unknown): void;
  function labels(obj: KubeObject): Record<string, string>;
  function label(obj: KubeObject, key: string, fallback?: string): string | undefined;
  function setLabel(obj: KubeObject, key: string, value: string): void;
  function annotations(obj: KubeObject): Record<string, string>;
  function annotation(obj: KubeObject, key: string, fallback?: string): string | undefined;
  function hasAnnotation(obj: KubeObject, key: string): boolean;
  function setAnnotation(obj: KubeObject, key: string, value: string): void;
  function ownerReferences(obj: KubeObject): OwnerReference[];
  function controllerRef(obj: KubeObject): OwnerReference | undefined;
  /** Whether `owner` is `obj`'s controller (an owner reference with controller: true and the owner's uid). */
  function isControlledBy(obj: KubeObject, owner: KubeObject): boolean;
  function ownerRef(owner: KubeObject, options?: { controller?: boolean; blockOwnerDeletion?: boolean }): OwnerReference;
  /** An owner reference making `owner` the controller of a child (controller and blockOwnerDeletion true). */
  function controllerOwnerRef(owner: KubeObject): OwnerReference;
  function finalizers(obj: KubeObject): string[];
  function hasFinalizer(obj: KubeObject, finalizer: string): boolean;
  function addFinalizer(obj: KubeObject, finalizer: string): boolean;
  function removeFinalizer(obj: KubeObject, finalizer: string): boolean;
  function isDeleting(obj: KubeObject): boolean;
  function status(obj: KubeObject): Record<string, any>;
  /** The smallest object that server-side applies `status` to `obj`'s status subresource. */
  function statusObject(obj: KubeObject, status: Record<string, unknown>): KubeObject;
  function conditions(obj: KubeObject): Condition[];
  function getCondition(obj: KubeObject, type: string): Condition | undefined;
  function conditionStatus(obj: KubeObject, type: string): Condition['status'] | undefined;
  function isConditionTrue(obj: KubeObject, type: string): boolean;
  /** Sets a condition like meta.SetStatusCondition; returns whether anything changed. */
  function setCondition(
    obj: KubeObject,
    condition: { type: string; status: boolean | Condition['status']; reason: string; message?: string; observedGeneration?: number; now?: string },
  ): boolean;
  function removeCondition(obj: KubeObject, type: string): boolean;
  function sortedKeys(objs: readonly KubeObject[]): ObjectKey[];
}

export namespace kinds {
  const CONFIG_MAP: Kind<k8s.ConfigMap>,
    ENDPOINTS: Kind<k8s.Endpoints>,
    EVENT: Kind<k8s.Event>,
    NAMESPACE: Kind<k8s.Namespace>,
    NODE: Kind<k8s.Node>,
    PERSISTENT_VOLUME: Kind<k8s.PersistentVolume>,
    PERSISTENT_VOLUME_CLAIM: Kind<k8s.PersistentVolumeClaim>,
    POD: Kind<k8s.Pod>,
    SECRET: Kind<k8s.Secret>,
    SERVICE: Kind<k8s.Service>,
    SERVICE_ACCOUNT: Kind<k8s.ServiceAccount>,
    DAEMON_SET: Kind<k8s.DaemonSet>,
    DEPLOYMENT: Kind<k8s.Deployment>,
    REPLICA_SET: Kind<k8s.ReplicaSet>,
    STATEFUL_SET: Kind<k8s.StatefulSet>,
    CRON_JOB: Kind<k8s.CronJob>,
    JOB: Kind<k8s.Job>,
    INGRESS: Kind<k8s.Ingress>,
    LEASE: Kind<k8s.Lease>,
    POD_DISRUPTION_BUDGET: Kind<k8s.PodDisruptionBudget>,
    CLUSTER_ROLE: Kind<k8s.ClusterRole>,
    CLUSTER_ROLE_BINDING: Kind<k8s.ClusterRoleBinding>,
    ROLE: Kind<k8s.Role>,
    ROLE_BINDING: Kind<k8s.RoleBinding>;
}
