// Unit-testing controllers under Node, without a cluster or a wasm runtime.
//
//   import { Harness } from '@kubewasm/sdk/testing';
//   const h = new Harness(SampleController, { objects: [foo] });
//   assert.deepEqual(h.reconcile(foo), Action.done());
//   assert.equal(h.host.applied()[0].kind, 'Deployment');
//
// `FakeHost` stands in for the host: an in-memory object store serves the cache (of a kind the
// manifest declares metadata-only, only the metadata, as the host hands it), writes change the
// store (immediately: the real cache catches up a moment later) and are recorded, events and logs
// are recorded. It is deliberately simple: server-side apply is a deep merge, and the
// manifest's permissions are not enforced (`kubewasm check` and the real host do that; for
// whole-plugin table tests on the built component use `kubewasm test`).
//
// A declarative controller (`Composite`) runs the same way, answering instead of writing:
//
//   const h = new Harness(Site, { objects: [site] });
//   const { status, children } = h.sync(site);     // the children it claims come from the store
//
// While its `customize`, `sync` or `finalize` runs, the fake host refuses every client and events
// call with `Forbidden`, as the host does. What the host then does with the answer (claim, apply,
// prune, write the status) is the host's and is not simulated.
//
// Member clusters (contract 0.1.4) are fake hosts of their own, engaged with `addMember`: each has
// its own store, recorded writes, events and injected failures. `ctx.inCluster(name)` reaches
// them as the host does (a member outside the manifest's `clusters` scope throws `Forbidden`, one
// not engaged `Unavailable`), and `h.reconcile(obj, { cluster: 'eu' })` runs a call for an object
// of a member the plugin serves:
//
//   const h = new Harness(Propagation, { objects: [source] });
//   const eu = h.host.addMember('eu', { labels: { env: 'prod' } });
//   h.reconcile(source);
//   assert.equal(eu.applied()[0].metadata.name, 'config');

import { gvkOf, gvkString, keyString, objectKey, sameGvk } from './core.js';
import { AlreadyExists, Conflict, Forbidden, Invalid, NotFound, Unavailable } from './errors.js';
import { isControlledBy } from './objects.js';
import { findController, Refused, Runner } from './runtime.js';
import { Denied } from './webhook.js';

/** Why the host refuses writes and Events during a declarative call (host/src/runtime/mod.rs). */
export const COMPOSING =
  "a declarative plugin's customize, sync and finalize may read the cache and nothing else (the host makes every write from their answers)";

/** Why the host refuses writes and Events during a webhook call (`Harness.admit`, `Harness.convert`). */
export const HOOKING = 'webhook calls may read the cache and nothing else';

const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function storeKey(resource, namespace, name) {
  return JSON.stringify([resource.group, resource.kind, namespace ?? '', name]);
}

/** Orders objects by namespace, then name, as the host sorts them. */
const byKey = (a, b) => {
  const [an, ann] = [a.metadata?.namespace ?? '', a.metadata?.name ?? ''];
  const [bn, bnn] = [b.metadata?.namespace ?? '', b.metadata?.name ?? ''];
  return an < bn ? -1 : an > bn ? 1 : ann < bnn ? -1 : ann > bnn ? 1 : 0;
};

/** The uid of `obj`'s controller owner reference (`controller: true`), as the host indexes it. */
function controllerUid(obj) {
  const refs = obj.metadata?.ownerReferences;
  return Array.isArray(refs) ? refs.find((r) => isObject(r) && r.controller === true)?.uid : undefined;
}

function objKey(obj) {
  return storeKey(gvkOf(obj), obj.metadata?.namespace, obj.metadata?.name ?? '');
}

/**
 * What the host hands of an object of a metadata-only kind: its `apiVersion`, `kind` and
 * `metadata`, without `metadata.managedFields`.
 */
function metadataOf(obj) {
  const head = {};
  for (const field of ['apiVersion', 'kind', 'metadata']) if (obj[field] !== undefined) head[field] = obj[field];
  if (isObject(head.metadata)) {
    // A new object: the stored one keeps its managedFields.
    const { managedFields: _, ...metadata } = head.metadata;
    head.metadata = metadata;
  }
  return head;
}

/**
 * What the host hands of an object of a kind the plugin reads projected: its metadata (as
 * `metadataOf`) and, of the rest, the dotted `fields` it has; a path through a value that is not
 * an object keeps that value whole.
 */
function projected(obj, fields) {
  // A name's subtree, or null to keep its whole value; without a prototype, so that a field
  // named `constructor` is a field.
  const tree = Object.create(null);
  for (const path of fields) {
    const names = path.split('.');
    const last = names.pop();
    let node = tree;
    let whole = false;
    for (const name of names) {
      if (node[name] === null) {
        whole = true;
        break;
      }
      node[name] ??= Object.create(null);
      node = node[name];
    }
    if (!whole) node[last] = null;
  }
  const within = (value, sub) => {
    if (sub === null || !isObject(value)) return value;
    const out = {};
    for (const [name, s] of Object.entries(sub)) if (Object.hasOwn(value, name)) out[name] = within(value[name], s);
    return out;
  };
  const head = metadataOf(obj);
  for (const [name, sub] of Object.entries(tree)) {
    if (!['apiVersion', 'kind', 'metadata'].includes(name) && Object.hasOwn(obj, name)) head[name] = within(obj[name], sub);
  }
  return head;
}

