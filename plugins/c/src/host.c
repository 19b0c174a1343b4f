/* The C SDK's host calls (kubewasm.h): the cache, the client, Events and logs through the
 * bindings' imports (controller.c), with the host's bounds checked before a value is copied;
 * errors, results and the Kubernetes object helpers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boundary.h"

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

kw_admission kw_mutated(kw_value *object) {
    return (kw_admission){.object = object};
}

kw_admission kw_deny(uint16_t code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char *message = vformat(format, args);
    va_end(args);
    return (kw_admission){.code = code, .message = message};
}

void kw_warn(const char *format, ...) {
    va_list args;
    va_start(args, format);
    kw_call_warn(vformat(format, args));
    va_end(args);
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

/* ---- Member clusters ------------------------------------------------------------------------ */

/* The cache and client calls go to the call's own cluster (the `cache` and `client` imports)
 * unless kw_use_cluster named one (the `fleet` import; "" is the host's own cluster). */
const kw_error *kw_use_cluster(const char *cluster) {
    const kw_error *err = at_most("cluster", cluster, MAX_NAME);
    if (err) return err;
    kw_call_use_cluster(cluster ? kw_strdup(cluster) : NULL);
    return NULL;
}

/* The named cluster as the fleet import takes it: NULL for the host's own. */
static controller_string_t *fleet_cluster(controller_string_t *storage) {
    const char *named = kw_call_cluster();
    if (!*named) return NULL;
    *storage = wit_str(named);
    return storage;
}

const char *kw_cluster(void) {
    controller_string_t name;
    return kubewasm_controller_fleet_current(&name) ? from_wit(name) : NULL;
}

