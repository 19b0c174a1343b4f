/* JSON values for the kubewasm C SDK: parse, read, build and print the JSON text of Kubernetes
 * objects, in the SDK's per-call arena.
 *
 * Memory: every value, string and error this API returns lives in the arena of the current call
 * (kw_arena_*): it is freed all at once when the call into the plugin returns, so a plugin never
 * frees anything and never keeps a pointer from one call to the next (copy what it must keep with
 * plain malloc). Allocation failure traps (abort), as every other SDK's out-of-memory does.
 *
 * Objects keep their members in insertion order and print them in that order; a key set twice
 * keeps its first position with the new value. Numbers keep integers exact up to 64 bits (a
 * number without fraction or exponent that fits int64 is an integer); others are doubles.
 * Strings are UTF-8 with their length (they may hold NUL). Every reader takes NULL and a value of
 * the wrong type and answers "absent" (NULL, false or the default), so paths chain without checks.
 */
#ifndef KUBEWASM_JSON_H
#define KUBEWASM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kw_type { KW_NULL, KW_BOOL, KW_INT, KW_DOUBLE, KW_STRING, KW_ARRAY, KW_OBJECT } kw_type;

typedef struct kw_value kw_value;

/* ---- The arena ---------------------------------------------------------------------------- */

/* Memory that lives until kw_arena_reset: aligned to 8, never NULL (traps when out of memory). */
void *kw_alloc(size_t size);
/* A NUL-terminated copy of the n bytes at s, in the arena. */
char *kw_strndup(const char *s, size_t n);
char *kw_strdup(const char *s);
/* printf into the arena. */
char *kw_sprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* Frees everything allocated since the last reset. The SDK calls it when a call returns. */
void kw_arena_reset(void);
/* Bytes the arena holds now (for tests and budgets). */
size_t kw_arena_bytes(void);

/* ---- Parsing and printing ------------------------------------------------------------------ */

/* Parses the JSON text of len bytes (RFC 8259: one value, whitespace around it; nesting at most
 * 512 deep). NULL when it is not JSON, with *error (when error is not NULL) set to a message
 * naming the byte offset, e.g. "invalid JSON at byte 17: expected ':'". */
kw_value *kw_parse(const char *text, size_t len, const char **error);
/* The compact JSON text of v (no whitespace), NUL-terminated; *len (when not NULL) its length.
 * NULL prints as null. Doubles print with the fewest digits that read back the same ("%.17g"
 * trimmed is fine); NaN and infinities print as null. Strings escape '"', '\\' and control
 * characters (\n, \t, \r, \b, \f, others \u00XX); other UTF-8 is printed as is. */
char *kw_print(const kw_value *v, size_t *len);

/* ---- Making values -------------------------------------------------------------------------- */

kw_value *kw_null(void);
kw_value *kw_bool(bool b);
kw_value *kw_int(int64_t i);
kw_value *kw_double(double d);
kw_value *kw_string(const char *s); /* copies s; NULL makes a JSON null */
kw_value *kw_stringn(const char *s, size_t n);
kw_value *kw_array(void);
kw_value *kw_object(void);
/* A deep copy. */
kw_value *kw_copy(const kw_value *v);

/* ---- Reading --------------------------------------------------------------------------------- */

kw_type kw_type_of(const kw_value *v); /* KW_NULL for NULL */
/* The member key of an object, or NULL. */
kw_value *kw_get(const kw_value *object, const char *key);
/* Follows keys through nested objects: kw_path(obj, "spec", "replicas", NULL). NULL when any
 * step is absent or not an object. The list must end with NULL. */
kw_value *kw_path(const kw_value *object, ...) __attribute__((sentinel));
/* Elements of an array, members of an object: count and i-th (NULL past the end). */
size_t kw_len(const kw_value *v); /* 0 for anything else */
kw_value *kw_at(const kw_value *array_or_object, size_t i);
const char *kw_key_at(const kw_value *object, size_t i);
/* The string, or NULL when v is not a string; *len (when not NULL) its length. */
const char *kw_str(const kw_value *v);
const char *kw_strn(const kw_value *v, size_t *len);
/* The string, or fallback when v is not a string. */
const char *kw_str_or(const kw_value *v, const char *fallback);
/* An integer (KW_INT, or a KW_DOUBLE with no fraction within int64), else false. */
bool kw_as_int(const kw_value *v, int64_t *out);
int64_t kw_int_or(const kw_value *v, int64_t fallback);
/* Any number as a double, else false. */
bool kw_as_double(const kw_value *v, double *out);
/* A boolean, else fallback. */
bool kw_bool_or(const kw_value *v, bool fallback);
/* Structural equality: same type and value; objects equal whatever the order of their members;
 * an integer equals a double of the same value. */
bool kw_equal(const kw_value *a, const kw_value *b);

/* ---- Changing values ----------------------------------------------------------------------- */

/* Sets member key of object to value (NULL sets JSON null) and returns value; a no-op returning
 * NULL when object is not an object. The value is not copied: it now belongs to object. */
kw_value *kw_set(kw_value *object, const char *key, kw_value *value);
/* Sets the member at the end of a NULL-terminated path of keys, making the objects on the way
 * (replacing a non-object on the way): kw_set_path(obj, kw_int(2), "spec", "replicas", NULL).
 * Returns value, or NULL when object is not an object or the path is empty. */
kw_value *kw_set_path(kw_value *object, kw_value *value, ...) __attribute__((sentinel));
/* Removes member key; true when it was there. */
bool kw_remove(kw_value *object, const char *key);
/* Removes the i-th element of an array (a finalizer from metadata.finalizers, say); true when
 * there was one. */
bool kw_remove_at(kw_value *array, size_t i);
/* Appends value (NULL appends JSON null) to array and returns it; NULL when array is not one. */
kw_value *kw_push(kw_value *array, kw_value *value);

#ifdef __cplusplus
}
#endif

#endif