/** Deep merge (RFC 7386 when `deleteNulls`): objects merge, anything else replaces. */
function merge(into, patch, deleteNulls) {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null && deleteNulls) delete into[k];
    else if (isObject(v)) into[k] = merge(isObject(into[k]) ? into[k] : {}, v, deleteNulls);
    else into[k] = clone(v);
  }
  return into;
}

function pointer(path) {
  if (!path.startsWith('/')) throw new Invalid(`JSON patch path ${JSON.stringify(path)} must start with /`);
  return path
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** RFC 6902: add, remove, replace, test (move and copy are left out). */
function jsonPatch(doc, ops) {
  doc = clone(doc);
  for (const op of ops) {
    const steps = pointer(op.path ?? '');
    let parent = doc;
    for (const step of steps.slice(0, -1)) {
      parent = Array.isArray(parent) ? parent[Number(step)] : parent?.[step];
      if (parent === undefined || parent === null) throw new Invalid(`JSON patch path ${JSON.stringify(op.path)} does not exist`);
    }
    const last = steps[steps.length - 1];
    const isArray = Array.isArray(parent);
    switch (op.op) {
      case 'test':
        if (JSON.stringify(isArray ? parent[Number(last)] : parent[last]) !== JSON.stringify(op.value)) {
          throw new Invalid(`JSON patch test failed at ${JSON.stringify(op.path)}`);
        }
        break;
      case 'add':
        if (isArray) last === '-' ? parent.push(op.value) : parent.splice(Number(last), 0, op.value);
        else parent[last] = op.value;
        break;
      case 'replace':
        if (!isArray && !(last in parent)) throw new Invalid(`JSON patch replace of missing ${JSON.stringify(op.path)}`);
        parent[isArray ? Number(last) : last] = op.value;
        break;
      case 'remove':
        if (isArray) parent.splice(Number(last), 1);
        else if (last in parent) delete parent[last];
        else throw new Invalid(`JSON patch remove of missing ${JSON.stringify(op.path)}`);
        break;
      default:
        throw new Invalid(`JSON patch op ${JSON.stringify(op.op)} is not supported by FakeHost`);
    }
  }
  return doc;
}

// --- label selectors: the host's parser (host/src/selector.rs), line for line, so that a fake
// host selects exactly what the host would (tests/cases/selectors.yaml holds both to it) ---

const alnum = (c) => /^[A-Za-z0-9]$/.test(c);

function isLabelName(s) {
  return s.length > 0 && s.length <= 63 && alnum(s[0]) && alnum(s.at(-1)) && [...s].every((c) => alnum(c) || '-_.'.includes(c));
}

function isDnsLabel(s) {
  const ok = (c) => /^[a-z0-9]$/.test(c);
  return s.length > 0 && s.length <= 63 && ok(s[0]) && ok(s.at(-1)) && [...s].every((c) => ok(c) || c === '-');
}

function labelKey(key) {
  const slash = key.lastIndexOf('/');
  if (slash >= 0) {
    const prefix = key.slice(0, slash);
    if (!(prefix.length <= 253 && prefix.split('.').every(isDnsLabel))) throw new Error(`label key prefix ${JSON.stringify(prefix)} is not a DNS subdomain`);
  }
  if (!isLabelName(key.slice(slash + 1))) {
    throw new Error(`label key ${JSON.stringify(key)} must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`);
  }
  return key;
}

function labelValue(value) {
  if (value !== '' && !isLabelName(value)) throw new Error(`label value ${JSON.stringify(value)} is not valid`);
  return value;
}

function splitRequirements(selector) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    else if (c === ')') {
      if (depth === 0) throw new Error("unbalanced ')'");
      depth--;
    } else if (c === ',' && depth === 0) {
      parts.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw new Error("unbalanced '('");
  parts.push(selector.slice(start));
  return parts.length === 1 && parts[0].trim() === '' ? [] : parts;
}

/** Splits at the first `sep`: [before, after], or undefined. */
function splitOnce(s, sep) {
  const i = s.indexOf(sep);
  return i < 0 ? undefined : [s.slice(0, i), s.slice(i + sep.length)];
}

/** One requirement: `{ op, key, values }`, the operators of kube's `Expression`. */
function requirement(raw) {
  const req = raw.trim();
  if (req === '') throw new Error('empty requirement');
  if (req.startsWith('!')) return { op: 'DoesNotExist', key: labelKey(req.slice(1).trim()), values: [] };
  const notEqual = splitOnce(req, '!=');
  if (notEqual) return { op: 'NotEqual', key: labelKey(notEqual[0].trim()), values: [labelValue(notEqual[1].trim())] };
  const equal = splitOnce(req, '==') ?? splitOnce(req, '=');
  if (equal) return { op: 'Equal', key: labelKey(equal[0].trim()), values: [labelValue(equal[1].trim())] };
  const space = req.search(/\s/);
  const key = labelKey(space < 0 ? req : req.slice(0, space));
  if (space < 0) return { op: 'Exists', key, values: [] };
  const rest = req.slice(space).trim();
  let op, set;
  if (rest.startsWith('notin')) [op, set] = ['NotIn', rest.slice('notin'.length)];
  else if (rest.startsWith('in')) [op, set] = ['In', rest.slice('in'.length)];
  else throw new Error(`expected '=', '!=', 'in' or 'notin' after ${JSON.stringify(key)}`);
  set = set.trim();
  if (!set.startsWith('(') || !set.endsWith(')')) throw new Error(`the values of ${JSON.stringify(key)} must be in parentheses`);
  return {
    op,
    key,
    values: set
      .slice(1, -1)
      .split(',')
      .map((v) => labelValue(v.trim())),
  };
}

/** Parses a Kubernetes label selector as the host does; throws `Invalid` when it does not parse. */
export function parseSelector(selector) {
  try {
    return splitRequirements(selector).map(requirement);
  } catch (e) {
    throw new Invalid(`label selector ${JSON.stringify(selector)}: ${e.message}`);
  }
}

function satisfies(labels, { op, key, values }) {
  const value = Object.hasOwn(labels, key) ? labels[key] : undefined;
  switch (op) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Equal':
      return value === values[0];
    default:
      return value !== values[0];
  }
}

