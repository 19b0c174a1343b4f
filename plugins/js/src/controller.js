// The class a controller author extends.

import { DONE } from './core.js';

/**
 * A controller plugin. Extend it, export the class, and build the module with
 * `kubewasm-js build app.js -o app.wasm`:
 *
 *   export default class Echo extends Controller {
 *     manifest() { return new Manifest('echo', '0.1.0').primary(kinds.CONFIG_MAP); }
 *     reconcile(obj, ctx) { ctx.info('saw', { name: name(obj) }); return Action.done(); }
 *   }
 *
 * The host makes a fresh instance of the plugin now and then (on load, for concurrency, after a
 * fault); each builds its controller once, `new Controller(settings)`, from the settings in
 * `NAME.toml` beside `NAME.wasm`, then handles many calls, one at a time. Throw from the
 * constructor (e.g. `SettingsError`) to refuse loading with a message.
 *
 * Settings are declared in `static settingsDefaults`: `settings` is a copy of it with the keys
 * of `NAME.toml` over it, and a key it does not declare refuses the plugin
 * (`settings: unknown field "KEY"`), as in every SDK.
 *
 * Anything but a `KubewasmError` thrown out of a method is a bug, not an answer: the call traps
 * (a fault), the instance is replaced, the key is retried with backoff, and an object the plugin
 * keeps faulting on is quarantined (set aside until it changes). Throw a `KubewasmError` (or let
 * a host call's through) for what the controller means to report.
 */
export class Controller {
  /** Every setting the controller takes, with its default (top-level keys of `NAME.toml`). */
  static settingsDefaults = {};

  constructor(settings = {}) {
    this.settings = settings;
  }

  /** What the plugin reconciles and what it needs: a `Manifest`. */
  manifest() {
    throw new Error(`${this.constructor.name} must define manifest()`);
  }

  /**
   * Moves the world towards what `obj` (the primary object, a copy) asks for. Level-triggered:
   * read the current state through `ctx`, don't assume what changed. Returning undefined means
   * `Action.done()`; throwing a `KubewasmError` fails the call (retried with backoff, a Warning
   * Event unless `Conflict`).
   */
  reconcile(_obj, _ctx) {
    throw new Error(`${this.constructor.name} must define reconcile()`);
  }

  /** Cleans up before an object carrying the manifest's finalizer goes away. */
  finalize(_obj, _ctx) {
    return DONE;
  }

  /**
   * Maps an event on a watched object (mapping `map-related`) to primary keys
   * `{ namespace, name }`. It has no error value: anything it throws traps, and the host retries
   * the watched object like a faulting reconcile. An empty array means no keys.
   */
  mapRelated(_resource, _obj, _ctx) {
    return [];
  }

  /**
   * Lets go of a primary that stopped matching the manifest's primary selector (its labels
   * changed): this controller no longer manages it, but what it made for it is still there. By
   * default, deletes the objects of the `owns` kinds it controls (those the manifest may delete),
   * as the garbage collector would had it been deleted; override to hand them over instead.
   */
  released(obj, ctx) {
    ctx.deleteControlled(obj, this.manifest().owned());
    return DONE;
  }
}
