// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/reconciler@0.1.6' {
  /**
   * Brings the world in line with the primary object. Called for objects that exist and are
   * not being deleted (or, with a finalizer, not yet being deleted).
   * 
   * `ok(action)` records success (the key's backoff is reset). `err(e)` retries the key with
   * exponential backoff; a Warning Event with the message is recorded on the object unless
   * `e.code` is `conflict`.
   */
  export function reconcile(request: Request): Action;
  /**
   * Cleans up before a primary object carrying the plugin's finalizer goes away. Called only
   * when the manifest names a finalizer and the object has a deletion timestamp. `ok(done)`
   * lets the host remove the finalizer; `ok(requeue-after(ms))` keeps it and calls again later;
   * `err` retries with backoff.
   */
  export function finalize(request: Request): Action;
  /**
   * Maps an event on a watched object whose mapping is `map-related` to the keys of primary
   * objects to reconcile. `resource` says which watch it came from. May read the cache and
   * nothing else: every `client` and `events` call, and a `cache.get` the API server would
   * answer (a kind that is not cached), returns `forbidden`. Runs only on the leader (a
   * standby keeps the events and maps them when it leads), several calls at once for
   * different objects. Must be quick; it is subject to the same deadline as `reconcile`. Keys
   * of objects that are not cached primaries of the plugin (no such object, or outside its
   * selector or namespaces) are dropped; more than 100 000 keys, or a key over the bounds of
   * `object-key` (a name over 253 bytes, a namespace over 63), is an `oversized` fault. When
   * more watched objects wait than the host keeps (10 000), the rest are not mapped one by one:
   * every primary is reconciled instead.
   * 
   * It has no error value: a map-related that fails (in every SDK, an error it returns or an
   * exception or panic it does not catch) traps, and the host retries it with backoff like a
   * faulting `reconcile`, quarantining the watched object after as many faults in a row (until
   * it changes). An empty list means "no keys", never "failed".
   */
  export function mapRelated(resource: Gvk, object: Object): Array<ObjectKey>;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.6').Object;
  export type ObjectKey = import('kubewasm:controller/types@0.1.6').ObjectKey;
  export type Action = import('kubewasm:controller/types@0.1.6').Action;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
  /**
   * One primary object to reconcile.
   */
  export interface Request {
    key: ObjectKey,
    /**
     * The primary object as the cache holds it now: a copy, never shared.
     */
    object: Object,
    /**
     * How many times in a row this key failed before this call; 0 on a first attempt.
     */
    retries: number,
  }
}
