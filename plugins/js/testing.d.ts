// Types of @kubewasm/sdk/testing: run a controller under Node against an in-memory host.

import type {
  Action,
  ClusterScope,
  Composite,
  Composition,
  Controller,
  Gvk,
  Host,
  KubeObject,
  KubewasmError,
  ManifestSpec,
  ObjectKey,
  PatchTypeName,
  LogLevelName,
  EventTypeName,
  Operation,
} from './index.js';

export interface RecordedCall {
  op: 'apply' | 'applyStatus' | 'create' | 'update' | 'updateStatus' | 'patch' | 'delete';
  /** The object sent, or the patch body. */
  object?: any;
  resource?: Gvk;
  namespace?: string;
  name?: string;
  force?: boolean;
  patchType?: PatchTypeName;
}

export interface RecordedEvent {
  regarding: { resource: Gvk; namespace: string | undefined; name: string };
  eventType: EventTypeName;
  reason: string;
  action: string;
  note: string;
}

/**
 * Kubernetes label selector matching (equality, existence and set-based requirements), as the
 * host matches; throws `Invalid` for a selector the host would refuse.
 */
export function matchLabels(labels: Record<string, string>, selector: string | undefined): boolean;

/** A parsed label selector's requirements (the operators of kube's `Expression`). */
export interface Requirement {
  op: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist' | 'Equal' | 'NotEqual';
  key: string;
  values: string[];
}

/** Parses a label selector as the host does; throws `Invalid` when it does not parse. */
export function parseSelector(selector: string): Requirement[];

/**
 * An in-memory host: a store serving the cache, recorded writes, events and logs, injected
 * failures; and member clusters, each a `FakeHost` of its own (`addMember`), which the fleet calls
 * (`ctx.inCluster(name)`) reach as the host does: `Unavailable` for a member not engaged,
 * `Forbidden` for one outside `scope`.
 */
export class FakeHost implements Host {
  constructor(objects?: readonly KubeObject[], options?: { labels?: Record<string, string> });
  /** Member clusters, by name. */
  readonly members: Map<string, FakeHost>;
  /** A member's labels. */
  labels: Record<string, string>;
  /** The plugin's clusters (`Harness` sets the manifest's scope); undefined: every engaged member is reached. */
  scope: ClusterScope | undefined;
  /** The cluster of the call's object (`fleet.current`); undefined for the host's own. */
  current: string | undefined;
  /** Engages a member cluster (replacing one of the same name); returns its fake host. */
  addMember(name: string, options?: { labels?: Record<string, string>; objects?: readonly KubeObject[] }): FakeHost;
  /** The fake host of an engaged member cluster; throws for an unknown one. */
  member(name: string): FakeHost;
  /** Disengages a member cluster: calls naming it throw `Unavailable`. */
  removeMember(name: string): void;
  /** Whether `scope` takes the engaged member (serves or reaches it). */
  reaches(name: string): boolean;
  /** Whether `scope` serves the engaged member. */
  serves(name: string): boolean;
  readonly calls: RecordedCall[];
  readonly events: RecordedEvent[];
  readonly logs: { level: LogLevelName; message: string; fields: Record<string, string> }[];
  /** The kinds the plugin reads metadata-only (`Harness` sets the manifest's `metadataOnly`). */
  metadataOnly: Gvk[];
  /**
   * Set, to the rule it states, while only cache reads are allowed (`Harness` sets `COMPOSING`
   * during a declarative controller's calls): client and events calls throw `Forbidden`.
   */
  cacheOnly: string | undefined;
  /** The fields the plugin reads of projected kinds (`Harness` sets the manifest's `readsFields`). */
  readsFields: { resource: Gvk; fields: string[] }[];
  /** `obj` as the host hands it to the plugin: of a `metadataOnly` kind, only apiVersion, kind and metadata (without managedFields); of a `readsFields` kind, as `answered`. Shares `obj`'s values. */
  handed(resource: Gvk, obj: KubeObject): KubeObject;
  /** `obj` as the host hands it in a request or a write's answer: of a `readsFields` kind, its metadata and those fields alone. */
  answered(resource: Gvk, obj: KubeObject): KubeObject;
  /** Puts objects in the store, replacing same-named ones. */
  add(...objects: KubeObject[]): void;
  /** Makes the next `times` calls of `op` throw `error`. */
  fail(op: string, error: KubewasmError, times?: number): void;
  /** An object from the store (a copy). */
  get(resource: Gvk, namespace: string | undefined, name: string): KubeObject | undefined;
  /** The stored objects of a kind, in a namespace (all when undefined), matching a label selector, sorted; not copies. */
  select(resource: Gvk, namespace?: string, labelSelector?: string): KubeObject[];
  writes(op?: RecordedCall['op'], kind?: string): RecordedCall[];
  applied(kind?: string): KubeObject[];
  statusApplied(kind?: string): KubeObject[];
}
/** The host calls themselves are `Host`'s (declaration merging: one list of them, in index.d.ts). */
export interface FakeHost extends Host {}

