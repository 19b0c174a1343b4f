// kubewasm SDK for JavaScript and TypeScript: write a Kubernetes controller as a class, build it
// into a WebAssembly component with `kubewasm-js build app.js -o app.wasm`, drop it into a host.
//
//   import { Action, Controller, Manifest, kinds, objects } from '@kubewasm/sdk';
//
//   export default class Echo extends Controller {
//     manifest() {
//       return new Manifest('echo', '0.1.0').primary(kinds.CONFIG_MAP);
//     }
//     reconcile(obj, ctx) {
//       ctx.info('saw a ConfigMap', { name: objects.name(obj) });
//       return Action.done();
//     }
//   }
//
// A declarative controller extends `Composite` instead (`sync(request, ctx)` answers a parent's
// children and status; the host writes them): see composite.js.
//
// A plugin may serve or reach member clusters besides the host's own (contract 0.1.4):
// `manifest.serveMembers(Members.all)`, `.reachMembers(Members.matching('env=prod'))`, then
// `ctx.cluster()`, `ctx.clusters()` and `ctx.inCluster(name)` to read and write in one.
//
// A controller serves admission and conversion webhooks (contract 0.1.6) that its manifest
// declares (`.webhook(Webhook.validating(...))`, `.converts(gvk)`) with its `validate`, `mutate`
// and `convert` methods: see webhook.js.
//
// Nothing here imports the WIT bindings: only `@kubewasm/sdk/guest`, which the build's generated
// entry module bundles, does. So the SDK and controllers run under plain Node for unit tests
// (`@kubewasm/sdk/testing`).

export * as kinds from './kinds.js';
export * as objects from './objects.js';
export { Composite, RelatedRule, SyncRequest } from './composite.js';
export { Context } from './context.js';
export { Controller } from './controller.js';
export {
  Action,
  ChildSelector,
  DONE,
  ErrorCode,
  EventType,
  LogLevel,
  PatchType,
  UpdateStrategy,
  Verb,
  apiVersion,
  gvk,
  gvkFromApiVersion,
  gvkOf,
  gvkString,
  keyString,
  objectKey,
  sameGvk,
} from './core.js';
export { AlreadyExists, Conflict, Forbidden, Invalid, KubewasmError, NotFound, Other, SettingsError, Unavailable } from './errors.js';
export { Manifest, Mapping, Members } from './manifest.js';
export { Denied, MAX_DENIAL_MESSAGE, Review, Webhook } from './webhook.js';
