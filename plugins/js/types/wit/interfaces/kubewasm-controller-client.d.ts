// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/client@0.1.6' {
  /**
   * Server-side apply: makes the fields in `object` owned by this plugin's field manager and
   * equal to the given values; creates the object if it does not exist. Needs `patch`, and,
   * when the object does not exist yet, `create` (`forbidden` otherwise; without `create`,
   * also `forbidden` when the plugin's identity may not read the object to tell whether it
   * exists). With `force`,
   * takes over fields another manager owns; without it such a clash answers `conflict`.
   */
  export function apply(object: Object, force: boolean): Object;
  /**
   * Server-side apply of the status subresource. Needs `patch` on `status`.
   */
  export function applyStatus(object: Object, force: boolean): Object;
  /**
   * Creates the object. Needs `create`. `already-exists` if the name is taken.
   */
  export function create(object: Object): Object;
  /**
   * Replaces the object. Needs `update`. `metadata.resourceVersion` is required and must be
   * current: otherwise `conflict`. `not-found` if the object is gone. `invalid` for a kind
   * the plugin declared a projection of (the object it was handed lacks fields).
   */
  export function update(object: Object): Object;
  /**
   * Replaces the status subresource. Needs `update` on `status`. Conflicts as for `update`.
   * `invalid` for a kind the plugin declared a projection of that does not keep the whole
   * `status`.
   */
  export function updateStatus(object: Object): Object;
  /**
   * Patches the object. Needs `patch`. `not-found` if it does not exist. A patch that sets
   * `metadata.resourceVersion` is applied only if that version is current, else `conflict`;
   * a JSON patch whose `test` operation fails answers `invalid`.
   */
  export function patch(resource: Gvk, namespace: string | undefined, name: string, patchType: PatchType, body: string): Object;
  /**
   * Deletes the object, letting the API server's garbage collector remove its dependents in
   * the background. Needs `delete`. `not-found` if it is already gone. Once this returns, the
   * plugin's cache reads no longer see the object (unless finalizers keep it: then they see
   * it with its deletion timestamp).
   */
  export { _delete as delete };
  function _delete(resource: Gvk, namespace: string | undefined, name: string): void;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.6').Object;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
  /**
   * The body of a patch.
   * # Variants
   * 
   * ## `"merge"`
   * 
   * RFC 7386 JSON merge patch.
   * ## `"json"`
   * 
   * RFC 6902 JSON patch.
   * ## `"strategic"`
   * 
   * Kubernetes strategic merge patch (built-in resources only).
   */
  export type PatchType = 'merge' | 'json' | 'strategic';
}