/**
 * Whether labels match a Kubernetes label selector (`a=b`, `a==b`, `a!=b`, `a`, `!a`,
 * `a in (x,y)`, `a notin (x,y)`, comma-separated), as the host matches it. Throws `Invalid` for
 * a selector the host would refuse.
 */
export function matchLabels(labels, selector) {
  if (selector === undefined || selector === null) return true;
  return parseSelector(selector).every((r) => satisfies(labels, r));
}

/** Whether a choice of members (the WIT `members` variant) takes a member with these labels. */
function chooses(members, labels) {
  if (members?.tag === 'all') return true;
  if (members?.tag === 'matching') return matchLabels(labels, members.val);
  return false;
}

/**
 * An in-memory host for unit tests: a store of objects, recorded writes (`calls`), `events` and
 * `logs`, and errors to inject (`fail`); and member clusters, each a `FakeHost` of its own
 * (`addMember`).
 *
 * The `fleet` calls (`ctx.inCluster(name)`) act in the named member (undefined: this host's own
 * cluster) with the member's own store, records and failures, and refuse as the host does: a
 * member not engaged (never added, or removed) throws `Unavailable` ('cluster "eu" is not engaged
 * by this host now'), one outside `scope` `Forbidden` ('cluster "eu" is not within the plugin's
 * clusters (its `clusters` scope)').
 */
export class FakeHost {
  /** The host that engaged this member (undefined for the host itself): its metadata-only kinds and cache-only rule hold here too. */
  #hub;

  constructor(objects = [], { labels = {} } = {}) {
    this.objects = new Map();
    /** The kinds the plugin reads metadata-only (`Harness` sets the manifest's): see `handed`. */
    this.metadataOnly = [];
    /** The fields it reads of others, `{ resource, fields }` (`Harness` sets the manifest's): see `answered`. */
    this.readsFields = [];
    /** Recorded writes: `{ op, object, resource, namespace, name, force, patchType }`. */
    this.calls = [];
    this.events = [];
    this.logs = [];
    this.failures = new Map();
    /**
     * Set, to the rule it states, while a call may read the cache and nothing else (`Harness`
     * sets `COMPOSING` during a declarative controller's calls): client and events calls are
     * refused with `Forbidden` ("<verb> <kind> refused: <rule>"), as the host refuses them, and
     * not recorded.
     */
    this.cacheOnly = undefined;
    this.nextUid = 1;
    this.nextVersion = 1;
    /** Member clusters (contract 0.1.4), by name: each a fake host of its own. */
    this.members = new Map();
    /** A member's labels (what the host's cluster listing and member selectors see). */
    this.labels = { ...labels };
    /**
     * The plugin's clusters, the WIT `cluster-scope` (`Harness` sets the manifest's): the members
     * `clusters()` lists and the fleet calls reach. Undefined: every engaged member.
     */
    this.scope = undefined;
    /** The cluster of the call's object, what `fleet.current` answers: undefined for this host's own (`Harness` sets it during a call in a member). */
    this.current = undefined;
    this.add(...objects);
  }

  /**
   * Engages a member cluster (replacing one of the same name) with these labels and objects;
   * returns its fake host, to add objects to, inject failures into (`fail`) and assert on
   * (`applied()`, `writes()`, `events`).
   */
  addMember(name, { labels = {}, objects = [] } = {}) {
    const member = new FakeHost(objects, { labels });
    member.#hub = this;
    this.members.set(name, member);
    return member;
  }

  /** The fake host of an engaged member cluster. */
  member(name) {
    const member = this.members.get(name);
    if (member === undefined) throw new Error(`no member cluster ${JSON.stringify(name)} in the fake host (add it with addMember)`);
    return member;
  }

  /** Disengages a member cluster: calls naming it throw `Unavailable` from now on. */
  removeMember(name) {
    this.members.delete(name);
  }

  /** Whether the plugin's `scope` takes the engaged member `name` (serves or reaches it); every engaged member without a scope. */
  reaches(name) {
    const member = this.members.get(name);
    if (member === undefined) return false;
    return this.scope === undefined || chooses(this.scope.serve, member.labels) || chooses(this.scope.reach, member.labels);
  }

  /** Whether the plugin's `scope` serves the engaged member `name` (reconciles its primaries); every engaged member without a scope. */
  serves(name) {
    const member = this.members.get(name);
    if (member === undefined) return false;
    return this.scope === undefined || chooses(this.scope.serve, member.labels);
  }

