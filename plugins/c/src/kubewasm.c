/* The C SDK's side of the boundary: implements the component's exports (wit/) on top of the
 * functions a plugin defines (kubewasm.h), and the plugin's host calls on top of the imports,
 * both through the bindings `wit-bindgen c` generates (controller.h, controller.c).
 *
 * Memory: the canonical ABI's allocations for a call (the arguments the host passes in, the
 * results of host calls) come from the call's arena (cabi_export_realloc, cabi_import_realloc),
 * as does everything the SDK and the plugin make; the post-return of every export resets it. So
 * this file overrides the generated post-returns (weak, and freeing with free()), and leaves the
 * generated cabi_realloc (malloc) to the WASI adapter, whose state outlives calls.
 */
#include <math.h>
#include <stdarg.h>
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
};

/* ---- Strings across the boundary ------------------------------------------------------------ */

static controller_string_t wit_str(const char *s) {
    return (controller_string_t){(uint8_t *)s, s ? strlen(s) : 0};
}

static controller_option_string_t wit_opt(const char *s) {
    return s ? (controller_option_string_t){true, wit_str(s)} : (controller_option_string_t){0};
}

static char *from_wit(controller_string_t s) {
    return kw_strndup((const char *)s.ptr, s.len);
}

static kubewasm_controller_types_gvk_t wit_gvk(kw_gvk gvk) {
    return (kubewasm_controller_types_gvk_t){wit_str(gvk.group), wit_str(gvk.version), wit_str(gvk.kind)};
}

static kw_gvk from_wit_gvk(kubewasm_controller_types_gvk_t gvk) {
    return (kw_gvk){from_wit(gvk.group), from_wit(gvk.version), from_wit(gvk.kind)};
}

/* The bytes of a message the host takes: at most MAX_ERROR_MESSAGE, cut at a UTF-8 character
 * boundary (a longer one would be a fault; its start says what went wrong). */
static controller_string_t wit_message(const char *message) {
    size_t len = message ? strlen(message) : 0;
    if (len > MAX_ERROR_MESSAGE) {
        len = MAX_ERROR_MESSAGE;
        while (len > 0 && ((unsigned char)message[len] & 0xC0) == 0x80) {
            len--;
        }
    }
    return (controller_string_t){(uint8_t *)message, len};
}

/* ---- Errors and results --------------------------------------------------------------------- */

static const char *const CODE_NAMES[] = {"not-found", "already-exists", "conflict", "forbidden", "invalid", "unavailable", "other"};

const char *kw_code_name(kw_code code) {
    return (unsigned)code <= KW_OTHER ? CODE_NAMES[code] : "other";
}

static const kw_error *new_error(kw_code code, char *message) {
    kw_error *err = kw_alloc(sizeof *err);
    err->code = code;
    err->message = message;
    return err;
}

static char *vformat(const char *format, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int len = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    if (len < 0) {
        return kw_strdup(format);
    }
    char *text = kw_alloc((size_t)len + 1);
    vsnprintf(text, (size_t)len + 1, format, args);
    return text;
}

const kw_error *kw_errorf(kw_code code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char *message = vformat(format, args);
    va_end(args);
    return new_error(code, message);
}

const kw_error *kw_ignore_not_found(const kw_error *err) {
    return err && err->code == KW_NOT_FOUND ? NULL : err;
}

kw_result kw_requeue_after(struct timespec after) {
    if (after.tv_sec < 0 || (after.tv_sec == 0 && after.tv_nsec <= 0)) {
        return KW_DONE;
    }
    uint64_t ms = (uint64_t)after.tv_sec * 1000 + ((uint64_t)after.tv_nsec + 999999) / 1000000;
    return kw_requeue_after_ms(ms);
}

kw_result kw_requeue_after_ms(uint64_t milliseconds) {
    return (kw_result){NULL, milliseconds};
}

kw_result kw_fail(const kw_error *err) {
    return (kw_result){err, 0};
}

kw_result kw_failf(kw_code code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char *message = vformat(format, args);
    va_end(args);
    return kw_fail(new_error(code, message));
}

static void emit(kw_level level, const char *message) {
    controller_string_t text = wit_str(message);
    kubewasm_controller_log_list_field_t fields = {0};
    kubewasm_controller_log_emit((kubewasm_controller_log_level_t)level, &text, &fields);
}

