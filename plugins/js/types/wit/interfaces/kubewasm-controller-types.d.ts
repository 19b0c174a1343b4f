// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
declare module 'kubewasm:controller/types@0.1.6' {
  /**
   * A Kubernetes kind as the API names it.
   */
  export interface Gvk {
    /**
     * API group; the empty string for the core group (Pods, ConfigMaps, Nodes, ...). At most
     * 253 bytes.
     */
    group: string,
    /**
     * API version within the group, e.g. "v1". At most 63 bytes.
     */
    version: string,
    /**
     * Kind, e.g. "Deployment". At most 63 bytes.
     */
    kind: string,
  }
  /**
   * Identifies one object of a resource known from context.
   */
  export interface ObjectKey {
    /**
     * Namespace; `none` for cluster-scoped objects. At most 63 bytes.
     */
    namespace?: string,
    /**
     * `metadata.name`. At most 253 bytes.
     */
    name: string,
  }
  /**
   * Identifies any object.
   */
  export interface ObjectRef {
    resource: Gvk,
    /**
     * Namespace; `none` for cluster-scoped objects. At most 63 bytes.
     */
    namespace?: string,
    /**
     * At most 253 bytes.
     */
    name: string,
  }
  /**
   * A Kubernetes object as JSON text: `apiVersion`, `kind`, `metadata`, and the rest. One a
   * guest sends is at most 3 MiB (3 145 728 bytes), what the API server accepts.
   */
  export type Object = string;
  /**
   * Why a host call failed. Every host call that can fail says which codes it returns.
   * # Variants
   * 
   * ## `"not-found"`
   * 
   * The object does not exist.
   * ## `"already-exists"`
   * 
   * A create found an object of that name already there.
   * ## `"conflict"`
   * 
   * Another actor changed the object first (stale `resourceVersion`). Re-read, then retry;
   * returning this code from `reconcile` requeues the key without a Warning Event.
   * ## `"forbidden"`
   * 
   * The plugin did not declare this access in its manifest, or Kubernetes RBAC refused it.
   * ## `"invalid"`
   * 
   * The request was malformed: bad JSON, a missing name, a bad selector, a namespace given
   * for a cluster-scoped resource, a resource the API server does not serve, ...
   * ## `"unavailable"`
   * 
   * The API server could not be reached, timed out, throttled the call, or this host is a
   * standby that does not write. Retrying later may succeed.
   * ## `"other"`
   * 
   * Anything else; the message says what.
   */
  export type ErrorCode = 'not-found' | 'already-exists' | 'conflict' | 'forbidden' | 'invalid' | 'unavailable' | 'other';
  /**
   * A failed call: a code to branch on and a message for humans. A guest's error message is at
   * most 64 KiB (65 536 bytes); a longer one is an `oversized` fault.
   */
  export interface Error {
    code: ErrorCode,
    message: string,
  }
  /**
   * What the host does with a key after a successful reconcile or finalize.
   */
  export type Action = ActionDone | ActionRequeueAfter;
  /**
   * Nothing more to do until the object, an owned object or a watched object changes, or
   * the periodic resync comes round.
   */
  export interface ActionDone {
    tag: 'done',
  }
  /**
   * Reconcile this key again after this many milliseconds even if nothing changes. Under
   * 1000 ms it means "again soon" and goes through the plugin's rate limiter like a
   * failure does (per-key exponential backoff from 5 ms, and the plugin's token bucket),
   * so that no plugin can busy-loop the host; ask for 1000 or more for a fixed delay.
   * 
   * The SDKs take the delay in their language's own unit of time and convert it to whole
   * milliseconds, rounding up (a positive delay never becomes 0): Rust a `Duration`,
   * Go a `time.Duration`, Python seconds (a number or a `timedelta`), JavaScript
   * milliseconds (as `setTimeout`). Delays past `u64` milliseconds are cut to its maximum.
   */
  export interface ActionRequeueAfter {
    tag: 'requeue-after',
    val: bigint,
  }
}