  // --- setting up ---

  /** Puts objects in the store, replacing same-named ones; missing uid and resourceVersion are filled in. */
  add(...objects) {
    for (const obj of objects) {
      const stored = clone(obj);
      stored.metadata ??= {};
      stored.metadata.uid ??= this.#uid();
      stored.metadata.resourceVersion ??= this.#version();
      this.objects.set(objKey(stored), stored);
    }
  }

  /**
   * Makes the next `times` calls of `op` (cacheGet, cacheList, cacheListControlled, apply,
   * applyStatus, create, update, updateStatus, patch, delete, publishEvent) throw `error`.
   */
  fail(op, error, times = 1) {
    const queue = this.failures.get(op) ?? [];
    for (let i = 0; i < times; i++) queue.push(error);
    this.failures.set(op, queue);
  }

  /** An object from the store (a copy), to assert on. */
  get(resource, namespace, name) {
    return clone(this.objects.get(storeKey(resource, namespace, name)));
  }

  /**
   * `obj` as the host hands it to the plugin (cache reads, `mapRelated`): of a kind in
   * `metadataOnly`, only its `apiVersion`, `kind` and `metadata` (without `managedFields`). Not a
   * copy: it shares `obj`'s values.
   */
  handed(resource, obj) {
    const kinds = this.#hub === undefined ? this.metadataOnly : [...this.metadataOnly, ...this.#hub.metadataOnly];
    return kinds.some((g) => sameGvk(g, resource)) ? metadataOf(obj) : this.answered(resource, obj);
  }

  /**
   * `obj` as the host hands it in a request or a write's answer: of a kind in `readsFields`, its
   * metadata and those fields alone. Not a copy.
   */
  answered(resource, obj) {
    const declared = (this.#hub ?? this).readsFields.find((p) => sameGvk(p.resource, resource));
    return declared === undefined ? obj : projected(obj, declared.fields);
  }

  // --- what happened ---

  /** Recorded writes, optionally of one operation and of one kind. */
  writes(op = undefined, kind = undefined) {
    return this.calls.filter((c) => (op === undefined || c.op === op) && (kind === undefined || (c.resource?.kind ?? c.object?.kind) === kind));
  }

  /** Objects sent to `apply`, in order. */
  applied(kind = undefined) {
    return this.writes('apply', kind).map((c) => c.object);
  }

  /** Objects sent to `applyStatus`, in order. */
  statusApplied(kind = undefined) {
    return this.writes('applyStatus', kind).map((c) => c.object);
  }

  // --- the host interface ---

  #uid() {
    return `uid-${this.nextUid++}`;
  }