void kw_log(kw_level level, const char *format, ...) {
    va_list args;
    va_start(args, format);
    emit(level, vformat(format, args));
    va_end(args);
}

_Noreturn void kw_panic(const char *format, ...) {
    va_list args;
    va_start(args, format);
    emit(KW_ERROR, vformat(format, args));
    va_end(args);
    abort();
}

/* The host's own `invalid` error when value is over limit bytes. */
static const kw_error *at_most(const char *field, const char *value, size_t limit) {
    size_t len = value ? strlen(value) : 0;
    return len > limit ? kw_errorf(KW_INVALID, "%s is %zu bytes; at most %zu", field, len, limit) : NULL;
}

static const kw_error *check_gvk(kw_gvk gvk) {
    const kw_error *err = at_most("group", gvk.group, MAX_GROUP);
    if (!err) err = at_most("version", gvk.version, MAX_VERSION);
    if (!err) err = at_most("kind", gvk.kind, MAX_KIND);
    return err;
}

/* A resource, namespace and name, in the order the host checks them. */
static const kw_error *check_target(kw_gvk gvk, const char *namespace_, const char *name) {
    const kw_error *err = check_gvk(gvk);
    if (!err) err = at_most("namespace", namespace_, MAX_NAMESPACE);
    if (!err) err = at_most("name", name, MAX_NAME);
    return err;
}

static const kw_error *from_wit_error(kubewasm_controller_types_error_t err) {
    kw_code code = err.code <= KW_OTHER ? (kw_code)err.code : KW_OTHER;
    return new_error(code, from_wit(err.message));
}

/* ---- Resources and objects ------------------------------------------------------------------ */

const char *kw_api_version(kw_gvk gvk) {
    return gvk.group && *gvk.group ? kw_sprintf("%s/%s", gvk.group, gvk.version) : gvk.version;
}

kw_gvk kw_gvk_of(const kw_value *object) {
    const char *api_version = kw_str_or(kw_get(object, "apiVersion"), "");
    const char *slash = strchr(api_version, '/');
    kw_gvk gvk = {"", api_version, kw_str_or(kw_get(object, "kind"), "")};
    if (slash) {
        gvk.group = kw_strndup(api_version, (size_t)(slash - api_version));
        gvk.version = slash + 1;
    }
    return gvk;
}

const char *kw_name(const kw_value *object) {
    return kw_str(kw_path(object, "metadata", "name", NULL));
}

const char *kw_namespace(const kw_value *object) {
    return kw_str(kw_path(object, "metadata", "namespace", NULL));
}

const char *kw_uid(const kw_value *object) {
    return kw_str(kw_path(object, "metadata", "uid", NULL));
}

int64_t kw_generation(const kw_value *object) {
    return kw_int_or(kw_path(object, "metadata", "generation", NULL), 0);
}

const char *kw_label(const kw_value *object, const char *key) {
    return kw_str(kw_path(object, "metadata", "labels", key, NULL));
}

const char *kw_annotation(const kw_value *object, const char *key) {
    return kw_str(kw_path(object, "metadata", "annotations", key, NULL));
}

kw_value *kw_new_object(kw_gvk gvk, const char *namespace_, const char *name) {
    kw_value *object = kw_object();
    kw_set(object, "apiVersion", kw_string(kw_api_version(gvk)));
    kw_set(object, "kind", kw_string(gvk.kind));
    kw_value *metadata = kw_set(object, "metadata", kw_object());
    kw_set(metadata, "name", kw_string(name));
    if (namespace_) {
        kw_set(metadata, "namespace", kw_string(namespace_));
    }
    return object;
}

kw_value *kw_status_object(const kw_value *object, kw_value *status) {
    kw_value *result = kw_new_object(kw_gvk_of(object), kw_namespace(object), kw_name(object));
    kw_set(result, "status", status);
    return result;
}

kw_value *kw_controller_ref(const kw_value *owner) {
    kw_value *ref = kw_object();
    kw_set(ref, "apiVersion", kw_copy(kw_get(owner, "apiVersion")));
    kw_set(ref, "kind", kw_copy(kw_get(owner, "kind")));
    kw_set(ref, "name", kw_string(kw_name(owner)));
    kw_set(ref, "uid", kw_string(kw_uid(owner)));
    kw_set(ref, "controller", kw_bool(true));
    kw_set(ref, "blockOwnerDeletion", kw_bool(true));
    return ref;
}

