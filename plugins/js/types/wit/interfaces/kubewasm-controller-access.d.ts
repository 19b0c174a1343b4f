// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/access@0.1.6' {
  /**
   * The plugin's rules beyond `manifest.permissions`, at most 1000. Called right after a
   * successful `describe`, on the same instance. Invalid rules (an unknown verb, a bad name)
   * refuse the plugin with the field named, like an invalid manifest.
   */
  export function rules(): Array<Rule>;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  /**
   * One RBAC rule, as in a Role.
   */
  export interface Rule {
    resource: Gvk,
    /**
     * Any subresource: "status", "scale", "finalizers", "eviction", "approval", ...;
     * `none` for the resource itself.
     */
    subresource?: string,
    /**
     * RBAC verbs: get, list, watch, create, update, patch, delete, deletecollection, bind,
     * escalate, impersonate, approve, sign, use (at most 14). Not "*": name what the plugin
     * needs.
     * The host's calls check get through delete; the others matter to the API server only
     * (e.g. `bind` on a ClusterRole lets the plugin create RoleBindings to it without
     * holding its permissions).
     */
    verbs: Array<string>,
    /**
     * Namespaces the rule covers; empty means every namespace the host serves. Must be
     * empty for cluster-scoped resources. At most 100.
     */
    namespaces: Array<string>,
    /**
     * Object names the rule is limited to (RBAC's `resourceNames`, at most 100); empty for
     * every object. A rule with names never makes the host cache the resource: `get` of a
     * named object is a request to the API server.
     */
    resourceNames: Array<string>,
  }
}