  #version() {
    return String(this.nextVersion++);
  }

  /** Refuses `what` while only cache reads are allowed (`cacheOnly`). */
  #refuse(what) {
    const rule = this.cacheOnly ?? this.#hub?.cacheOnly;
    if (rule !== undefined) throw new Forbidden(`${what} refused: ${rule}`);
  }

  #maybeFail(op) {
    const queue = this.failures.get(op);
    if (queue?.length) throw queue.shift();
  }

  #parse(text) {
    let obj;
    try {
      obj = JSON.parse(text);
    } catch (e) {
      throw new Invalid(`bad JSON: ${e.message}`);
    }
    if (!isObject(obj) || !obj.apiVersion || !obj.kind || !obj.metadata?.name) {
      throw new Invalid('the object must name its apiVersion, kind and metadata.name');
    }
    return obj;
  }

  #store(obj, { isNew, specChanged }) {
    obj.metadata ??= {};
    if (isNew) {
      obj.metadata.uid ||= this.#uid();
      obj.metadata.generation ??= 1;
    } else if (specChanged) {
      obj.metadata.generation = Number(obj.metadata.generation ?? 1) + 1;
    }
    obj.metadata.resourceVersion = this.#version();
    this.objects.set(objKey(obj), obj);
    return JSON.stringify(this.answered(gvkOf(obj), obj));
  }

  #describe(obj) {
    return `${gvkString(gvkOf(obj))} ${keyString(objectKey(obj.metadata?.namespace, obj.metadata?.name))}`;
  }

  cacheGet(resource, namespace, name) {
    this.#maybeFail('cacheGet');
    const stored = this.objects.get(storeKey(resource, namespace, name));
    return stored === undefined ? undefined : JSON.stringify(this.handed(resource, stored));
  }

  cacheList(resource, namespace, labelSelector) {
    this.#maybeFail('cacheList');
    return this.select(resource, namespace, labelSelector).map((o) => JSON.stringify(this.handed(resource, o)));
  }

  cacheListControlled(resource, namespace, owner) {
    this.#maybeFail('cacheListControlled');
    return this.select(resource, namespace)
      .filter((o) => controllerUid(o) === owner)
      .map((o) => JSON.stringify(this.handed(resource, o)));
  }

  /**
   * The stored objects of a kind (matched by group and kind), in `namespace` (every one when
   * undefined), matching a label selector, sorted by namespace then name: what `cacheList` hands
   * (through `handed`). Not copies.
   */
  select(resource, namespace = undefined, labelSelector = undefined) {
    const found = [...this.objects.values()].filter((o) => {
      const g = gvkOf(o);
      return (
        g.group === resource.group &&
        g.kind === resource.kind &&
        (namespace === undefined || (o.metadata?.namespace ?? '') === namespace) &&
        matchLabels(o.metadata?.labels ?? {}, labelSelector)
      );
    });
    return found.sort(byKey);
  }

  apply(text, force) {
    const obj = this.#parse(text);
    this.#refuse(`patch ${gvkString(gvkOf(obj))}`);
    this.calls.push({ op: 'apply', object: obj, force });
    this.#maybeFail('apply');
    const current = this.objects.get(objKey(obj));
    if (current === undefined) return this.#store(clone(obj), { isNew: true });
    const { status, ...rest } = obj;
    const merged = merge(clone(current), rest, false);
    return this.#store(merged, { isNew: false, specChanged: JSON.stringify(merged.spec) !== JSON.stringify(current.spec) });
  }

  applyStatus(text, force) {
    const obj = this.#parse(text);
    this.#refuse(`patch ${gvkString(gvkOf(obj))}`);
    this.calls.push({ op: 'applyStatus', object: obj, force });
    this.#maybeFail('applyStatus');
    const current = this.objects.get(objKey(obj));
    if (current === undefined) throw new NotFound(`${this.#describe(obj)} not found`);
    const merged = clone(current);
    merged.status = merge(isObject(merged.status) ? merged.status : {}, obj.status ?? {}, false);
    return this.#store(merged, { isNew: false, specChanged: false });
  }

  create(text) {
    const obj = this.#parse(text);
    this.#refuse(`create ${gvkString(gvkOf(obj))}`);
    this.calls.push({ op: 'create', object: obj });
    this.#maybeFail('create');
    if (this.objects.has(objKey(obj))) throw new AlreadyExists(`${this.#describe(obj)} already exists`);
    return this.#store(clone(obj), { isNew: true });
  }

  #replace(op, text, statusOnly) {
    const obj = this.#parse(text);
    this.#refuse(`update ${gvkString(gvkOf(obj))}`);
    const declared = (this.#hub ?? this).readsFields.find((p) => sameGvk(p.resource, gvkOf(obj)));
    if (declared !== undefined && !(statusOnly && declared.fields.includes('status'))) {
      const what = statusOnly ? 'the status of' : 'the whole';
      throw new Invalid(
        `update replaces ${what} ${gvkString(gvkOf(obj))}, and the plugin is handed projected objects of it (readsFields): write it with apply or patch`,
      );
    }
    this.calls.push({ op, object: obj });
    this.#maybeFail(op);
    const current = this.objects.get(objKey(obj));
    if (current === undefined) throw new NotFound(`${this.#describe(obj)} not found`);
    if (obj.metadata.resourceVersion !== current.metadata.resourceVersion) {
      throw new Conflict(`${this.#describe(obj)}: the object has been modified`);
    }
    let next;
    if (statusOnly) {
      next = clone(current);
      next.status = clone(obj.status);
    } else {
      next = clone(obj);
      next.metadata.uid = current.metadata.uid;
      next.metadata.generation = current.metadata.generation ?? 1;
      if (current.status !== undefined) next.status = clone(current.status);
    }
    return this.#store(next, { isNew: false, specChanged: !statusOnly && JSON.stringify(next.spec) !== JSON.stringify(current.spec) });
  }

  update(text) {
    return this.#replace('update', text, false);
  }

  updateStatus(text) {
    return this.#replace('updateStatus', text, true);
  }

  patch(resource, namespace, name, patchType, body) {
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch (e) {
      throw new Invalid(`bad JSON patch body: ${e.message}`);
    }
    this.#refuse(`patch ${gvkString(resource)}`);
    this.calls.push({ op: 'patch', object: parsed, resource, namespace, name, patchType });
    this.#maybeFail('patch');
    const current = this.objects.get(storeKey(resource, namespace, name));
    const what = `${gvkString(resource)} ${keyString(objectKey(namespace, name))}`;
    if (current === undefined) throw new NotFound(`${what} not found`);
    let next;
    if (patchType === 'json') {
      if (!Array.isArray(parsed)) throw new Invalid('a JSON patch is an array of operations');
      next = jsonPatch(current, parsed);
    } else {
      if (!isObject(parsed)) throw new Invalid('a merge patch is an object');
      const wanted = parsed.metadata?.resourceVersion;
      if (wanted !== undefined && wanted !== current.metadata.resourceVersion) throw new Conflict(`${what}: the object has been modified`);
      next = merge(clone(current), parsed, true);
    }
    return this.#store(next, { isNew: false, specChanged: JSON.stringify(next.spec) !== JSON.stringify(current.spec) });
  }

  delete(resource, namespace, name) {
    this.#refuse(`delete ${gvkString(resource)}`);
    this.calls.push({ op: 'delete', resource, namespace, name });
    this.#maybeFail('delete');
    if (!this.objects.delete(storeKey(resource, namespace, name))) {
      throw new NotFound(`${gvkString(resource)} ${keyString(objectKey(namespace, name))} not found`);
    }
  }

  publishEvent(event) {
    this.#refuse('an Event');
    this.#maybeFail('publishEvent');
    this.events.push(clone(event));
  }

  log(level, message, fields) {
    this.logs.push({ level, message, fields: Object.fromEntries(fields.map((f) => [f.key, f.value])) });
  }

  // --- the fleet (contract 0.1.4) ---

  currentCluster() {
    return this.current;
  }

  clusters() {
    return [...this.members.keys()]
      .sort()
      .filter((name) => this.reaches(name))
      .map((name) => ({ name, labels: Object.entries(this.members.get(name).labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) }));
  }

  /** The fake host of the cluster a fleet call names, or the host's refusal. */
  #target(cluster) {
    if (cluster === undefined || cluster === null) return this;
    if (cluster === this.current && this.members.has(cluster)) return this.members.get(cluster);
    const named = `cluster ${JSON.stringify(cluster)}`;
    if (!this.members.has(cluster)) throw new Unavailable(`${named} is not engaged by this host now`);
    if (!this.reaches(cluster)) throw new Forbidden(`${named} is not within the plugin's clusters (its \`clusters\` scope)`);
    return this.members.get(cluster);
  }

  fleetGet(cluster, resource, namespace, name) {
    return this.#target(cluster).cacheGet(resource, namespace, name);
  }

  fleetList(cluster, resource, namespace, labelSelector) {
    return this.#target(cluster).cacheList(resource, namespace, labelSelector);
  }

  fleetApply(cluster, text, force) {
    return this.#target(cluster).apply(text, force);
  }

  fleetApplyStatus(cluster, text, force) {
    return this.#target(cluster).applyStatus(text, force);
  }

  fleetCreate(cluster, text) {
    return this.#target(cluster).create(text);
  }

  fleetUpdate(cluster, text) {
    return this.#target(cluster).update(text);
  }

  fleetUpdateStatus(cluster, text) {
    return this.#target(cluster).updateStatus(text);
  }

  fleetPatch(cluster, resource, namespace, name, patchType, body) {
    return this.#target(cluster).patch(resource, namespace, name, patchType, body);
  }

  fleetDelete(cluster, resource, namespace, name) {
    return this.#target(cluster).delete(resource, namespace, name);
  }
}

