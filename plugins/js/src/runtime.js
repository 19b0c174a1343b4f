// Runs a controller against a host: what the component's exports do, minus the WIT types.
// `guest.js` wires it to the WIT imports inside a component; `testing.js` wires it to a fake
// host under Node. Keeping the dispatch here means the tests exercise the code the component runs.

import { cut } from './bounds.js';
import { Context } from './context.js';
import { Action, DONE, objectKey } from './core.js';
import { Invalid, KubewasmError, Other, SettingsError } from './errors.js';

/** `describe` refuses to load the plugin; the message says why. */
export class Refused extends Error {
  constructor(message) {
    super(message);
    this.name = 'Refused';
  }
}

function isControllerClass(value) {
  return typeof value === 'function' && typeof value.prototype?.manifest === 'function' && typeof value.prototype?.reconcile === 'function';
}

/**
 * The controller class of an author's module: its `controller` export, else its default export.
 */
export function findController(mod) {
  for (const name of ['controller', 'default']) {
    if (mod[name] === undefined) continue;
    if (isControllerClass(mod[name])) return mod[name];
    throw new TypeError(`the module's \`${name}\` export must be a Controller class (with manifest() and reconcile()), not ${typeof mod[name]}`);
  }
  const found = Object.entries(mod).filter(([, v]) => isControllerClass(v));
  if (found.length === 1) return found[0][1];
  const names = found.map(([n]) => n).join(', ') || 'none';
  throw new TypeError(`the module must export one Controller class, as \`export default class ... extends Controller\` (found: ${names})`);
}

function describeMessage(e) {
  if (e instanceof SettingsError || e instanceof Refused) return e.message;
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

/**
 * The settings the controller gets: its class's `settingsDefaults` with the given keys over
 * them. A key it does not declare there is refused (a typo, or a setting of another version).
 */
function settingsFor(ControllerClass, given) {
  const defaults = ControllerClass.settingsDefaults ?? {};
  if (typeof defaults !== 'object' || Array.isArray(defaults)) {
    throw new Refused(`${ControllerClass.name}.settingsDefaults must be an object, not ${Array.isArray(defaults) ? 'an array' : typeof defaults}`);
  }
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(defaults, key)) throw new Refused(`settings: unknown field ${JSON.stringify(key)}`);
  }
  // A copy: an instance that changes its settings does not change the next one's defaults.
  return { ...JSON.parse(JSON.stringify(defaults)), ...given };
}

/** The error as the host gets it: its message cut to what the host takes. */
function returned(e) {
  const message = cut(e.message);
  return message.length === e.message.length ? e : KubewasmError.fromCode(e.code, message);
}

/** One controller instance and the host it calls. */
export class Runner {
  constructor(ControllerClass, host) {
    this.ControllerClass = ControllerClass;
    this.host = host;
    this.controller = undefined;
    this.manifest = undefined;
  }

  /**
   * Parses the settings, builds the controller and returns its manifest spec as the host gets it
   * (`Manifest.forHost`). Throws `Refused`.
   */
  describe(settings) {
    let parsed;
    try {
      parsed = settings.trim() === '' ? {} : JSON.parse(settings);
    } catch (e) {
      throw new Refused(`settings are not JSON: ${e.message}`);
    }
    if (parsed === null) parsed = {};
    if (typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new Refused(`settings must be a table, not ${Array.isArray(parsed) ? 'an array' : typeof parsed}`);
    }
    const given = settingsFor(this.ControllerClass, parsed);
    let controller, manifest;
    try {
      controller = new this.ControllerClass(given);
      manifest = controller.manifest();
    } catch (e) {
      throw new Refused(cut(describeMessage(e)));
    }
    if (typeof manifest?.forHost !== 'function') {
      throw new Refused(`${this.ControllerClass.name}.manifest() must return a Manifest`);
    }
    if (manifest.spec.primary === undefined) throw new Refused('manifest: primary is not set (call .primary(...))');
    this.controller = controller;
    this.manifest = manifest.forHost();
    return this.manifest;
  }

  /** What the `access` export answers, right after `describe`: the manifest's rules. */
  rules() {
    return this.manifest?.rules ?? [];
  }

  /** What the `views` export answers, right after `describe`: the manifest's metadata-only kinds. */
  metadataOnly() {
    return this.manifest?.metadataOnly ?? [];
  }

  #controller() {
    if (this.controller === undefined) throw new Other('the host called the plugin before describe');
    return this.controller;
  }

  /**
   * Runs `method` ('reconcile', 'finalize' or 'released') on the primary `object` (JSON text).
   * Throws `KubewasmError` (its message cut to what the host takes) for the controller's answer;
   * anything else thrown is a bug and propagates: inside a component it traps (a fault).
   */
  call(method, key, object, retries) {
    const controller = this.#controller();
    let parsed;
    try {
      parsed = JSON.parse(object);
    } catch (e) {
      throw new Invalid(`the primary object does not parse: ${e.message}`);
    }
    const ctx = new Context(this.host, key, retries);
    let action;
    try {
      action = controller[method](parsed, ctx);
    } catch (e) {
      if (e instanceof KubewasmError) throw returned(e);
      throw e;
    }
    if (action === undefined || action === null) return DONE;
    if (!(action instanceof Action)) {
      throw new TypeError(`${method} returned ${JSON.stringify(action)}, not an Action (use Action.done() or Action.requeueAfter(ms))`);
    }
    return action;
  }

  /**
   * Runs `mapRelated`. The WIT function has no error value: anything it throws (a
   * `KubewasmError` too) propagates, and inside a component traps (a fault the host retries and,
   * repeated, quarantines).
   */
  mapRelated(resource, object) {
    const keys = this.#controller().mapRelated(resource, JSON.parse(object), new Context(this.host)) ?? [];
    return keys.map((k) => objectKey(k.namespace, k.name));
  }
}
