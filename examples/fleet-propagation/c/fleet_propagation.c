/* Fleet propagation, in C: a ConfigMap of the hub (the host's own cluster) labelled
 * fleet.kubewasm.io/propagate=true is copied, data and all, into the same namespace of every
 * member cluster whose labels match the `members` setting (env=prod by default). A copy is
 * labelled fleet.kubewasm.io/source=<name>; the finalizer deletes the copies before the source
 * goes. A member that does not answer is tried again in 30 s without holding up the others.
 * The same logic as ../rust.
 */
#include <string.h>

#include <kubewasm.h>

#define PROPAGATE "fleet.kubewasm.io/propagate"
#define SOURCE "fleet.kubewasm.io/source"
#define FINALIZER "fleet.kubewasm.io/copies"
#define RETRY_MS 30000

static const char *describe(kw_manifest *m, kw_settings *settings) {
    kw_value *members = kw_setting(settings, "members");
    if (members && kw_type_of(members) != KW_STRING) {
        return "members must be a label selector over the member clusters' labels, such as \"env=prod\"";
    }
    kw_manifest_name(m, "fleet-propagation", "0.1.0");
    kw_manifest_primary(m, KW_CONFIGMAP);
    kw_manifest_primary_selector(m, PROPAGATE "=true");
    kw_manifest_reach_members(m, kw_members_matching(members ? kw_str(members) : "env=prod"));
    kw_manifest_finalizer(m, FINALIZER);
    kw_manifest_permission(m, KW_CONFIGMAP, NULL, KW_CREATE | KW_PATCH | KW_DELETE);
    return NULL;
}

/* The copy of source a member gets. */
static kw_value *copy_of(const kw_value *source) {
    kw_value *copy = kw_new_object(KW_CONFIGMAP, kw_namespace(source), kw_name(source));
    kw_set_path(copy, kw_string(kw_name(source)), "metadata", "labels", SOURCE, NULL);
    const char *fields[] = {"data", "binaryData", "immutable"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const kw_value *value = kw_get(source, fields[i]);
        if (value) kw_set(copy, fields[i], kw_copy(value));
    }
    return copy;
}

typedef const kw_error *(*member_step)(const kw_value *source);

static const kw_error *apply_copy(const kw_value *source) {
    return kw_apply(copy_of(source), NULL);
}

static const kw_error *delete_copy(const kw_value *source) {
    return kw_ignore_not_found(kw_delete(KW_CONFIGMAP, kw_namespace(source), kw_name(source)));
}

/* Runs step in every member the plugin reaches now; the names of those that answered go to
 * *done ("a,b"), and whether any did not answer to *unavailable. */
static const kw_error *in_members(const kw_value *source, member_step step, const char **done, bool *unavailable) {
    kw_value *clusters = kw_clusters();
    *done = "";
    *unavailable = false;
    for (size_t i = 0; i < kw_len(clusters); i++) {
        const char *name = kw_str(kw_get(kw_at(clusters, i), "name"));
        const kw_error *err = kw_use_cluster(name);
        if (!err) err = step(source);
        kw_use_cluster(NULL);
        if (err && err->code == KW_UNAVAILABLE) {
            kw_log(KW_WARN, "cluster %s did not answer: %s", name, err->message);
            *unavailable = true;
        } else if (err) {
            return kw_errorf(err->code, "cluster %s: %s", name, err->message);
        } else {
            *done = **done ? kw_sprintf("%s,%s", *done, name) : name;
        }
    }
    return NULL;
}

static kw_result reconcile(kw_value *source) {
    const char *copied;
    bool unavailable;
    const kw_error *err = in_members(source, apply_copy, &copied, &unavailable);
    if (err) return kw_fail(err);
    size_t count = *copied ? 1 : 0;
    for (const char *c = copied; *c; c++) count += *c == ',';
    err = kw_event(source, KW_NORMAL, "Propagated", "Reconcile", "copied to %zu member cluster(s): %s", count, copied);
    if (err) return kw_fail(err);
    return unavailable ? kw_requeue_after_ms(RETRY_MS) : KW_DONE;
}

static kw_result finalize(kw_value *source) {
    const char *deleted;
    bool unavailable;
    const kw_error *err = in_members(source, delete_copy, &deleted, &unavailable);
    if (err) return kw_fail(err);
    return unavailable ? kw_requeue_after_ms(RETRY_MS) : KW_DONE;
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile, .finalize = finalize);