bool kw_is_controlled_by(const kw_value *object, const kw_value *owner) {
    const char *uid = kw_uid(owner);
    const kw_value *refs = kw_path(object, "metadata", "ownerReferences", NULL);
    for (size_t i = 0; uid && i < kw_len(refs); i++) {
        const kw_value *ref = kw_at(refs, i);
        if (kw_bool_or(kw_get(ref, "controller"), false)) {
            const char *ref_uid = kw_str(kw_get(ref, "uid"));
            return ref_uid && strcmp(ref_uid, uid) == 0;
        }
    }
    return false;
}

/* The host's clock to the second, as Kubernetes writes times: "2026-12-03T10:00:30Z". */
static char *now_rfc3339(void) {
    struct timespec now = {0};
    timespec_get(&now, TIME_UTC);
    struct tm *utc = gmtime(&now.tv_sec); /* one thread: gmtime's static result is safe here */
    char *text = kw_alloc(sizeof "2026-12-03T10:00:30Z" + 8);
    strftime(text, sizeof "2026-12-03T10:00:30Z" + 8, "%Y-%m-%dT%H:%M:%SZ", utc);
    return text;
}

void kw_set_condition(kw_value *object, const char *type, const char *status, const char *reason, const char *message) {
    kw_value *conditions = kw_path(object, "status", "conditions", NULL);
    if (kw_type_of(conditions) != KW_ARRAY) {
        conditions = kw_set_path(object, kw_array(), "status", "conditions", NULL);
    }
    kw_value *wanted = kw_object();
    kw_set(wanted, "type", kw_string(type));
    kw_set(wanted, "status", kw_string(status));
    kw_set(wanted, "reason", kw_string(reason));
    kw_set(wanted, "message", kw_string(message));
    if (kw_generation(object) != 0) {
        kw_set(wanted, "observedGeneration", kw_int(kw_generation(object)));
    }
    for (size_t i = 0; i < kw_len(conditions); i++) {
        kw_value *existing = kw_at(conditions, i);
        const char *existing_type = kw_str(kw_get(existing, "type"));
        if (kw_type_of(existing) != KW_OBJECT || !existing_type || strcmp(existing_type, type) != 0) continue;
        if (!kw_equal(kw_get(existing, "status"), kw_get(wanted, "status"))) {
            kw_set(existing, "lastTransitionTime", kw_string(now_rfc3339()));
        }
        for (size_t k = 0; k < kw_len(wanted); k++) {
            kw_set(existing, kw_key_at(wanted, k), kw_at(wanted, k));
        }
        return;
    }
    kw_set(wanted, "lastTransitionTime", kw_string(now_rfc3339()));
    kw_push(conditions, wanted);
}

/* The JSON text of an object a call sends, within the host's bound. */
static const kw_error *encode(const char *what, const kw_value *value, size_t limit, controller_string_t *out) {
    size_t len = 0;
    char *text = kw_print(value, &len);
    if (len > limit) {
        return kw_errorf(KW_INVALID, "%s is %zu bytes; at most %zu", what, len, limit);
    }
    *out = (controller_string_t){(uint8_t *)text, len};
    return NULL;
}

/* The host's objects are JSON by contract: one that is not is a host bug, hence a trap. */
static kw_value *decode(controller_string_t text) {
    const char *error = NULL;
    kw_value *value = kw_parse((const char *)text.ptr, text.len, &error);
    if (!value) {
        kw_panic("the host sent an object that is not JSON: %s", error);
    }
    return value;
}

static kw_value *decode_list(kubewasm_controller_cache_list_object_t list) {
    kw_value *items = kw_array();
    for (size_t i = 0; i < list.len; i++) {
        kw_push(items, decode(list.ptr[i]));
    }
    return items;
}

/* ---- The cache ------------------------------------------------------------------------------ */

const kw_error *kw_cache_get(kw_gvk resource, const char *namespace_, const char *name, kw_value **out) {
    *out = NULL;
    const kw_error *err = check_target(resource, namespace_, name);
    if (err) return err;
    kubewasm_controller_types_gvk_t gvk = wit_gvk(resource);
    controller_option_string_t ns = wit_opt(namespace_);
    controller_string_t wname = wit_str(name);
    kubewasm_controller_cache_option_object_t found;
    kubewasm_controller_cache_error_t werr;
    if (!kubewasm_controller_cache_get(&gvk, ns.is_some ? &ns.val : NULL, &wname, &found, &werr)) {
        return from_wit_error(werr);
    }
    if (found.is_some) {
        *out = decode(found.val);
    }
    return NULL;
}

