// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/views@0.1.6' {
  /**
   * Kinds of which every object the plugin is handed — by `cache.get`, `cache.list-objects`
   * and `reconciler.map-related` — carries only `apiVersion`, `kind` and `metadata` (without
   * `metadata.managedFields`). Each must be one of the manifest's `owns` kinds or the kind of
   * one of its `watches`; the primary kind is always handed whole. At most 1000 entries, each
   * within the bounds of `types.gvk`. Writes are unaffected: `client` calls take and return
   * whole objects. Called right after a successful `describe`, on the same instance; an entry
   * that is not an owned or watched kind refuses the plugin with the field named
   * (`views.metadata-only[i]`), like an invalid manifest.
   */
  export function metadataOnly(): Array<Gvk>;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
}
