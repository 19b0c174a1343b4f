// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/composite@0.1.6' {
  /**
   * How parents and children relate, for a declarative plugin; `none` for a plugin that
   * reconciles itself (its `reconciler` is called, and nothing else of this interface). A
   * `declarative`-world plugin must answer `some`. Called once right after a successful
   * `describe`, on the same instance; an invalid composition (a kind that is not an `owns`
   * kind, a kind twice, more than 1000 rules) refuses the plugin with the field named
   * (`composite.children[i]`), like an invalid manifest. A declarative plugin's `reconciler`,
   * if it exports one, is never called.
   */
  export function describeComposition(): Composition | undefined;
  /**
   * The related objects a parent needs (at most 100 rules). The host calls it before a
   * parent's `sync` or `finalize` when the parent's `metadata.generation` is one it has not
   * asked about, and hands the objects the rules select in `sync-request.related`, within
   * the same bound as `cache.list-objects`: the parent's children and its related objects
   * together at most a quarter of the plugin's memory limit (past it, the sync fails with
   * `invalid`). `err` fails the sync like an `err` from `sync`. Return an empty list for
   * none.
   */
  export function customize(parent: Object): Array<RelatedRule>;
  /**
   * The desired children and status of a parent that is not being deleted. `err(e)` retries
   * with backoff and a Warning Event (none for `conflict`), and the host changes nothing.
   */
  export function sync(request: SyncRequest): SyncResponse;
  /**
   * The same for a parent being deleted that carries the manifest's finalizer: typically no
   * children (the host deletes them) and `finalized` once external cleanup is done.
   */
  export function finalize(request: SyncRequest): SyncResponse;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.6').Object;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
  /**
   * What the host does with an existing child whose desired state changed.
   * # Variants
   * 
   * ## `"on-delete"`
   * 
   * Nothing: an existing child is never updated. A child that is gone is created again
   * as desired (Metacontroller's default).
   * ## `"recreate"`
   * 
   * Deletes it; the host creates it as desired once it is gone (the delete's event
   * brings the parent back). Decided on the desired state alone: a child someone else
   * changed is not recreated until the desired state changes.
   * ## `"in-place"`
   * 
   * Server-side applies the desired state over it. Also re-applied when someone else
   * changed a field the desired state sets (fields the desired state leaves out are
   * theirs).
   */
  export type UpdateStrategy = 'on-delete' | 'recreate' | 'in-place';
  /**
   * One kind of child.
   */
  export interface ChildRule {
    /**
     * One of the manifest's `owns` kinds.
     */
    resource: Gvk,
    updateStrategy: UpdateStrategy,
  }
  /**
   * Which objects are a parent's children to claim.
   * # Variants
   * 
   * ## `"generated"`
   * 
   * The host labels every child `kubewasm.io/controller-uid: <parent uid>` and selects
   * by that label.
   * ## `"parent-spec-selector"`
   * 
   * The parent's `spec.selector` (a label selector: `matchLabels`, `matchExpressions`).
   * A parent without one fails its sync with `invalid`, before `sync` is called.
   */
  export type ChildSelector = 'generated' | 'parent-spec-selector';
  /**
   * How the plugin's parents and children relate.
   */
  export interface Composition {
    /**
     * At most 1000 rules, one per kind. An `owns` kind without a rule is a child kind with
     * the strategy `on-delete`.
     */
    children: Array<ChildRule>,
    selector: ChildSelector,
  }
  /**
   * Objects of one kind.
   */
  export interface Objects {
    resource: Gvk,
    items: Array<Object>,
  }
  /**
   * One parent, what it has, and what it asked for.
   */
  export interface SyncRequest {
    /**
     * The parent as the cache holds it: a copy.
     */
    parent: Object,
    /**
     * The parent's claimed children: one entry per child kind (in the order of
     * `composition.children`, then the other `owns` kinds), even when it has none, its
     * items sorted by namespace and name.
     */
    children: Array<Objects>,
    /**
     * The objects `customize` named: one entry per rule, in its order, its items sorted by
     * namespace and name.
     */
    related: Array<Objects>,
    /**
     * Whether the parent is being deleted (a `finalize` call).
     */
    finalizing: boolean,
  }
  /**
   * What should be. At most 1000 children; the children and the status together at most
   * 32 MiB (33 554 432 bytes) of JSON text, each object at most 3 MiB. A result over a bound is
   * an `oversized` fault.
   */
  export interface SyncResponse {
    /**
     * The parent's whole status (a JSON object); `none` leaves the status as it is (for a
     * parent whose status others own, such as a built-in kind).
     */
    status?: Object,
    /**
     * Every child that should exist, whole (`apiVersion`, `kind`, `metadata.name`, and
     * `metadata.namespace` where it differs from the parent's). Owner references, the
     * selector's label and the `kubewasm.io/applied` annotation are the host's to add.
     */
    children: Array<Object>,
    /**
     * Sync this parent again after this many milliseconds even if nothing changes (under
     * 1000: "again soon", rate limited as `types.action.requeue-after` is).
     */
    resyncAfter?: bigint,
    /**
     * `finalize` only: the finalizer may go (the host removes it once the children it was
     * answered with are managed). Until it is, the host calls `finalize` again on the next
     * event or after `resync-after` (5 seconds when `none`). Ignored from `sync`.
     */
    finalized: boolean,
  }
  /**
   * Objects a parent depends on besides its children. One rule selects objects of one kind:
   * by `names` (in `namespace`, or any namespace when `none`), or by `label-selector` (in
   * `namespace`, or every namespace), or every object (in `namespace`) when neither is
   * given; `names` and `label-selector` together are `invalid`. The kind must be readable
   * from the cache: an `owns` kind, the kind of a `watches` entry (with mapping
   * `map-related`, the host maps events of the kind to the parents whose rules select the
   * object) or one the plugin holds `list` on.
   */
  export interface RelatedRule {
    resource: Gvk,
    /**
     * At most 63 bytes.
     */
    namespace?: string,
    /**
     * At most 100 names, each at most 253 bytes.
     */
    names: Array<string>,
    /**
     * Kubernetes label selector syntax, at most 4096 bytes.
     */
    labelSelector?: string,
  }
}
