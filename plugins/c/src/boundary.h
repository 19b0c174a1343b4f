/* What both sides of the C SDK's boundary share (internal; not for plugins): the host's size
 * bounds, and the conversions between C strings, JSON values and the bindings' types. Depends on
 * the bindings' types (controller.h) and the JSON values, never on the bindings' functions, so
 * that the exports (exports.c, which the bindings call) and the host calls (host.c, which call
 * the bindings) stay apart.
 */
#ifndef KUBEWASM_BOUNDARY_H
#define KUBEWASM_BOUNDARY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller.h"
#include "kubewasm.h"

/* The host's bounds (wit/; the same constants as every other SDK's). */
enum {
    MAX_NAME = 253,
    MAX_NAMESPACE = 63,
    MAX_GROUP = 253,
    MAX_VERSION = 63,
    MAX_KIND = 63,
    MAX_OBJECT = 3 << 20,
    MAX_LABEL_SELECTOR = 4096,
    MAX_OWNER = 253,
    MAX_EVENT_REASON = 128,
    MAX_EVENT_NOTE = 1024,
    MAX_ERROR_MESSAGE = 64 << 10,
    MAX_DENIAL_MESSAGE = 4096, /* a webhook's denial, and a conversion's refusal */
};

/* ---- Strings across the boundary ------------------------------------------------------------ */

static inline controller_string_t wit_str(const char *s) {
    return (controller_string_t){(uint8_t *)s, s ? strlen(s) : 0};
}

static inline controller_option_string_t wit_opt(const char *s) {
    return s ? (controller_option_string_t){true, wit_str(s)} : (controller_option_string_t){0};
}

static inline char *from_wit(controller_string_t s) {
    return kw_strndup((const char *)s.ptr, s.len);
}

static inline kubewasm_controller_types_gvk_t wit_gvk(kw_gvk gvk) {
    return (kubewasm_controller_types_gvk_t){wit_str(gvk.group), wit_str(gvk.version), wit_str(gvk.kind)};
}

static inline kw_gvk from_wit_gvk(kubewasm_controller_types_gvk_t gvk) {
    return (kw_gvk){from_wit(gvk.group), from_wit(gvk.version), from_wit(gvk.kind)};
}

/* The bytes of a message the host takes: at most limit, cut at a UTF-8 character boundary (a
 * longer one would be a fault; its start says what went wrong). */
static inline controller_string_t wit_cut(const char *message, size_t limit) {
    size_t len = message ? strlen(message) : 0;
    if (len > limit) {
        len = limit;
        while (len > 0 && ((unsigned char)message[len] & 0xC0) == 0x80) {
            len--;
        }
    }
    return (controller_string_t){(uint8_t *)message, len};
}

/* An error message the host takes: at most MAX_ERROR_MESSAGE. */
static inline controller_string_t wit_message(const char *message) {
    return wit_cut(message, MAX_ERROR_MESSAGE);
}

/* Room for one more item of size bytes in a list of len items held in the arena: a new copy
 * with twice the room when it is full. */
static inline void *grow(void *items, size_t len, size_t *cap, size_t size) {
    if (len < *cap) return items;
    *cap = *cap ? *cap * 2 : 4;
    void *bigger = kw_alloc(*cap * size);
    if (len) memcpy(bigger, items, len * size);
    return bigger;
}

/* The host's objects are JSON by contract: one that is not is a host bug, hence a trap. */
static inline kw_value *decode(controller_string_t text) {
    const char *error = NULL;
    kw_value *value = kw_parse((const char *)text.ptr, text.len, &error);
    if (!value) {
        /* stderr is the host's log too; this file must not call the host's log import */
        fprintf(stderr, "kubewasm: the host sent an object that is not JSON: %s\n", error);
        abort();
    }
    return value;
}

static inline kw_value *decode_list(kubewasm_controller_cache_list_object_t list) {
    kw_value *items = kw_array();
    for (size_t i = 0; i < list.len; i++) {
        kw_push(items, decode(list.ptr[i]));
    }
    return items;
}

/* The call in progress (call.c): exports.c begins each one; kw_use_cluster's choice, NULL for
 * the call's own cluster, "" for the host's own; the warnings of a hook call (kw_warn), in order. */
void kw_call_begin(void);
void kw_call_use_cluster(const char *cluster);
const char *kw_call_cluster(void);
void kw_call_warn(const char *warning);
controller_list_string_t kw_call_warnings(void);

#endif
