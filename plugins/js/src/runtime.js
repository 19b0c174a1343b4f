// Runs a controller against a host: what the component's exports do, minus the WIT types.
// `guest.js` wires it to the WIT imports inside a component; `testing.js` wires it to a fake
// host under Node. Keeping the dispatch here means the tests exercise the code the component runs.

import { cut } from './bounds.js';
import { Composite, relatedRules, SyncRequest, syncResponse } from './composite.js';
import { Context } from './context.js';
import { Controller } from './controller.js';
import { Action, DONE, objectKey } from './core.js';
import { Invalid, KubewasmError, Other, SettingsError } from './errors.js';
import { DEFAULT_SCOPE } from './manifest.js';
import { Denied, Review } from './webhook.js';

/** `describe` refuses to load the plugin; the message says why. */
export class Refused extends Error {
  constructor(message) {
    super(message);
    this.name = 'Refused';
  }
}

/**
 * What kind of controller class `value` is: 'composite' (declarative: a `Composite`, or a class
 * with `manifest()` and `sync()`), 'controller' (a `Controller`, or a class with `manifest()` and
 * `reconcile()`), or undefined.
 */
export function controllerKind(value) {
  const proto = typeof value === 'function' ? value.prototype : undefined;
  if (typeof proto?.manifest !== 'function') return undefined;
  if (proto instanceof Composite || proto === Composite.prototype) return 'composite';
  if (proto instanceof Controller || proto === Controller.prototype) return 'controller';
  if (typeof proto.reconcile === 'function') return 'controller';
  if (typeof proto.sync === 'function') return 'composite';
  return undefined;
}

/**
 * The short form of a declarative controller, a module whose own exports are its parts:
 * `manifest(settings)`, `sync(request, ctx)`, optionally `customize(parent, ctx)`,
 * `finalize(request, ctx)` and `settingsDefaults`; as a `Composite` class.
 */
function moduleComposite(mod) {
  for (const name of ['manifest', 'customize', 'finalize']) {
    if (mod[name] !== undefined && typeof mod[name] !== 'function') {
      throw new TypeError(`the module's \`${name}\` export must be a function, not ${typeof mod[name]}`);
    }
  }
  if (mod.manifest === undefined) throw new TypeError('a module exporting sync() must export manifest(settings) too');
  return class ModuleComposite extends Composite {
    static settingsDefaults = mod.settingsDefaults ?? {};

    manifest() {
      return mod.manifest(this.settings);
    }

    sync(request, ctx) {
      return mod.sync(request, ctx);
    }

    customize(parent, ctx) {
      return mod.customize === undefined ? super.customize(parent, ctx) : mod.customize(parent, ctx);
    }

    finalize(request, ctx) {
      return mod.finalize === undefined ? super.finalize(request, ctx) : mod.finalize(request, ctx);
    }
  };
}

/**
 * The controller class of an author's module: its `controller` export, else its default export
 * (a `Controller` or a `Composite` class); else, when the module itself exports `sync()`, the
 * module as a declarative controller (`moduleComposite`); else its one controller class.
 */