const kw_error *kw_cache_list(kw_gvk resource, const char *namespace_, const char *label_selector, kw_value **out) {
    *out = kw_array();
    const kw_error *err = check_gvk(resource);
    if (!err) err = at_most("namespace", namespace_, MAX_NAMESPACE);
    if (!err) err = at_most("label selector", label_selector, MAX_LABEL_SELECTOR);
    if (err) return err;
    kubewasm_controller_types_gvk_t gvk = wit_gvk(resource);
    controller_option_string_t ns = wit_opt(namespace_), selector = wit_opt(label_selector);
    kubewasm_controller_cache_list_object_t items;
    kubewasm_controller_cache_error_t werr;
    if (!kubewasm_controller_cache_list_objects(&gvk, ns.is_some ? &ns.val : NULL, selector.is_some ? &selector.val : NULL, &items, &werr)) {
        return from_wit_error(werr);
    }
    *out = decode_list(items);
    return NULL;
}

const kw_error *kw_cache_list_controlled(kw_gvk resource, const char *namespace_, const char *owner_uid, kw_value **out) {
    *out = kw_array();
    const kw_error *err = check_gvk(resource);
    if (!err) err = at_most("namespace", namespace_, MAX_NAMESPACE);
    if (!err) err = at_most("owner", owner_uid, MAX_OWNER);
    if (err) return err;
    kubewasm_controller_types_gvk_t gvk = wit_gvk(resource);
    controller_option_string_t ns = wit_opt(namespace_);
    controller_string_t owner = wit_str(owner_uid);
    kubewasm_controller_cache_list_object_t items;
    kubewasm_controller_cache_error_t werr;
    if (!kubewasm_controller_cache_list_controlled(&gvk, ns.is_some ? &ns.val : NULL, &owner, &items, &werr)) {
        return from_wit_error(werr);
    }
    *out = decode_list(items);
    return NULL;
}

/* ---- The client ----------------------------------------------------------------------------- */

typedef bool (*write_call)(controller_string_t *object, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err);

static bool apply_call(controller_string_t *o, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err) {
    return kubewasm_controller_client_apply(o, force, ret, err);
}
static bool apply_status_call(controller_string_t *o, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err) {
    return kubewasm_controller_client_apply_status(o, force, ret, err);
}
static bool create_call(controller_string_t *o, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err) {
    (void)force;
    return kubewasm_controller_client_create(o, ret, err);
}
static bool update_call(controller_string_t *o, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err) {
    (void)force;
    return kubewasm_controller_client_update(o, ret, err);
}
static bool update_status_call(controller_string_t *o, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err) {
    (void)force;
    return kubewasm_controller_client_update_status(o, ret, err);
}

/* One write of a whole object: encoded within the bound, sent, the answer decoded. */
static const kw_error *send_object(write_call call, const kw_value *object, bool force, kw_value **out) {
    if (out) *out = NULL;
    controller_string_t text, returned;
    kubewasm_controller_types_error_t werr;
    const kw_error *err = encode("object", object, MAX_OBJECT, &text);
    if (err) return err;
    if (!call(&text, force, &returned, &werr)) {
        return from_wit_error(werr);
    }
    if (out) *out = decode(returned);
    return NULL;
}

const kw_error *kw_apply(const kw_value *object, kw_value **out) {
    return send_object(apply_call, object, true, out);
}
const kw_error *kw_apply_status(const kw_value *object, kw_value **out) {
    return send_object(apply_status_call, object, true, out);
}
const kw_error *kw_apply_no_force(const kw_value *object, kw_value **out) {
    return send_object(apply_call, object, false, out);
}
const kw_error *kw_apply_status_no_force(const kw_value *object, kw_value **out) {
    return send_object(apply_status_call, object, false, out);
}
const kw_error *kw_create(const kw_value *object, kw_value **out) {
    return send_object(create_call, object, false, out);
}
const kw_error *kw_update(const kw_value *object, kw_value **out) {
    return send_object(update_call, object, false, out);
}
const kw_error *kw_update_status(const kw_value *object, kw_value **out) {
    return send_object(update_status_call, object, false, out);
}