/**
 * The scope, its member selectors parsed as the host parses them: one that does not parse refuses
 * the plugin (`Refused`), naming the field, as the host does.
 */
function checked(scope) {
  for (const [field, members] of [
    ['clusters.serve', scope.serve],
    ['clusters.reach', scope.reach],
  ]) {
    if (members?.tag !== 'matching') continue;
    try {
      parseSelector(members.val);
    } catch (e) {
      throw new Refused(`manifest field \`${field}\`: ${e.message}`);
    }
  }
  return scope;
}

/** Calls of the host a call for an object of a member sees that are the host's, not the member's. */
const HUB_CALLS = new Set(['currentCluster', 'clusters', 'log']);

/**
 * The host as a call for an object of a member cluster sees it: `cache`, `client` and `events` act
 * in the member, the fleet calls and the log are the host's.
 */
function served(hub, member) {
  return new Proxy(member, {
    get(target, prop) {
      const from = typeof prop === 'string' && (prop.startsWith('fleet') || HUB_CALLS.has(prop)) ? hub : target;
      const value = from[prop];
      return typeof value === 'function' ? value.bind(from) : value;
    },
  });
}

const sameKind = (a, b) => a.group === b.group && a.kind === b.kind;

/** `{ resource, items }` entries as the WIT request has them: items as JSON text, sorted by key. */
const wire = (groups) => groups.map(({ resource, items }) => ({ resource, items: [...items].sort(byKey).map((o) => JSON.stringify(o)) }));

/**
 * A controller described and ready to call against a `FakeHost`, the way the component runs it:
 * a `Controller` or `Composite` class, or an author's module (as `kubewasm-js build` finds its
 * controller: `findController`).
 */
export class Harness {
  constructor(controller, { settings = {}, objects = [] } = {}) {
    this.host = new FakeHost(objects);
    this.runner = new Runner(typeof controller === 'function' ? controller : findController(controller), this.host);
    /**
     * The manifest spec the controller described to the host; `rules` is what its `access` export
     * answers, `metadataOnly` what its `views` export answers (the host then hands those kinds as
     * metadata: `FakeHost.handed`), `scope` what its `clusters` export answers.
     */
    this.manifest = this.runner.describe(JSON.stringify(settings));
    this.host.metadataOnly = [...this.manifest.metadataOnly];
    this.host.readsFields = this.manifest.readsFields.map((p) => ({ ...p, fields: [...p.fields] }));
    /** What its `clusters` export answers; the fake host reaches members by it. */
    this.host.scope = checked(this.runner.scope());
  }

  get controller() {
    return this.runner.controller;
  }

  /** What its `composite.describe-composition` answers: a declarative controller's composition, else undefined. */
  get composition() {
    return this.runner.describeComposition();
  }

