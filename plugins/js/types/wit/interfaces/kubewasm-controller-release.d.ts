// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
/// <reference path="./kubewasm-controller-reconciler.d.ts" />
/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/release@0.1.6' {
  /**
   * Lets go of a primary object. `request.object` is the object as it was when it stopped
   * matching. The usual answer is to delete what the plugin made for it (the SDKs do this by
   * default: objects of the `owns` kinds whose controller owner reference points at it), or
   * to leave it for another controller.
   * 
   * `ok(done)` finishes; `ok(requeue-after(ms))` calls again later; `err` retries with
   * backoff. If the object matches the selector again before that, `reconcile` is called
   * instead; if it is deleted, nothing more is called.
   */
  export function released(request: Request): Action;
  export type Action = import('kubewasm:controller/types@0.1.6').Action;
  export type Error = import('kubewasm:controller/types@0.1.6').Error;
  export type Request = import('kubewasm:controller/reconciler@0.1.6').Request;
}
