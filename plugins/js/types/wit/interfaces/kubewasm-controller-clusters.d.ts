// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
declare module 'kubewasm:controller/clusters@0.1.6' {
  /**
   * The plugin's clusters. Called right after a successful `describe`, on the same instance.
   */
  export function scope(): ClusterScope;
  /**
   * A choice of member clusters.
   */
  export type Members = MembersNone | MembersAll | MembersMatching;
  /**
   * None.
   */
  export interface MembersNone {
    tag: 'none',
  }
  /**
   * Every engaged member.
   */
  export interface MembersAll {
    tag: 'all',
  }
  /**
   * The engaged members whose labels match this label selector (Kubernetes syntax, e.g.
   * "env=prod,region in (eu,us)", at most 4096 bytes; an invalid one refuses the plugin
   * with the field named, like an invalid manifest).
   */
  export interface MembersMatching {
    tag: 'matching',
    val: string,
  }
  export interface ClusterScope {
    /**
     * Whether the plugin serves the host's own cluster (what every plugin without this
     * export does).
     */
    serveLocal: boolean,
    /**
     * The members the plugin serves.
     */
    serve: Members,
    /**
     * The members the plugin only reaches through `fleet` (the members it serves are reached
     * too, and so is the host's own cluster, always).
     */
    reach: Members,
  }
}
