// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/cache@0.1.0' {
  /**
   * One object, or `none` if the cache holds none of that name.
   * 
   * Errors: `forbidden` if the plugin may not read that resource in that namespace;
   * `invalid` if a namespace is given for a cluster-scoped resource (or missing for a
   * namespaced one), or the API server does not serve the resource.
   */
  export function get(resource: Gvk, namespace: string | undefined, name: string): Object | undefined;
  /**
   * Objects of a resource: in `namespace` (every readable namespace when `none`), matching
   * `label-selector` (Kubernetes syntax, e.g. "app=web,tier!=db"; every object when `none`),
   * sorted by namespace then name.
   * 
   * Errors: `forbidden` as for `get`, for a namespace outside the grant; `invalid` for a
   * selector that does not parse, a namespace given for a cluster-scoped resource, or an
   * unserved resource.
   */
  export function listObjects(resource: Gvk, namespace: string | undefined, labelSelector: string | undefined): Array<Object>;
  export type Gvk = import('kubewasm:controller/types@0.1.0').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.0').Object;
  export type Error = import('kubewasm:controller/types@0.1.0').Error;
}