  #primary(objOrKey, cluster = undefined) {
    if (objOrKey.apiVersion === undefined && objOrKey.name !== undefined) {
      const store = cluster === undefined ? this.host : this.host.member(cluster);
      const stored = store.get(this.manifest.primary, objOrKey.namespace, objOrKey.name);
      if (stored === undefined) {
        const where = cluster === undefined ? '' : ` of member cluster ${JSON.stringify(cluster)}`;
        throw new Error(`no ${gvkString(this.manifest.primary)} ${keyString(objOrKey)} in the fake host${where}`);
      }
      return [objectKey(objOrKey.namespace, objOrKey.name), JSON.stringify(this.host.answered(this.manifest.primary, stored))];
    }
    return [objectKey(objOrKey.metadata?.namespace, objOrKey.metadata?.name ?? ''), JSON.stringify(this.host.answered(this.manifest.primary, objOrKey))];
  }

  /**
   * Runs `method` of a plain controller on a primary in `cluster` (undefined: the host's own), as
   * the host does for a plugin that serves it: `cache`, `client` and `events` act in the member,
   * `ctx.cluster()` names it. A cluster the plugin does not serve is an error (the host never
   * calls it for one).
   */
  #call(method, objOrKey, retriesOrOptions) {
    const { retries = 0, cluster = undefined } =
      typeof retriesOrOptions === 'object' && retriesOrOptions !== null ? retriesOrOptions : { retries: retriesOrOptions ?? 0 };
    if (cluster === undefined) {
      if (!this.runner.scope().serveLocal) throw new Error("the plugin does not serve the host's own cluster (serveLocal(false)): pass { cluster }");
      return this.runner.call(method, ...this.#primary(objOrKey), retries);
    }
    const member = this.host.member(cluster);
    if (!this.host.serves(cluster)) throw new Error(`the plugin does not serve member cluster ${JSON.stringify(cluster)} (its manifest's serveMembers)`);
    const primary = this.#primary(objOrKey, cluster);
    const before = [this.runner.host, this.host.current];
    [this.runner.host, this.host.current] = [served(this.host, member), cluster];
    try {
      return this.runner.call(method, ...primary, retries);
    } finally {
      [this.runner.host, this.host.current] = before;
    }
  }

  /**
   * Runs `reconcile` on an object (or the stored primary of a `{ namespace, name }` key). The
   * second argument is `retries`, or `{ retries, cluster }`: with `cluster`, the object lives in
   * that member cluster (and a key names a primary of its store), and a plugin that serves it
   * reads, writes and records Events there, `ctx.cluster()` naming it.
   */
  reconcile(objOrKey, retriesOrOptions = 0) {
    return this.#call('reconcile', objOrKey, retriesOrOptions);
  }

  /**
   * Runs `finalize`: a plain controller's on an object or key (`retries` or `{ retries, cluster }`
   * its second argument, as for `reconcile`), a declarative controller's as `sync` does (with
   * `{ children, related }`), `finalizing` set.
   */
  finalize(objOrKey, retriesOrOptions = undefined) {
    if (this.runner.declarative) return this.#compose('finalize', objOrKey, retriesOrOptions ?? {});
    return this.#call('finalize', objOrKey, retriesOrOptions ?? 0);
  }

  /** Runs `released`, as the host does once a primary stops matching the primary selector (options as for `reconcile`). */
  released(objOrKey, retriesOrOptions = 0) {
    return this.#call('released', objOrKey, retriesOrOptions);
  }

  /** Runs `mapRelated` on `obj`, handed as the host hands it (`FakeHost.handed`). */
  mapRelated(resource, obj) {
    return this.runner.mapRelated(resource, JSON.stringify(this.host.handed(resource, obj)));
  }

  // --- declarative controllers ---

  /** Runs `run` as the host runs a declarative or webhook call: client and events calls refused, `rule` saying why. */
  #cacheOnly(run, rule = COMPOSING) {
    this.host.cacheOnly = rule;
    try {
      return run();
    } finally {
      this.host.cacheOnly = undefined;
    }
  }

  /** Runs a declarative controller's `customize` on a parent (or key): its rules, as the host gets them. */
  customize(parentOrKey) {
    const [, parent] = this.#primary(parentOrKey);
    return this.#cacheOnly(() => this.runner.customize(parent));
  }

  /**
   * Runs a declarative controller's `sync` on a parent (or the stored parent of a key) and
   * returns its answer as the host gets it: `{ status, children, resyncAfter, finalized }`
   * (status undefined for none, resyncAfter in whole milliseconds).
   *
   * `children` are the parent's children (objects of its child kinds; an object of another kind
   * is an error); by default the fake host's objects of those kinds, in the parent's namespace
   * (every namespace for a cluster-scoped parent), that the parent controls (a controller owner
   * reference with its uid). `related` are the related objects; by default, as the host does,
   * `customize` is run and the fake host's objects its rules select are handed, one entry per
   * rule.
   */
  sync(parentOrKey, { children = undefined, related = undefined } = {}) {
    return this.#compose('sync', parentOrKey, { children, related });
  }

  /** The child kinds, in the order the host hands them: the composition's rules, then the other `owns` kinds. */
  #childKinds() {
    const kinds = (this.manifest.composition?.children ?? []).map((r) => r.resource);
    for (const resource of this.manifest.owns) if (!kinds.some((k) => sameKind(k, resource))) kinds.push(resource);
    return kinds;
  }

  #children(parent, given) {
    const groups = this.#childKinds().map((resource) => ({ resource, items: [] }));
    if (given === undefined) {
      const namespace = parent.metadata?.namespace || undefined;
      for (const group of groups) group.items = this.host.select(group.resource, namespace).filter((o) => isControlledBy(o, parent));
      return groups;
    }
    for (const obj of given) {
      const group = groups.find((g) => sameKind(g.resource, gvkOf(obj)));
      if (group === undefined) throw new Error(`${gvkString(gvkOf(obj))} ${obj.metadata?.name} is not of a child kind of the manifest (.child() or .owns())`);
      group.items.push(obj);
    }
    return groups;
  }

  #related(parentText, given) {
    if (given !== undefined) {
      const groups = [];
      for (const obj of given) {
        const resource = gvkOf(obj);
        const group = groups.find((g) => sameKind(g.resource, resource));
        if (group === undefined) groups.push({ resource, items: [obj] });
        else group.items.push(obj);
      }
      return groups;
    }
    const rules = this.#cacheOnly(() => this.runner.customize(parentText));
    return rules.map(({ resource, namespace, names, labelSelector }) => ({
      resource,
      items: this.host
        .select(resource, namespace, labelSelector)
        .filter((o) => names.length === 0 || names.includes(o.metadata?.name))
        .map((o) => this.host.handed(resource, o)),
    }));
  }

  #compose(method, parentOrKey, { children = undefined, related = undefined }) {
    if (!this.runner.declarative) throw new Error(`${method} is never called for a plain controller (${this.runner.ControllerClass.name}): use reconcile`);
    const [, text] = this.#primary(parentOrKey);
    const parent = JSON.parse(text);
    const request = {
      parent: text,
      children: wire(this.#children(parent, children)),
      related: wire(this.#related(text, related)),
      finalizing: method === 'finalize',
    };
    const answer = this.#cacheOnly(() => this.runner.sync(method, request));
    return {
      status: answer.status === undefined ? undefined : JSON.parse(answer.status),
      children: answer.children.map((c) => JSON.parse(c)),
      resyncAfter: answer.resyncAfter,
      finalized: answer.finalized,
    };
  }

  // --- webhooks ---

  /**
   * Calls the manifest's hook `hook` as the host does for an AdmissionReview — `validate` or
   * `mutate` as declared, with client and events calls refused — and returns its answer as the
   * API server gets it: `{ allowed, warnings, code, message, object }` (a denial's `code` and
   * `message`; `object`, what a mutating hook made of the object, undefined when unchanged).
   * `object` is the object on create and update, `oldObject` on update and delete. A hook or an
   * operation the manifest does not declare is an Error (the host never sends it); anything but
   * `Denied` thrown propagates (in the component, a fault).
   */
  admit({ hook, operation, object = undefined, oldObject = undefined, user = {}, dryRun = false, subresource = undefined }) {
    const declared = this.manifest.webhooks.find((h) => h.name === hook);
    if (declared === undefined) throw new Error(`the manifest declares no hook ${JSON.stringify(hook)}`);
    if (!declared.operations.includes(operation)) throw new Error(`hook ${JSON.stringify(hook)} does not admit ${operation}`);
    const subject = object ?? oldObject;
    const request = {
      hook,
      uid: 'review-uid',
      kind: gvkOf(subject),
      subresource,
      namespace: subject.metadata?.namespace || undefined,
      name: subject.metadata?.name ?? '',
      operation,
      user: { username: '', uid: '', groups: [], ...user },
      object: object === undefined ? undefined : JSON.stringify(object),
      oldObject: oldObject === undefined ? undefined : JSON.stringify(oldObject),
      dryRun,
    };
    try {
      if (!declared.mutating) return { allowed: true, warnings: this.#cacheOnly(() => this.runner.validate(request), HOOKING) };
      const mutation = this.#cacheOnly(() => this.runner.mutate(request), HOOKING);
      return { allowed: true, warnings: mutation.warnings, object: mutation.object === undefined ? undefined : JSON.parse(mutation.object) };
    } catch (e) {
      if (!(e instanceof Denied)) throw e;
      return { allowed: false, warnings: e.warnings, code: e.code, message: e.message };
    }
  }

  /**
   * Calls the conversion hook as the host does, with client and events calls refused: the
   * objects (of kinds the manifest `converts`) in `desiredApiVersion`. Throws `Denied` for the
   * plugin's refusal, and an Error for an answer the host refuses as a fault (another length; an
   * object whose apiVersion is not the desired one, or whose kind, name, namespace or uid
   * changed).
   */
  convert(objects, desiredApiVersion) {
    for (const obj of objects) {
      if (!this.manifest.conversions.some((k) => sameKind(k, gvkOf(obj)))) throw new Error(`the manifest converts no ${gvkString(gvkOf(obj))}`);
    }
    const answers = this.#cacheOnly(
      () =>
        this.runner.convert(
          objects.map((o) => JSON.stringify(o)),
          desiredApiVersion,
        ),
      HOOKING,
    );
    if (answers.length !== objects.length) throw new Error(`the host refuses ${answers.length} objects converted from ${objects.length}`);
    const identity = (o) => JSON.stringify([o.kind, o.metadata?.name, o.metadata?.namespace, o.metadata?.uid]);
    return answers.map((text, i) => {
      const converted = JSON.parse(text);
      if (converted.apiVersion !== desiredApiVersion || identity(converted) !== identity(objects[i])) {
        throw new Error(
          `the host refuses ${keyString(objectKey(objects[i].metadata?.namespace, objects[i].metadata?.name))} converted to ${converted.apiVersion} ${converted.kind}: apiVersion ${desiredApiVersion} wanted, kind, name, namespace and uid kept`,
        );
      }
      return converted;
    });
  }
}

export { Refused } from './runtime.js';
