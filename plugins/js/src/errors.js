// Errors as exceptions, one class per WIT error code. Every failed host call throws a
// `KubewasmError` subclass (`NotFound`, `Conflict`, ...):
//
//   try { ctx.create(configMap); } catch (e) { if (!(e instanceof AlreadyExists)) throw e; }
//
// A `KubewasmError` escaping `reconcile`, `finalize` or `released` fails the call with its code
// (`Conflict` retries without a Warning Event, the others with one) and its message (cut to the
// 64 KiB the host takes); the host retries the key with backoff. Anything else thrown is a bug:
// the call traps, a fault, as an uncaught exception or panic is in every SDK.

import { ErrorCode } from './core.js';

/** A failed host call or reconcile: `code` to branch on, `message` for humans. */
export class KubewasmError extends Error {
  constructor(message, code = undefined) {
    super(message);
    this.name = new.target.name;
    if (code !== undefined) this.code = ErrorCode.parse(code);
    else if (this.code === undefined) this.code = 'other';
  }

  /** The exception of the subclass for `code`. */
  static fromCode(code, message) {
    const cls = BY_CODE[ErrorCode.parse(code)];
    return new cls(message);
  }

  toString() {
    return `${this.code}: ${this.message}`;
  }
}

function coded(name, code) {
  const cls = {
    [name]: class extends KubewasmError {},
  }[name];
  cls.prototype.code = code;
  return cls;
}

/** The object does not exist. */
export const NotFound = coded('NotFound', 'not-found');
/** A create found an object of that name already there. */
export const AlreadyExists = coded('AlreadyExists', 'already-exists');
/** Another actor changed the object first: re-read, then retry (no Warning Event when thrown from reconcile). */
export const Conflict = coded('Conflict', 'conflict');
/** The manifest does not grant this access, or Kubernetes RBAC refused it. */
export const Forbidden = coded('Forbidden', 'forbidden');
/** A malformed request: bad JSON, a missing name, a bad selector, an unserved resource... */
export const Invalid = coded('Invalid', 'invalid');
/** The API server could not be reached, throttled, or this host is a standby. Retry later. */
export const Unavailable = coded('Unavailable', 'unavailable');
/** Anything else; the message says what. */
export const Other = coded('Other', 'other');

const BY_CODE = {
  'not-found': NotFound,
  'already-exists': AlreadyExists,
  conflict: Conflict,
  forbidden: Forbidden,
  invalid: Invalid,
  unavailable: Unavailable,
  other: Other,
};

/**
 * Thrown from a controller's constructor to refuse loading: the message says what is wrong with
 * the settings (any other exception refuses too, prefixed with its name).
 */
export class SettingsError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SettingsError';
  }
}
