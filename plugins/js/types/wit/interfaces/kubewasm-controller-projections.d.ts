// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/projections@0.1.6' {
  /**
   * The projections, at most 100. Called right after a successful `describe`, on the same
   * instance. An invalid entry (a kind the plugin does not reconcile, own or watch, a second
   * projection of a kind, a path over its bounds) refuses the plugin with the field named
   * (`projections.fields[i]`), like an invalid manifest.
   */
  export function fields(): Array<Projection>;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  /**
   * The fields of one kind the plugin reads.
   */
  export interface Projection {
    /**
     * The primary kind, or one of the manifest's `owns` kinds or `watches` kinds. Not a kind
     * of `views.metadata-only` (that is a projection to no fields already), nor a kind of a
     * declarative plugin (whose children the host compares whole). At most one projection
     * per kind.
     */
    resource: Gvk,
    /**
     * Paths from the object's top, each a list of field names: `["spec", "replicas"]`,
     * `["status"]`, `["data", "config.yaml"]`. A path keeps the whole value it reaches; a
     * path through a value that is not an object (a list) keeps that value whole. Paths
     * into `apiVersion`, `kind` or `metadata` add nothing (those are always handed whole).
     * Empty means metadata only. At most 64 paths, each of 1 to 8 names, each name 1 to 253
     * bytes.
     */
    fields: Array<Array<string>>,
  }
}