const kw_error *kw_patch(kw_gvk resource, const char *namespace_, const char *name, kw_patch_type type, const kw_value *body, kw_value **out) {
    if (out) *out = NULL;
    controller_string_t text, returned;
    const kw_error *err = check_target(resource, namespace_, name);
    if (!err) err = encode("patch body", body, MAX_OBJECT, &text);
    if (err) return err;
    kubewasm_controller_types_gvk_t gvk = wit_gvk(resource);
    controller_option_string_t ns = wit_opt(namespace_);
    controller_string_t wname = wit_str(name);
    kubewasm_controller_types_error_t werr;
    if (!kubewasm_controller_client_patch(&gvk, ns.is_some ? &ns.val : NULL, &wname, (kubewasm_controller_client_patch_type_t)type, &text, &returned, &werr)) {
        return from_wit_error(werr);
    }
    if (out) *out = decode(returned);
    return NULL;
}

const kw_error *kw_delete(kw_gvk resource, const char *namespace_, const char *name) {
    const kw_error *err = check_target(resource, namespace_, name);
    if (err) return err;
    kubewasm_controller_types_gvk_t gvk = wit_gvk(resource);
    controller_option_string_t ns = wit_opt(namespace_);
    controller_string_t wname = wit_str(name);
    kubewasm_controller_types_error_t werr;
    return kubewasm_controller_client_delete(&gvk, ns.is_some ? &ns.val : NULL, &wname, &werr) ? NULL : from_wit_error(werr);
}

/* ---- Events --------------------------------------------------------------------------------- */

const kw_error *kw_event(const kw_value *regarding, kw_event_type type, const char *reason, const char *action, const char *note_format, ...) {
    va_list args;
    va_start(args, note_format);
    char *note = vformat(note_format, args);
    va_end(args);
    kw_gvk gvk = kw_gvk_of(regarding);
    const char *namespace_ = kw_namespace(regarding), *name = kw_str_or(kw_path(regarding, "metadata", "name", NULL), "");
    const kw_error *err = check_target(gvk, namespace_, name);
    const char *fields[][2] = {{"event reason", reason}, {"event action", action}};
    for (size_t i = 0; !err && i < 2; i++) {
        if (!fields[i][1] || !*fields[i][1]) {
            err = kw_errorf(KW_INVALID, "%s must not be empty", fields[i][0]);
        } else {
            err = at_most(fields[i][0], fields[i][1], MAX_EVENT_REASON);
        }
    }
    if (!err) err = at_most("event note", note, MAX_EVENT_NOTE);
    if (err) return err;
    kubewasm_controller_events_event_t event = {
        .regarding = {wit_gvk(gvk), wit_opt(namespace_), wit_str(name)},
        .event_type = (kubewasm_controller_events_event_type_t)type,
        .reason = wit_str(reason),
        .action = wit_str(action),
        .note = wit_str(note),
    };
    kubewasm_controller_types_error_t werr;
    return kubewasm_controller_events_publish(&event, &werr) ? NULL : from_wit_error(werr);
}

/* ---- The manifest and the settings ----------------------------------------------------------- */

/* Room for one more item of size bytes in a list of len items held in the arena: a new copy
 * with twice the room when it is full. */
static void *grow(void *items, size_t len, size_t *cap, size_t size) {
    if (len < *cap) return items;
    *cap = *cap ? *cap * 2 : 4;
    void *bigger = kw_alloc(*cap * size);
    if (len) memcpy(bigger, items, len * size);
    return bigger;
}

struct kw_manifest {
    exports_kubewasm_controller_plugin_manifest_t wit;
    size_t owns_cap, watches_cap, permissions_cap;
};

/* Kinds the host caches only the metadata of: kept beside the instance (malloc, not the arena),
 * for the `views` export the host calls after describe. */
static kubewasm_controller_types_gvk_t *metadata_only;
static size_t metadata_only_len;

kw_manifest *kw_manifest_name(kw_manifest *m, const char *name, const char *version) {
    m->wit.name = wit_str(name);
    m->wit.version = wit_str(version);
    return m;
}

kw_manifest *kw_manifest_primary(kw_manifest *m, kw_gvk primary) {
    m->wit.primary = wit_gvk(primary);
    return m;
}

kw_manifest *kw_manifest_primary_selector(kw_manifest *m, const char *label_selector) {
    m->wit.primary_selector = wit_opt(label_selector);
    return m;
}

