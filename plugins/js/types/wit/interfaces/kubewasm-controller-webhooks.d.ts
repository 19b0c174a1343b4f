// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/webhooks@0.1.6' {
  /**
   * The hooks the plugin serves. Called right after a successful `describe`, on the same
   * instance. An invalid declaration (a bad name, a repeated hook, an empty list, a timeout
   * out of bounds, a kind not served) refuses the plugin with the field named
   * (`webhooks.admission[i].timeout-seconds`), like an invalid manifest.
   */
  export function declare(): Declaration;
  /**
   * A validating hook's answer: allowed with warnings (at most 32, each at most 512 bytes),
   * or a denial. Called only for the plugin's validating hooks.
   */
  export function validate(request: AdmissionRequest): Array<string>;
  /**
   * A mutating hook's answer: the object as it should be, or a denial. Called only for the
   * plugin's mutating hooks.
   */
  export function mutate(request: AdmissionRequest): Mutation;
  /**
   * The objects of one conversion request, each converted to `desired-api-version`
   * (`group/version` of one of the resource's versions), in the same order. The objects are
   * all of one resource the plugin declared a conversion hook for; at most 256 of them and 8 MiB
   * in one call (the host splits a larger request into calls). Each converted object must keep
   * its kind, name, namespace and UID and have `desired-api-version` as its `apiVersion`;
   * only labels and annotations may change in its metadata (the API server's rule), and it
   * is at most 3 MiB. An answer breaking these is a fault. `err`: why the objects cannot be
   * converted (at most 4 KiB); the API server fails the request that needed them.
   */
  export function convert(objects: Array<Object>, desiredApiVersion: string): Array<Object>;
  export type Gvk = import('kubewasm:controller/types@0.1.6').Gvk;
  export type Object = import('kubewasm:controller/types@0.1.6').Object;
  /**
   * What a change does, as the API server names it.
   * # Variants
   * 
   * ## `"create"`
   * 
   * ## `"update"`
   * 
   * ## `"delete"`
   * 
   * ## `"connect"`
   */
  export type Operation = 'create' | 'update' | 'delete' | 'connect';
  /**
   * What the API server does when the host cannot answer (it is unreachable, or the hook's
   * timeout passes); also what the host answers when the plugin faults.
   * # Variants
   * 
   * ## `"fail"`
   * 
   * Refuse the change.
   * ## `"ignore"`
   * 
   * Let the change through, unvalidated and unchanged.
   */
  export type FailurePolicy = 'fail' | 'ignore';
  /**
   * Whether calling the hook changes anything outside the object (the API server calls hooks
   * with side effects only for real requests, never for dry runs). A plugin's hooks cannot
   * write, so they have none; `none-on-dry-run` is for a hook that logs differently.
   * # Variants
   * 
   * ## `"none"`
   * 
   * ## `"none-on-dry-run"`
   */
  export type SideEffects = 'none' | 'none-on-dry-run';
  /**
   * A CEL expression the API server evaluates before calling the hook: the hook is called
   * only when every condition is true (`matchConditions`).
   */
  export interface MatchCondition {
    /**
     * Unique within the hook: a qualified name (`[prefix/]name`), at most 316 bytes.
     */
    name: string,
    /**
     * A CEL expression over `object`, `oldObject`, `request` and `authorizer`, returning a
     * bool; the API server checks it when the host writes the configuration. At most 4 KiB
     * (4 096 bytes).
     */
    expression: string,
  }
  /**
   * One admission hook.
   */
  export interface AdmissionHook {
    /**
     * Unique among the plugin's hooks: a DNS label (lower-case letters, digits, '-'), 1 to
     * 63 bytes. It names the hook in the webhook configuration (`<name>.<plugin>.kubewasm.io`),
     * in its path and in metrics.
     */
    name: string,
    /**
     * `true`: a mutating hook (defaulting), called through `mutate`, before validation;
     * `false`: a validating hook, called through `validate`.
     */
    mutating: boolean,
    /**
     * The kinds it admits, 1 to 100; each must be served by the API server (the host
     * resolves each to its resource). Kinds of another version of the same resource are
     * converted to the listed one before the hook sees them.
     */
    kinds: Array<Gvk>,
    /**
     * The operations it admits, 1 to 4, without repeats.
     */
    operations: Array<Operation>,
    failurePolicy: FailurePolicy,
    /**
     * How long the API server waits for an answer, 1 to 30 seconds (Kubernetes' bounds); the
     * host answers a call still running a margin before it.
     */
    timeoutSeconds: number,
    sideEffects: SideEffects,
    /**
     * At most 64 (Kubernetes' bound).
     */
    matchConditions: Array<MatchCondition>,
  }
  /**
   * A custom resource whose versions the plugin converts between.
   */
  export interface ConversionHook {
    /**
     * The custom resource's group and kind (its CRD must be served, with at least two
     * versions); the version of `%resource` is ignored. Group at most 253 bytes, kind 63.
     */
    resource: Gvk,
  }
  /**
   * The plugin's hooks.
   */
  export interface Declaration {
    /**
     * At most 32.
     */
    admission: Array<AdmissionHook>,
    /**
     * At most 16, one per custom resource.
     */
    conversion: Array<ConversionHook>,
  }
  /**
   * Who asked for the change.
   */
  export interface UserInfo {
    /**
     * At most 253 bytes.
     */
    username: string,
    /**
     * At most 253 bytes.
     */
    uid: string,
    /**
     * At most 100, each at most 253 bytes.
     */
    groups: Array<string>,
  }
  /**
   * One admission request, as the API server sent it.
   */
  export interface AdmissionRequest {
    /**
     * Which of the plugin's hooks is asked.
     */
    hook: string,
    /**
     * The request's UID, as the API server sent it (at most 253 bytes).
     */
    uid: string,
    /**
     * The kind of the object as the hook sees it (one of its `kinds`).
     */
    kind: Gvk,
    /**
     * A subresource (`status`, `scale`, ...), or `none` for the resource itself.
     */
    subresource?: string,
    /**
     * Namespace of the object; `none` for cluster-scoped ones.
     */
    namespace?: string,
    /**
     * The object's name; empty on a create that lets the API server generate it.
     */
    name: string,
    operation: Operation,
    user: UserInfo,
    /**
     * The object as it would be stored (`none` on delete). At most 3 MiB, as stored.
     */
    object?: Object,
    /**
     * The object as it is (on update and delete; `none` on create). At most 3 MiB.
     */
    oldObject?: Object,
    /**
     * Whether the change is a dry run: nothing will be stored.
     */
    dryRun: boolean,
  }
  /**
   * A refusal.
   */
  export interface Denial {
    /**
     * The HTTP status the user sees: 400 to 599 (403 Forbidden when in doubt; 422 for an
     * invalid object).
     */
    code: number,
    /**
     * Why, for the user: at most 4 KiB (4 096 bytes).
     */
    message: string,
    /**
     * Warnings shown to the user beside the refusal: at most 32, each at most 512 bytes.
     */
    warnings: Array<string>,
  }
  /**
   * What a mutating hook makes of the object.
   */
  export interface Mutation {
    /**
     * The object as it should be stored (the host sends the API server the JSON patch from
     * the request's object to this one); `none`: unchanged. At most 3 MiB. Changing its
     * `apiVersion`, `kind`, name or namespace is refused as a fault.
     */
    object?: Object,
    /**
     * At most 32, each at most 512 bytes.
     */
    warnings: Array<string>,
  }
}
