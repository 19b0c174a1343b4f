// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/events@0.1.6' {
  /**
   * Queues an event. Errors: `invalid` for an empty or too long reason or action, a note over
   * 1024 bytes, or a `regarding` name over 253 bytes or namespace over 63 (checked before
   * anything is copied or queued); `forbidden` for an object the plugin may not read.
   */
  export function publish(event: Event): void;
  export type ObjectRef = import('kubewasm:controller/types@0.1.6').ObjectRef;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
  /**
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
  export interface Event {
    /**
     * The object the event is about. It must be one the plugin may read.
     */
    regarding: ObjectRef,
    eventType: EventType,
    /**
     * Why, in PascalCase, 1 to 128 bytes, e.g. "DeploymentNotOwned".
     */
    reason: string,
    /**
     * What was done or attempted, 1 to 128 bytes, e.g. "Reconcile".
     */
    action: string,
    /**
     * For humans, at most 1024 bytes.
     */
    note: string,
  }
}