kw_manifest *kw_manifest_owns(kw_manifest *m, kw_gvk owned) {
    m->wit.owns.ptr = grow(m->wit.owns.ptr, m->wit.owns.len, &m->owns_cap, sizeof *m->wit.owns.ptr);
    m->wit.owns.ptr[m->wit.owns.len++] = wit_gvk(owned);
    return m;
}

kw_manifest *kw_manifest_watch(kw_manifest *m, kw_gvk watched, kw_mapping mapping, const char *label, const char *label_selector) {
    m->wit.watches.ptr = grow(m->wit.watches.ptr, m->wit.watches.len, &m->watches_cap, sizeof *m->wit.watches.ptr);
    exports_kubewasm_controller_plugin_watch_t *watch = &m->wit.watches.ptr[m->wit.watches.len++];
    *watch = (exports_kubewasm_controller_plugin_watch_t){.resource = wit_gvk(watched), .label_selector = wit_opt(label_selector)};
    watch->mapping.tag = (uint8_t)mapping;
    if (mapping == KW_BY_LABEL) {
        watch->mapping.val.label = wit_str(label);
    }
    return m;
}

kw_manifest *kw_manifest_permission(kw_manifest *m, kw_gvk resource, const char *subresource, unsigned verbs) {
    m->wit.permissions.ptr = grow(m->wit.permissions.ptr, m->wit.permissions.len, &m->permissions_cap, sizeof *m->wit.permissions.ptr);
    exports_kubewasm_controller_plugin_permission_t *grant = &m->wit.permissions.ptr[m->wit.permissions.len++];
    *grant = (exports_kubewasm_controller_plugin_permission_t){.resource = wit_gvk(resource), .subresource = wit_opt(subresource)};
    grant->verbs.ptr = kw_alloc(7 * sizeof *grant->verbs.ptr);
    for (uint8_t verb = 0; verb < 7; verb++) {
        if (verbs & (1u << verb)) {
            grant->verbs.ptr[grant->verbs.len++] = verb;
        }
    }
    return m;
}

kw_manifest *kw_manifest_finalizer(kw_manifest *m, const char *finalizer) {
    m->wit.finalizer = wit_opt(finalizer);
    return m;
}

kw_manifest *kw_manifest_resync_seconds(kw_manifest *m, uint32_t seconds) {
    m->wit.resync_seconds = (controller_option_u32_t){true, seconds};
    return m;
}

kw_manifest *kw_manifest_max_concurrency(kw_manifest *m, uint32_t workers) {
    m->wit.max_concurrency = workers;
    return m;
}

kw_manifest *kw_manifest_deadline_ms(kw_manifest *m, uint32_t milliseconds) {
    m->wit.limits.deadline_ms = (controller_option_u32_t){true, milliseconds};
    return m;
}

kw_manifest *kw_manifest_memory_bytes(kw_manifest *m, uint64_t bytes) {
    m->wit.limits.memory_bytes = (controller_option_u64_t){true, bytes};
    return m;
}

/* Copies out of the arena: the views export comes in a later call. */
static controller_string_t kept(const char *s) {
    char *copy = strdup(s ? s : "");
    if (!copy) abort();
    return wit_str(copy);
}

kw_manifest *kw_manifest_metadata_only(kw_manifest *m, kw_gvk resource) {
    kubewasm_controller_types_gvk_t *bigger = realloc(metadata_only, (metadata_only_len + 1) * sizeof *metadata_only);
    if (!bigger) abort();
    metadata_only = bigger;
    metadata_only[metadata_only_len++] = (kubewasm_controller_types_gvk_t){kept(resource.group), kept(resource.version), kept(resource.kind)};
    return m;
}

struct kw_settings {
    kw_value *values;
    kw_value *asked; /* the keys the plugin asked for, as an object of nulls */
};

kw_value *kw_setting(kw_settings *settings, const char *key) {
    kw_set(settings->asked, key, kw_null());
    return kw_get(settings->values, key);
}

/* ---- Exports: what the host calls ------------------------------------------------------------ */

static uint32_t current_retries;

uint32_t kw_retries(void) {
    return current_retries;
}

