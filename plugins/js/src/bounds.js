// The sizes the host takes from a plugin (the WIT's doc comments; README "Security model"),
// checked before each host call: an over-long value throws the error the host itself gives —
// `Invalid` with the message `"<field> is <n> bytes; at most <max>"` — so a plugin sees the same
// thing in every SDK and under `kubewasm test`, and the value never crosses the boundary. Also the
// cut of the error messages a plugin returns to what the host takes.
//
// Sizes are UTF-8 bytes, as the host counts them (a JavaScript string's length counts UTF-16
// code units).

import { Invalid } from './errors.js';

/** `metadata.name` of keys and refs, and `name` arguments. */
export const MAX_NAME = 253;
export const MAX_NAMESPACE = 63;
/** A member cluster's name (`ctx.inCluster`). */
export const MAX_CLUSTER = 253;
export const MAX_GROUP = 253;
export const MAX_VERSION = 63;
export const MAX_KIND = 63;
/** The JSON text of an object a client call sends. */
export const MAX_OBJECT = 3 * 2 ** 20;
export const MAX_PATCH_BODY = 3 * 2 ** 20;
export const MAX_LABEL_SELECTOR = 4096;
/** The owner uid of `listControlled` (a uid is 36 bytes). */
export const MAX_OWNER = 253;
/** An event's `reason` and `action` (each at least 1 byte). */
export const MAX_EVENT_REASON = 128;
export const MAX_EVENT_NOTE = 1024;
/** An error message a plugin returns (and a `describe` refusal): the host takes no more. */
export const MAX_ERROR_MESSAGE = 64 * 1024;

/**
 * How many code units of `value` fit in `limit` UTF-8 bytes, whole characters only, counted as
 * TextEncoder encodes them: a code unit below U+0080 is 1 byte, below U+0800 2, a surrogate pair
 * 4, anything else 3 (a lone surrogate too: it becomes U+FFFD).
 */
function fitting(value, limit) {
  let bytes = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    const pair = unit >= 0xd800 && unit <= 0xdbff && (value.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    const width = unit < 0x80 ? 1 : unit < 0x800 ? 2 : pair ? 4 : 3;
    if (bytes + width > limit) return i;
    bytes += width;
    if (pair) i++;
  }
  return value.length;
}

const ASCII = /^[\0-\x7f]*$/;
const encoder = new TextEncoder();

/**
 * The UTF-8 length of `value`: its length when it is ASCII (a native regex test), else what
 * TextEncoder makes of it (native too; a counting loop in JavaScript runs interpreted in a
 * component, tens of times slower on a megabyte object).
 */
export function utf8Length(value) {
  return ASCII.test(value) ? value.length : encoder.encode(value).length;
}

/** Throws `Invalid` when `value` is longer than `limit` bytes, with the host's message. */
export function atMost(field, value, limit) {
  // A code unit is at most 3 bytes: short strings need no count.
  if (value === undefined || value === null || value.length * 3 <= limit) return;
  const size = utf8Length(value);
  if (size > limit) throw new Invalid(`${field} is ${size} bytes; at most ${limit}`);
}

export function checkGvk(resource) {
  atMost('group', resource.group, MAX_GROUP);
  atMost('version', resource.version, MAX_VERSION);
  atMost('kind', resource.kind, MAX_KIND);
}

/** A resource, namespace and name, in the order the host checks them. */
export function checkTarget(resource, namespace, name) {
  checkGvk(resource);
  atMost('namespace', namespace, MAX_NAMESPACE);
  atMost('name', name, MAX_NAME);
}

/** The text of an event's `reason`, `action` and `note`. */
export function checkEvent(reason, action, note) {
  for (const [field, value] of [
    ['event reason', reason],
    ['event action', action],
  ]) {
    if (!value) throw new Invalid(`${field} must not be empty`);
    atMost(field, value, MAX_EVENT_REASON);
  }
  atMost('event note', note, MAX_EVENT_NOTE);
}

/**
 * `message` cut to at most `limit` UTF-8 bytes (`MAX_ERROR_MESSAGE` unless said), at a character
 * boundary: a longer one would be a fault of the plugin, and the start says what went wrong.
 */
export function cut(message, limit = MAX_ERROR_MESSAGE) {
  if (message.length * 3 <= limit) return message;
  return message.slice(0, fitting(message, limit));
}