export function findController(mod) {
  for (const name of ['controller', 'default']) {
    if (mod[name] === undefined) continue;
    if (controllerKind(mod[name])) return mod[name];
    throw new TypeError(
      `the module's \`${name}\` export must be a Controller class (with manifest() and reconcile()) or a Composite class (with manifest() and sync()), not ${typeof mod[name]}`,
    );
  }
  if (typeof mod.sync === 'function') return moduleComposite(mod);
  const found = Object.entries(mod).filter(([, v]) => controllerKind(v));
  if (found.length === 1) return found[0][1];
  const names = found.map(([n]) => n).join(', ') || 'none';
  throw new TypeError(
    `the module must export one Controller or Composite class, as \`export default class ... extends Controller\` (or Composite), or manifest() and sync() (found: ${names})`,
  );
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
    /** Whether the controller is declarative (a `Composite`): its `composite` exports are called, not its `reconciler`. */
    this.declarative = controllerKind(ControllerClass) === 'composite';
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

  /**
   * What the `projections` export answers, right after `describe`: the fields the plugin reads
   * of each kind it declared them for, each path as its field names (the WIT `projection`).
   */
  projections() {
    return (this.manifest?.readsFields ?? []).map(({ resource, fields }) => ({ resource, fields: fields.map((f) => f.split('.')) }));
  }

  /**
   * What the `clusters` export answers, right after `describe`: the clusters the plugin serves
   * and reaches, the WIT `cluster-scope` (the host's own cluster only, unless the manifest says
   * more).
   */
  scope() {
    return this.manifest?.scope ?? DEFAULT_SCOPE;
  }

  /**
   * What `composite.describe-composition` answers, right after `describe`: a declarative
   * controller's composition (the manifest's child rules and selector), undefined (`none`) for a
   * plain controller.
   */
  describeComposition() {
    if (!this.declarative || this.manifest === undefined) return undefined;
    const { children = [], selector = 'generated' } = this.manifest.composition ?? {};
    return { children: children.map((r) => ({ resource: r.resource, updateStrategy: r.updateStrategy })), selector };
  }

  /**
   * What the `webhooks` export's `declare` answers, right after `describe`: the WIT
   * `declaration` (the admission hooks, and a conversion hook per kind the plugin converts).
   */
  hooks() {
    return {
      admission: this.manifest?.webhooks ?? [],
      conversion: (this.manifest?.conversions ?? []).map((resource) => ({ resource })),
    };
  }

  /**
   * Runs the controller's hook `method` ('validate' or 'mutate') on a WIT `admission-request`
   * (objects as JSON text): its answer and the review. A `Denied` thrown carries the review's
   * warnings too; a hook the controller does not define is denied with 500; anything else
   * thrown propagates (a trap in a component).
   */
  #admit(method, request) {
    const controller = this.#controller();
    const review = new Review(request, admitted(request.object, 'the object'), admitted(request.oldObject, 'the old object'));
    if (typeof controller[method] !== 'function') {
      throw new Denied(`the plugin declares hook ${JSON.stringify(request.hook)} but does not define ${method}()`, { code: 500 });
    }
    try {
      return [controller[method](review, new Context(this.host, objectKey(request.namespace, request.name), 0)), review];
    } catch (e) {
      if (e instanceof Denied) e.warnings.unshift(...review.warnings);
      throw e;
    }
  }

  /** Runs `validate`: the warnings of an allowed change (the returned ones after `review.warn`'s). Throws `Denied`. */
  validate(request) {
    const [warnings, review] = this.#admit('validate', request);
    return [...review.warnings, ...(warnings ?? [])];
  }

  /** Runs `mutate`: the WIT `mutation` (the object as JSON text, undefined when unchanged). Throws `Denied`. */
  mutate(request) {
    const [object, review] = this.#admit('mutate', request);
    return { object: object === undefined || object === null ? undefined : JSON.stringify(object), warnings: review.warnings };
  }

  /**
   * Runs `convert` on each object (JSON text), in order. Throws `Denied` naming the first object
   * that cannot be converted (or when the controller defines no `convert`).
   */
  convert(objects, desiredApiVersion) {
    const controller = this.#controller();
    if (typeof controller.convert !== 'function') {
      throw new Denied(`the plugin declares a conversion but does not define convert() (to ${desiredApiVersion})`);
    }
    return objects.map((text) => {
      const obj = admitted(text, 'an object');
      try {
        return JSON.stringify(controller.convert(obj, desiredApiVersion));
      } catch (e) {
        if (e instanceof Denied) throw new Denied(`${obj?.metadata?.name ?? ''}: ${e.message}`);
        throw e;
      }
    });
  }

  #controller() {
    if (this.controller === undefined) throw new Other('the host called the plugin before describe');
    return this.controller;
  }

  /**
   * The controller, for an export of its kind (`declarative` or not). The host never calls the
   * other kind's exports: if it does, a bug (an Error, not an answer), so the call traps.
   */
  #of(declarative, method) {
    const controller = this.#controller();
    if (this.declarative !== declarative) {
      throw new Error(`${method} is never called for a ${this.declarative ? 'declarative' : 'plain'} controller (${this.ControllerClass.name})`);
    }
    return controller;
  }

  /**
   * Runs `method` ('reconcile', 'finalize' or 'released') on the primary `object` (JSON text).
   * Throws `KubewasmError` (its message cut to what the host takes) for the controller's answer;
   * anything else thrown is a bug and propagates: inside a component it traps (a fault).
   */
  call(method, key, object, retries) {
    const controller = this.#of(false, method);
    const primary = parsed(object, 'the primary object');
    const ctx = new Context(this.host, key, retries);
    const action = answer(() => controller[method](primary, ctx));
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
    const keys = this.#of(false, 'mapRelated').mapRelated(resource, JSON.parse(object), new Context(this.host)) ?? [];
    return keys.map((k) => objectKey(k.namespace, k.name));
  }

  /**
   * Runs a declarative controller's `customize` on the parent (JSON text): its rules, as the WIT
   * `related-rule` list. Throws like `call`.
   */
  customize(parent) {
    const controller = this.#of(true, 'customize');
    const obj = parsed(parent, 'the parent');
    return relatedRules(answer(() => controller.customize(obj, parentContext(this.host, obj))));
  }

  /**
   * Runs a declarative controller's `sync` or `finalize` (`method`) on a WIT `sync-request`
   * (objects as JSON text): the answer as `syncResponse` makes it (the WIT `sync-response`, with
   * `resyncAfter` in whole milliseconds as a number). Throws like `call`; an answer that is not
   * a SyncResponse is a bug (a TypeError).
   */
  sync(method, request) {
    const controller = this.#of(true, method);
    const parent = parsed(request.parent, 'the parent');
    const groups = (list, what) => list.map(({ resource, items }) => ({ resource, items: items.map((item) => parsed(item, what)) }));
    const sync = new SyncRequest(parent, groups(request.children, 'a child'), groups(request.related, 'a related object'), request.finalizing);
    return syncResponse(
      answer(() => controller[method](sync, parentContext(this.host, parent))),
      method,
    );
  }
}

/** Runs a controller method: a `KubewasmError` it throws is its answer, cut to what the host takes. */
function answer(run) {
  try {
    return run();
  } catch (e) {
    if (e instanceof KubewasmError) throw returned(e);
    throw e;
  }
}

/** An admission request's object (undefined for none); a 400 denial when it does not parse. */
function admitted(text, what) {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Denied(`${what} does not parse: ${e.message}`, { code: 400 });
  }
}

function parsed(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Invalid(`${what} does not parse: ${e.message}`);
  }
}

/** The context of a declarative call: the parent's key, no retries (the WIT request has none). */
function parentContext(host, parent) {
  return new Context(host, objectKey(parent?.metadata?.namespace, parent?.metadata?.name ?? ''), 0);
}