bool exports_kubewasm_controller_plugin_describe(controller_string_t *settings_text, exports_kubewasm_controller_plugin_manifest_t *ret, controller_string_t *err) {
    const char *parse_error = NULL;
    kw_value *values = kw_parse((const char *)settings_text->ptr, settings_text->len, &parse_error);
    if (!values || kw_type_of(values) != KW_OBJECT) {
        *err = wit_message(kw_sprintf("settings: not a JSON object: %s", values ? "another JSON value" : parse_error));
        return false;
    }
    kw_settings settings = {values, kw_object()};
    kw_manifest m = {.wit = {.max_concurrency = 1}};
    free(metadata_only);
    metadata_only = NULL;
    metadata_only_len = 0;
    const char *refused = kubewasm_describe(&m, &settings);
    if (refused) {
        *err = wit_message(refused);
        return false;
    }
    for (size_t i = 0; i < kw_len(values); i++) {
        const char *key = kw_key_at(values, i);
        if (!kw_get(settings.asked, key)) {
            *err = wit_message(kw_sprintf("settings: unknown field \"%s\"", key));
            return false;
        }
    }
    *ret = m.wit;
    return true;
}

static bool answer(kw_result result, kubewasm_controller_types_action_t *ret, kubewasm_controller_types_error_t *err) {
    if (result.error) {
        err->code = (kubewasm_controller_types_error_code_t)(result.error->code <= KW_OTHER ? result.error->code : KW_OTHER);
        err->message = wit_message(result.error->message);
        return false;
    }
    ret->tag = result.requeue_after_ms ? KUBEWASM_CONTROLLER_TYPES_ACTION_REQUEUE_AFTER : KUBEWASM_CONTROLLER_TYPES_ACTION_DONE;
    ret->val.requeue_after = result.requeue_after_ms;
    return true;
}

typedef kw_result (*handler)(kw_value *object);

static bool call(handler handle, exports_kubewasm_controller_reconciler_request_t *request, kubewasm_controller_types_action_t *ret, kubewasm_controller_types_error_t *err) {
    current_retries = request->retries;
    return answer(handle ? handle(decode(request->object)) : KW_DONE, ret, err);
}

bool exports_kubewasm_controller_reconciler_reconcile(exports_kubewasm_controller_reconciler_request_t *request, exports_kubewasm_controller_reconciler_action_t *ret, exports_kubewasm_controller_reconciler_error_t *err) {
    return call(kubewasm_reconcile, request, ret, err);
}

bool exports_kubewasm_controller_reconciler_finalize(exports_kubewasm_controller_reconciler_request_t *request, exports_kubewasm_controller_reconciler_action_t *ret, exports_kubewasm_controller_reconciler_error_t *err) {
    return call(kubewasm_finalize, request, ret, err);
}

bool exports_kubewasm_controller_release_released(exports_kubewasm_controller_release_request_t *request, exports_kubewasm_controller_release_action_t *ret, exports_kubewasm_controller_release_error_t *err) {
    return call(kubewasm_released, request, ret, err);
}

struct kw_keys {
    exports_kubewasm_controller_reconciler_list_object_key_t wit;
    size_t cap;
};

void kw_keys_add(kw_keys *keys, const char *namespace_, const char *name) {
    keys->wit.ptr = grow(keys->wit.ptr, keys->wit.len, &keys->cap, sizeof *keys->wit.ptr);
    keys->wit.ptr[keys->wit.len++] = (kubewasm_controller_types_object_key_t){wit_opt(namespace_ ? kw_strdup(namespace_) : NULL), wit_str(kw_strdup(name ? name : ""))};
}

void exports_kubewasm_controller_reconciler_map_related(exports_kubewasm_controller_reconciler_gvk_t *resource, exports_kubewasm_controller_reconciler_object_t *object, exports_kubewasm_controller_reconciler_list_object_key_t *ret) {
    kw_keys keys = {0};
    current_retries = 0;
    if (kubewasm_map_related) {
        kubewasm_map_related(from_wit_gvk(*resource), decode(*object), &keys);
    }
    *ret = keys.wit;
}

/* Extra RBAC rules: the C SDK declares its grants in the manifest only. */
void exports_kubewasm_controller_access_rules(exports_kubewasm_controller_access_list_rule_t *ret) {
    *ret = (exports_kubewasm_controller_access_list_rule_t){0};
}

void exports_kubewasm_controller_views_metadata_only(exports_kubewasm_controller_views_list_gvk_t *ret) {
    *ret = (exports_kubewasm_controller_views_list_gvk_t){metadata_only, metadata_only_len};
}

/* A C plugin is not declarative: the host never calls the rest of `composite`. */
bool exports_kubewasm_controller_composite_describe_composition(exports_kubewasm_controller_composite_composition_t *ret) {
    (void)ret;
    return false;
}