/** `describe` refused to load the plugin. */
export class Refused extends Error {}

/** Why the host refuses writes and Events during a declarative controller's calls. */
export const COMPOSING: string;
/** Why the host refuses writes and Events during a webhook call (`Harness.admit`, `Harness.convert`). */
export const HOOKING: string;

/** An admission request for `Harness.admit`: `object` on create and update, `oldObject` on update and delete. */
export interface AdmissionReview {
  hook: string;
  operation: Operation;
  object?: KubeObject;
  oldObject?: KubeObject;
  user?: { username?: string; uid?: string; groups?: string[] };
  dryRun?: boolean;
  subresource?: string;
}

/** A hook's answer as the API server gets it. */
export interface Admission {
  allowed: boolean;
  warnings: string[];
  /** A denial's HTTP status and message. */
  code?: number;
  message?: string;
  /** What a mutating hook made of the object; undefined when unchanged. */
  object?: KubeObject;
}

/** A declarative controller's answer as the host gets it. */
export interface SyncResult {
  /** undefined: none (the host writes `{}`). */
  status: Record<string, any> | undefined;
  children: KubeObject[];
  /** Whole milliseconds. */
  resyncAfter: number | undefined;
  finalized: boolean;
}

/** The objects a declarative call is handed; by default taken from the fake host (see `Harness.sync`). */
export interface SyncOptions {
  /** The parent's children (objects of its child kinds); by default the stored objects it controls. */
  children?: readonly KubeObject[];
  /** The related objects; by default what `customize`'s rules select from the store. */
  related?: readonly KubeObject[];
}

/** A rule as `customize` answers it to the host. */
export interface RelatedRuleResult {
  resource: Gvk;
  namespace: string | undefined;
  names: string[];
  labelSelector: string | undefined;
}

/** How a plain controller's call is made: `retries`, and `cluster`, the member the object lives in (one the plugin serves). */
export interface CallOptions {
  retries?: number;
  cluster?: string;
}

/**
 * A controller described and ready to call against a FakeHost, the way the component runs it:
 * a `Controller` or `Composite` class, or an author's module (its controller found as the build
 * finds it).
 */
export class Harness<C extends Controller | Composite = Controller> {
  constructor(controller: (new (settings: any) => C) | object, options?: { settings?: Record<string, unknown>; objects?: readonly KubeObject[] });
  readonly host: FakeHost;
  /** The manifest the controller described to the host; `rules`, `metadataOnly` and `scope` are what its `access`, `views` and `clusters` exports answer. */
  readonly manifest: ManifestSpec;
  readonly controller: C;
  /** What its `describe-composition` answers: a declarative controller's composition, else undefined. */
  readonly composition: Composition | undefined;
  /** Runs `reconcile`; with `{ cluster }`, on an object of that member (a key names a primary of its store). */
  reconcile(objOrKey: KubeObject | ObjectKey, retries?: number | CallOptions): Action;
  /** A plain controller's `finalize` (an Action), or a declarative one's (as `sync`, finalizing). */
  finalize(objOrKey: KubeObject | ObjectKey, retries?: number | CallOptions): C extends Composite ? SyncResult : Action;
  finalize(objOrKey: KubeObject | ObjectKey, options?: SyncOptions): C extends Composite ? SyncResult : Action;
  /** Runs `released`, as the host does once a primary stops matching the primary selector. */
  released(objOrKey: KubeObject | ObjectKey, retries?: number | CallOptions): Action;
  /** Runs `mapRelated` on `obj`, handed as the host hands it (`FakeHost.handed`). */
  mapRelated(resource: Gvk, obj: KubeObject): ObjectKey[];
  /** Runs a declarative controller's `customize` on a parent, client and events calls refused. */
  customize(parentOrKey: KubeObject | ObjectKey): RelatedRuleResult[];
  /** Runs a declarative controller's `sync` on a parent, client and events calls refused. */
  sync(parentOrKey: KubeObject | ObjectKey, options?: SyncOptions): SyncResult;
  /** Calls the manifest's hook as the host does (validate or mutate as declared), client and events calls refused. */
  admit(review: AdmissionReview): Admission;
  /** Calls the conversion hook as the host does; throws `Denied`, or an Error for an answer the host refuses. */
  convert(objects: readonly KubeObject[], desiredApiVersion: string): KubeObject[];
}
