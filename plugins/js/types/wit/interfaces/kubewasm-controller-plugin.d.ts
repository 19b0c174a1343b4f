// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/plugin@0.1.6' {
  /**
   * Describes the plugin. `settings` is JSON text: the table `NAME.toml` beside `NAME.wasm`
   * converted to JSON (without the host's own `[kubewasm]` table), or "{}" when there is none.
   * 
   * The host calls `describe` once on every new instance before any other call, always with
   * the same settings, so an instance may keep what it parsed from them. Return `err` with a
   * message saying what is wrong with the settings (at most 64 KiB) to refuse loading.
   * 
   * Unknown settings are refused: a key the plugin does not declare is a typo or a setting of
   * another version, and silently ignoring it would run the plugin with a setting its
   * operator believes is on. Every SDK refuses it here with the message
   * `settings: unknown field "KEY"` (a plugin that declares no settings refuses any key). A
   * trap in `describe` refuses loading too.
   * 
   * When the plugin is loaded, `describe` runs before it is admitted: under a deadline of
   * 10 s whatever `limits` or the settings ask, and under the memory limit the settings give
   * (`[kubewasm] memory-mib`, else the host's default), which the host holds in its plugin
   * memory budget meanwhile (a limit that does not fit refuses the plugin before it runs).
   */
  export function describe(settings: string): Manifest;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  /**
   * Kubernetes API verbs, with the meaning RBAC gives them. (Other RBAC verbs, such as
   * `bind` or `deletecollection`, are declared through the `access` export.)
   * # Variants
   * 
   * ## `"get"`
   * 
   * ## `"list"`
   * 
   * ## `"watch"`
   * 
   * ## `"create"`
   * 
   * ## `"update"`
   * 
   * ## `"patch"`
   * 
   * ## `"delete"`
   */
  export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';
  /**
   * One grant the plugin asks for. The host checks every `cache` and `client` call against
   * these grants and answers `forbidden` outside them; `kubewasm rbac` turns them into RBAC
   * rules for the plugin's identity, and the host refuses to start a plugin whose identity
   * RBAC does not grant them.
   * 
   * The primary resource and every owned or watched resource are readable without a grant
   * (get, list, watch): the host watches them for the plugin anyway. A `list` or `watch`
   * grant makes the host cache the resource (in the grant's namespaces) and serve `get` and
   * `list-objects` of it from the cache; a `get` grant alone is served by the API server.
   */
  export interface Permission {
    resource: Gvk,
    /**
     * `none` for the resource itself; `some("status")` for its status subresource (what
     * `apply-status` and `update-status` need). Since 0.1.1 any subresource is accepted
     * ("scale", "finalizers", ...): the host passes it to RBAC.
     */
    subresource?: string,
    /**
     * At most 14 entries.
     */
    verbs: Array<Verb>,
    /**
     * Namespaces the grant covers; empty means every namespace the host serves. Must be
     * empty for cluster-scoped resources. At most 100.
     */
    namespaces: Array<string>,
  }
  /**
   * How an event on a watched object becomes keys of primary objects to reconcile.
   */
  export type Mapping = MappingOwnerReferences | MappingLabel | MappingMapRelated;
  /**
   * The owners named in the object's `ownerReferences` whose kind is the primary kind
   * (controller or not), in the object's namespace.
   */
  export interface MappingOwnerReferences {
    tag: 'owner-references',
  }
  /**
   * The primary object whose name is the value of this label (a label key: at most 317
   * bytes) on the watched object, in the watched object's namespace. No label, no key.
   */
  export interface MappingLabel {
    tag: 'label',
    val: string,
  }
  /**
   * The host calls `reconciler.map-related` with the object and enqueues what it returns.
   */
  export interface MappingMapRelated {
    tag: 'map-related',
  }
  /**
   * A resource the plugin reacts to besides its primary and owned resources.
   */
  export interface Watch {
    resource: Gvk,
    mapping: Mapping,
    /**
     * Kubernetes label selector syntax, at most 4096 bytes; `none` watches every object.
     */
    labelSelector?: string,
  }
  /**
   * Limits the plugin asks for. The host grants them up to its own maximum and refuses to load
   * a plugin that asks for more.
   */
  export interface Limits {
    /**
     * Wall-clock time for one call into the plugin, host calls included, in milliseconds.
     * `none`: the host default (5000). When it runs out the call is stopped, the instance
     * is discarded, and the key is retried with backoff.
     */
    deadlineMs?: number,
    /**
     * Linear memory one instance may grow to, in bytes. `none`: the host default (64 MiB).
     * A growth past it fails (the guest's allocator sees out-of-memory).
     */
    memoryBytes?: bigint,
  }
  /**
   * Everything the host needs to run the plugin. Validated at load time; a plugin whose
   * manifest is invalid is not loaded and the error says which field is wrong. Each list
   * (`owns`, `watches`, `permissions`) holds at most 1000 entries, and every gvk is within the
   * bounds of `types.gvk`.
   */
  export interface Manifest {
    /**
     * DNS-1123 label (lowercase letters, digits, '-'; at most 63 characters), unique within a
     * host: a second plugin claiming a name in use (running or starting) is refused. Used in
     * metrics, Events, the field manager `kubewasm/<name>`, the plugin's ServiceAccount
     * `kubewasm-plugin-<name>` and RBAC names.
     */
    name: string,
    /**
     * The plugin's own version, free text shown in logs (semantic versioning recommended), 1 to
     * 64 bytes.
     */
    version: string,
    /**
     * The resource this plugin reconciles; one reconcile per object of it.
     */
    primary: Gvk,
    /**
     * Label selector restricting which primary objects are reconciled, at most 4096 bytes;
     * `none` for all. An
     * object whose labels change so that it stops matching gets one `release.released`
     * call (plugins built for 0.1.1 and later).
     */
    primarySelector?: string,
    /**
     * Resources whose objects this plugin creates with an owner reference to the primary
     * object. An event on one enqueues its controlling owner of the primary kind.
     */
    owns: Array<Gvk>,
    /**
     * Other resources whose events enqueue primary keys (see `mapping`).
     */
    watches: Array<Watch>,
    /**
     * A finalizer name such as `example.com/cleanup` (a qualified name: at most 317 bytes),
     * unique within a
     * host. When set, the host adds it to each primary object before the first reconcile,
     * calls `finalize` when the object is being deleted, and removes the finalizer once
     * `finalize` returns `done`. It does so with patches made as the plugin: the manifest
     * must grant `patch` on the primary resource, or the plugin is refused. A new version
     * that renames its finalizer takes over objects carrying the old name.
     */
    finalizer?: string,
    /**
     * Every primary object is reconciled again at least this often even without events.
     * `none`: the host default (10 hours, like controller-runtime); 0 disables resync.
     */
    resyncSeconds?: number,
    /**
     * How many keys may be reconciled at once (each key is only ever in one worker). At
     * least 1; the host may cap it. Each worker may hold an instance of `limits.memory-bytes`,
     * whose limit is held in the host's plugin memory budget while the instance exists: a plugin
     * whose first instance does not fit in what is left of it is refused, and a call for which
     * there is no room waits for one of the plugin's instances.
     */
    maxConcurrency: number,
    limits: Limits,
    /**
     * Access beyond reading the primary, owned and watched resources.
     */
    permissions: Array<Permission>,
  }
}
