// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-client.d.ts" />
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/fleet@0.1.6' {
  /**
   * The cluster the object of the current call lives in: `none` for the host's own cluster
   * (always, in a plugin that serves no member cluster).
   */
  export function current(): string | undefined;
  /**
   * The member clusters engaged now that the plugin serves or reaches, sorted by name (the
   * host's own cluster is not listed). Engaged does not mean reachable: a call may still
   * answer `unavailable`.
   */
  export function clusters(): Array<Cluster>;
  /**
   * `cache.get` in `cluster`.
   */
  export function get(cluster: string | undefined, resource: Gvk, namespace: string | undefined, name: string): Object | undefined;
  /**
   * `cache.list-objects` in `cluster`.
   */
  export function listObjects(cluster: string | undefined, resource: Gvk, namespace: string | undefined, labelSelector: string | undefined): Array<Object>;
  /**
   * `client.apply` in `cluster`.
   */
  export function apply(cluster: string | undefined, object: Object, force: boolean): Object;
  /**
   * `client.apply-status` in `cluster`.
   */
  export function applyStatus(cluster: string | undefined, object: Object, force: boolean): Object;
  /**
   * `client.create` in `cluster`.
   */
  export function create(cluster: string | undefined, object: Object): Object;
  /**
   * `client.update` in `cluster`.
   */
  export function update(cluster: string | undefined, object: Object): Object;
  /**
   * `client.update-status` in `cluster`.
   */
  export function updateStatus(cluster: string | undefined, object: Object): Object;
  /**
   * `client.patch` in `cluster`.
   */
  export function patch(cluster: string | undefined, resource: Gvk, namespace: string | undefined, name: string, patchType: PatchType, body: string): Object;
  /**
   * `client.delete` in `cluster`.
   */
  export { _delete as delete };
  function _delete(cluster: string | undefined, resource: Gvk, namespace: string | undefined, name: string): void;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.6').Object;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
  export type PatchType = import('kubewasm:controller/client@0.1.6').PatchType;
  /**
   * An engaged cluster within the plugin's reach.
   */
  export interface Cluster {
    /**
     * Its name: the kubeconfig file's stem or the Secret's name. At most 253 bytes.
     */
    name: string,
    /**
     * Its labels (the Secret's, or the kubeconfig context's `kubewasm.io/labels`
     * extension), sorted by key. At most 64 entries.
     */
    labels: Array<[string, string]>,
  }
}
