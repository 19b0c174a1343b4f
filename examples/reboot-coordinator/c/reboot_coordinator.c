/* A node reboot coordinator as a kubewasm plugin, in C.
 *
 * A node agent annotates a Node reboot.kubewasm.io/reboot-needed. This controller grants
 * reboot.kubewasm.io/reboot-now: "true" to waiting nodes while fewer than maxUnavailable nodes
 * (a setting, default 1) are unavailable: rebooting (reboot-now set) or not Ready. The agent
 * reboots a granted node and clears both annotations once it is back.
 *
 * Every Node event re-evaluates every waiting node (map_related), so a node coming back
 * Ready lets the next one go. One worker (max-concurrency 1), so two grants never race.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <kubewasm.h>

#define REBOOT_NEEDED "reboot.kubewasm.io/reboot-needed"
#define REBOOT_NOW "reboot.kubewasm.io/reboot-now"

/* How many Nodes may be unavailable at once: reboot-coordinator.toml's maxUnavailable. Set by
 * describe, which the host calls before anything else on every instance. */
static int64_t max_unavailable = 1;

/* The setting as its JSON text in a refusal. kw_print writes the double 2.0 as "2", which would
 * read as if the integer were refused: keep the ".0", as the Python and JS ports' messages do. */
static const char *setting_text(const kw_value *value) {
    const char *text = kw_print(value, NULL);
    int64_t whole;
    if (kw_type_of(value) == KW_DOUBLE && kw_as_int(value, &whole)) return kw_sprintf("%s.0", text);
    return text;
}

static const char *describe(kw_manifest *m, kw_settings *settings) {
    /* Only a missing key means the default: an explicit value must be an integer (not 2.0, not
     * "2"), as the Go, Rust and Python ports' typed settings insist. The wording is the Python
     * and JS ports' for a value that is not an integer (Go's would name its own struct) and the
     * Go and Rust ports' for an integer below 1. */
    max_unavailable = 1;
    kw_value *value = kw_setting(settings, "maxUnavailable");
    if (value) {
        if (kw_type_of(value) != KW_INT) {
            return kw_sprintf("maxUnavailable must be an integer of at least 1, not %s", setting_text(value));
        }
        kw_as_int(value, &max_unavailable);
        if (max_unavailable < 1) {
            return kw_sprintf("maxUnavailable must be at least 1, got %" PRId64, max_unavailable);
        }
    }

    kw_manifest_name(m, "reboot-coordinator", "0.1.0");
    kw_manifest_primary(m, KW_NODE);
    kw_manifest_watch(m, KW_NODE, KW_BY_MAP_RELATED, NULL, NULL);
    kw_manifest_permission(m, KW_NODE, NULL, KW_PATCH);
    kw_manifest_max_concurrency(m, 1);
    return NULL;
}

/* Whether the annotation is there, whatever its value (an empty value counts, as in the other
 * ports). */
static bool has_annotation(const kw_value *node, const char *key) {
    return kw_get(kw_path(node, "metadata", "annotations", NULL), key) != NULL;
}

/* The status of the node's Ready condition, or NULL when it has none. */
static const char *ready_status(const kw_value *node) {
    kw_value *conditions = kw_path(node, "status", "conditions", NULL);
    for (size_t i = 0; i < kw_len(conditions); i++) {
        kw_value *condition = kw_at(conditions, i);
        const char *type = kw_str(kw_get(condition, "type"));
        if (type && strcmp(type, "Ready") == 0) return kw_str(kw_get(condition, "status"));
    }
    return NULL;
}

static bool is_waiting(const kw_value *node) {
    return has_annotation(node, REBOOT_NEEDED) && !has_annotation(node, REBOOT_NOW);
}

/* Rebooting, or not Ready: a node without a Ready condition (just joined) counts as unavailable. */
static bool is_unavailable(const kw_value *node) {
    const char *ready = ready_status(node);
    return has_annotation(node, REBOOT_NOW) || !ready || strcmp(ready, "True") != 0;
}

static kw_result reconcile(kw_value *node) {
    if (!is_waiting(node)) return KW_DONE;

    kw_value *nodes;
    const kw_error *err = kw_cache_list(KW_NODE, NULL, NULL, &nodes);
    if (err) return kw_fail(err);
    int64_t busy = 0;
    for (size_t i = 0; i < kw_len(nodes); i++) {
        if (is_unavailable(kw_at(nodes, i))) busy++;
    }
    if (busy >= max_unavailable) return KW_DONE; /* full: a later Node event brings it back */

    /* A merge patch of the one annotation: it leaves the agent's annotations alone and needs no
     * resourceVersion. */
    kw_value *patch = kw_object();
    kw_set_path(patch, kw_string("true"), "metadata", "annotations", REBOOT_NOW, NULL);
    err = kw_patch(KW_NODE, NULL, kw_name(node), KW_MERGE_PATCH, patch, NULL);
    if (err) return kw_fail(err);
    /* The C SDK's log has no structured fields: they go into the message as key=value. */
    kw_log(KW_INFO, "granted reboot node=%s unavailable=%" PRId64 " maxUnavailable=%" PRId64, kw_name(node), busy, max_unavailable);
    return KW_DONE;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Any Node's change re-evaluates the Nodes waiting to reboot, sorted by name (as the other ports
 * return them, so the host queues them in the same order). */
static void map_related(kw_gvk resource, kw_value *object, kw_keys *keys) {
    (void)resource;
    (void)object;
    kw_value *nodes;
    const kw_error *err = kw_cache_list(KW_NODE, NULL, NULL, &nodes);
    /* map-related has no error to answer: the Go and Python ports fault on a failed list, so
     * this does too rather than silently dropping the waiting nodes. */
    if (err) kw_panic("map-related: listing Nodes: %s: %s", kw_code_name(err->code), err->message);

    const char **names = kw_alloc((kw_len(nodes) + 1) * sizeof *names);
    size_t count = 0;
    for (size_t i = 0; i < kw_len(nodes); i++) {
        kw_value *node = kw_at(nodes, i);
        if (is_waiting(node)) names[count++] = kw_str_or(kw_path(node, "metadata", "name", NULL), "");
    }
    qsort(names, count, sizeof *names, by_name);
    for (size_t i = 0; i < count; i++) kw_keys_add(keys, NULL, names[i]);
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile, .map_related = map_related);