static controller_string_t not_declarative(void) {
    return wit_str("the C SDK builds imperative plugins only (describe-composition says none)");
}

bool exports_kubewasm_controller_composite_customize(exports_kubewasm_controller_composite_object_t *parent, exports_kubewasm_controller_composite_list_related_rule_t *ret, exports_kubewasm_controller_composite_error_t *err) {
    (void)parent, (void)ret;
    *err = (kubewasm_controller_types_error_t){KUBEWASM_CONTROLLER_TYPES_ERROR_CODE_INVALID, not_declarative()};
    return false;
}

bool exports_kubewasm_controller_composite_sync(exports_kubewasm_controller_composite_sync_request_t *request, exports_kubewasm_controller_composite_sync_response_t *ret, exports_kubewasm_controller_composite_error_t *err) {
    (void)request, (void)ret;
    *err = (kubewasm_controller_types_error_t){KUBEWASM_CONTROLLER_TYPES_ERROR_CODE_INVALID, not_declarative()};
    return false;
}

bool exports_kubewasm_controller_composite_finalize(exports_kubewasm_controller_composite_sync_request_t *request, exports_kubewasm_controller_composite_sync_response_t *ret, exports_kubewasm_controller_composite_error_t *err) {
    return exports_kubewasm_controller_composite_sync(request, ret, err);
}

/* The bindings link the world's type information in with this symbol (wit-bindgen's object
 * file); `kubewasm build` embeds the type information itself, from the WIT it was built with. */
void __component_type_object_force_link_controller(void) {}

/* ---- The canonical ABI's memory --------------------------------------------------------------- */

static void *arena_realloc(void *ptr, size_t old_size, size_t align, size_t new_size) {
    if (new_size == 0) return (void *)align;
    if (align > 8) abort(); /* no type of wit/ is aligned past 8 */
    void *fresh = kw_alloc(new_size);
    if (ptr && old_size) memcpy(fresh, ptr, old_size < new_size ? old_size : new_size);
    return fresh;
}

__attribute__((__export_name__("cabi_export_realloc"))) void *kubewasm_export_realloc(void *ptr, size_t old_size, size_t align, size_t new_size) {
    return arena_realloc(ptr, old_size, align, new_size);
}

__attribute__((__export_name__("cabi_import_realloc"))) void *kubewasm_import_realloc(void *ptr, size_t old_size, size_t align, size_t new_size) {
    return arena_realloc(ptr, old_size, align, new_size);
}

/* The post-returns: everything of the call was in the arena. These replace the generated weak
 * ones, which free() each pointer of the answer. */
#define POST_RETURN(export, symbol)                                                        \
    __attribute__((__export_name__("cabi_post_kubewasm:controller/" export))) void symbol(uint8_t *answer) { \
        (void)answer;                                                                    \
        kw_arena_reset();                                                                \
    }

POST_RETURN("plugin@0.1.3#describe", __wasm_export_exports_kubewasm_controller_plugin_describe_post_return)
POST_RETURN("reconciler@0.1.3#reconcile", __wasm_export_exports_kubewasm_controller_reconciler_reconcile_post_return)
POST_RETURN("reconciler@0.1.3#finalize", __wasm_export_exports_kubewasm_controller_reconciler_finalize_post_return)
POST_RETURN("reconciler@0.1.3#map-related", __wasm_export_exports_kubewasm_controller_reconciler_map_related_post_return)
POST_RETURN("access@0.1.3#rules", __wasm_export_exports_kubewasm_controller_access_rules_post_return)
POST_RETURN("release@0.1.3#released", __wasm_export_exports_kubewasm_controller_release_released_post_return)
POST_RETURN("views@0.1.3#metadata-only", __wasm_export_exports_kubewasm_controller_views_metadata_only_post_return)
POST_RETURN("composite@0.1.3#describe-composition", __wasm_export_exports_kubewasm_controller_composite_describe_composition_post_return)
POST_RETURN("composite@0.1.3#customize", __wasm_export_exports_kubewasm_controller_composite_customize_post_return)
POST_RETURN("composite@0.1.3#sync", __wasm_export_exports_kubewasm_controller_composite_sync_post_return)
POST_RETURN("composite@0.1.3#finalize", __wasm_export_exports_kubewasm_controller_composite_finalize_post_return)
