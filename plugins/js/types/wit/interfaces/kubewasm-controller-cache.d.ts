// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/cache@0.1.6' {
  /**
   * One object, or `none` if there is none of that name.
   * 
   * `name` is at most 253 bytes and `namespace` at most 63, like every name and namespace.
   * 
   * Errors: `forbidden` if the plugin may not read that object; `invalid` for a value over its
   * bound, if a namespace is
   * given for a cluster-scoped resource (or missing for a namespaced one), or the API server
   * does not serve the resource; for a read from the API server (under the plugin's rate
   * limit, as its writes), `unavailable` if it did not answer in time, and `forbidden` if RBAC
   * refused the plugin's identity or the namespace is not one the host serves (`--namespace`).
   */
  export function get(resource: Gvk, namespace: string | undefined, name: string): Object | undefined;
  /**
   * Objects of a cached resource: in `namespace` (every readable namespace when `none`),
   * matching `label-selector` (Kubernetes syntax, e.g. "app=web,tier!=db", at most 4096
   * bytes; every object when `none`), sorted by namespace then name.
   * 
   * The answer is bounded: its objects may total at most a quarter of the plugin's memory
   * limit (16 MiB with the default 64 MiB). A larger answer is not built; the call fails with
   * `invalid` and a message saying how many bytes it would have been: narrow it by namespace
   * or label selector.
   * 
   * Errors: `forbidden` as for `get`, for a namespace outside the grant; `invalid` for a
   * selector that does not parse, a namespace given for a cluster-scoped resource, an
   * unserved or uncached resource, or an answer over the bound.
   */
  export function listObjects(resource: Gvk, namespace: string | undefined, labelSelector: string | undefined): Array<Object>;
  /**
   * Objects of a cached resource whose controller owner reference (`controller: true`) names
   * the object of uid `owner` — a parent's children, as controller-runtime users index them
   * (`MatchingFields{".metadata.controller": …}`) — in `namespace` (every readable namespace
   * when `none`), sorted by namespace then name. Served from the host's index of controller
   * owners: the cost is the children's, not the namespace's. An owner reference that is not
   * a controller reference does not count.
   * 
   * `owner` is at most 253 bytes (a uid is 36). Readable, bounded and refused exactly as
   * `list-objects` (the same quarter of the plugin's memory limit).
   */
  export function listControlled(resource: Gvk, namespace: string | undefined, owner: string): Array<Object>;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.6').Object;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
}