kw_value *kw_clusters(void) {
    kubewasm_controller_fleet_list_cluster_t list;
    kubewasm_controller_fleet_clusters(&list);
    kw_value *clusters = kw_array();
    for (size_t i = 0; i < list.len; i++) {
        kw_value *cluster = kw_push(clusters, kw_object());
        kw_set(cluster, "name", kw_string(from_wit(list.ptr[i].name)));
        kw_value *labels = kw_set(cluster, "labels", kw_object());
        for (size_t l = 0; l < list.ptr[i].labels.len; l++) {
            kw_set(labels, from_wit(list.ptr[i].labels.ptr[l].f0), kw_string(from_wit(list.ptr[i].labels.ptr[l].f1)));
        }
    }
    return clusters;
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
    bool ok;
    if (kw_call_cluster()) {
        controller_string_t cluster;
        kubewasm_controller_fleet_option_object_t in_cluster;
        ok = kubewasm_controller_fleet_get(fleet_cluster(&cluster), &gvk, ns.is_some ? &ns.val : NULL, &wname, &in_cluster, &werr);
        found = (kubewasm_controller_cache_option_object_t){in_cluster.is_some, in_cluster.val};
    } else {
        ok = kubewasm_controller_cache_get(&gvk, ns.is_some ? &ns.val : NULL, &wname, &found, &werr);
    }
    if (!ok) {
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
    bool ok;
    if (kw_call_cluster()) {
        controller_string_t cluster;
        kubewasm_controller_fleet_list_object_t in_cluster;
        ok = kubewasm_controller_fleet_list_objects(fleet_cluster(&cluster), &gvk, ns.is_some ? &ns.val : NULL, selector.is_some ? &selector.val : NULL, &in_cluster, &werr);
        items = (kubewasm_controller_cache_list_object_t){in_cluster.ptr, in_cluster.len};
    } else {
        ok = kubewasm_controller_cache_list_objects(&gvk, ns.is_some ? &ns.val : NULL, selector.is_some ? &selector.val : NULL, &items, &werr);
    }
    if (!ok) {
        return from_wit_error(werr);
    }
    *out = decode_list(items);
    return NULL;
}

const kw_error *kw_cache_list_controlled(kw_gvk resource, const char *namespace_, const char *owner_uid, kw_value **out) {
    *out = kw_array();
    if (kw_call_cluster()) {
        return kw_errorf(KW_INVALID, "kw_cache_list_controlled reads the call's own cluster only: list by label in another");
    }
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

/* The writes of a whole object, each through the client import or, in a named cluster, the
 * fleet import's twin. */
typedef enum write_op { WRITE_APPLY, WRITE_APPLY_STATUS, WRITE_CREATE, WRITE_UPDATE, WRITE_UPDATE_STATUS } write_op;

static bool write_call(write_op op, controller_string_t *o, bool force, controller_string_t *ret, kubewasm_controller_types_error_t *err) {
    if (kw_call_cluster()) {
        controller_string_t storage, *cluster = fleet_cluster(&storage);
        switch (op) {
        case WRITE_APPLY: return kubewasm_controller_fleet_apply(cluster, o, force, ret, err);
        case WRITE_APPLY_STATUS: return kubewasm_controller_fleet_apply_status(cluster, o, force, ret, err);
        case WRITE_CREATE: return kubewasm_controller_fleet_create(cluster, o, ret, err);
        case WRITE_UPDATE: return kubewasm_controller_fleet_update(cluster, o, ret, err);
        case WRITE_UPDATE_STATUS: return kubewasm_controller_fleet_update_status(cluster, o, ret, err);
        }
    }
    switch (op) {
    case WRITE_APPLY: return kubewasm_controller_client_apply(o, force, ret, err);
    case WRITE_APPLY_STATUS: return kubewasm_controller_client_apply_status(o, force, ret, err);
    case WRITE_CREATE: return kubewasm_controller_client_create(o, ret, err);
    case WRITE_UPDATE: return kubewasm_controller_client_update(o, ret, err);
    case WRITE_UPDATE_STATUS: return kubewasm_controller_client_update_status(o, ret, err);
    }
    abort();
}

/* One write of a whole object: encoded within the bound, sent, the answer decoded. */
static const kw_error *send_object(write_op op, const kw_value *object, bool force, kw_value **out) {
    if (out) *out = NULL;
    controller_string_t text, returned;
    kubewasm_controller_types_error_t werr;
    const kw_error *err = encode("object", object, MAX_OBJECT, &text);
    if (err) return err;
    if (!write_call(op, &text, force, &returned, &werr)) {
        return from_wit_error(werr);
    }
    if (out) *out = decode(returned);
    return NULL;
}

const kw_error *kw_apply(const kw_value *object, kw_value **out) {
    return send_object(WRITE_APPLY, object, true, out);
}
const kw_error *kw_apply_status(const kw_value *object, kw_value **out) {
    return send_object(WRITE_APPLY_STATUS, object, true, out);
}
const kw_error *kw_apply_no_force(const kw_value *object, kw_value **out) {
    return send_object(WRITE_APPLY, object, false, out);
}
const kw_error *kw_apply_status_no_force(const kw_value *object, kw_value **out) {
    return send_object(WRITE_APPLY_STATUS, object, false, out);
}
const kw_error *kw_create(const kw_value *object, kw_value **out) {
    return send_object(WRITE_CREATE, object, false, out);
}
const kw_error *kw_update(const kw_value *object, kw_value **out) {
    return send_object(WRITE_UPDATE, object, false, out);
}
const kw_error *kw_update_status(const kw_value *object, kw_value **out) {
    return send_object(WRITE_UPDATE_STATUS, object, false, out);
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
    controller_string_t cluster;
    kubewasm_controller_client_patch_type_t patch_type = (kubewasm_controller_client_patch_type_t)type;
    bool ok = kw_call_cluster() ? kubewasm_controller_fleet_patch(fleet_cluster(&cluster), &gvk, ns.is_some ? &ns.val : NULL, &wname, patch_type, &text, &returned, &werr)
                            : kubewasm_controller_client_patch(&gvk, ns.is_some ? &ns.val : NULL, &wname, patch_type, &text, &returned, &werr);
    if (!ok) {
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
    controller_string_t cluster;
    bool ok = kw_call_cluster() ? kubewasm_controller_fleet_delete(fleet_cluster(&cluster), &gvk, ns.is_some ? &ns.val : NULL, &wname, &werr)
                            : kubewasm_controller_client_delete(&gvk, ns.is_some ? &ns.val : NULL, &wname, &werr);
    return ok ? NULL : from_wit_error(werr);
}

/* ---- Events --------------------------------------------------------------------------------- */

const kw_error *kw_event(const kw_value *regarding, kw_event_type type, const char *reason, const char *action, const char *note_format, ...) {
    va_list args;
    va_start(args, note_format);
    char *note = vformat(note_format, args);
    va_end(args);
    kw_gvk gvk = kw_gvk_of(regarding);
    const char *namespace_ = kw_namespace(regarding), *name = kw_name(regarding) ? kw_name(regarding) : "";
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

