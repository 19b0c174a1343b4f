/* The kubewasm C SDK: a Kubernetes controller as a C plugin.
 *
 * A plugin is a C file that includes this header, defines its functions and names them with
 * KUBEWASM_PLUGIN (the struct kw_plugin below): describe and reconcile are required, the others
 * optional.
 *
 *     static const char *describe(kw_manifest *m, kw_settings *settings) { ... }
 *     static kw_result reconcile(kw_value *object) { ... }
 *     KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile);
 *
 * `kubewasm build --lang c DIR` compiles every .c file of DIR with this SDK (built into kubewasm:
 * no file of it needs copying) into a component, with clang and wasi-libc for wasm32-wasi.
 *
 * Memory: what the SDK hands you and what you make with it (values, strings, errors) lives until
 * the call into the plugin returns, then it is freed at once (json.h, "the arena"): never free it,
 * never keep it from one call to the next. What describe reads from the settings and
 * must outlive the call is copied with malloc/strdup into your own globals: the host calls
 * describe once on every instance before any other call, always with the same settings.
 *
 * Errors: every host call returns NULL on success or a `const kw_error *` (code and message),
 * which a reconcile can return as it is (`kw_fail(err)`). Values over the host's bounds (wit/:
 * a name over 253 bytes, a label selector over 4096, an Event note over 1024, ...) are refused
 * here with the host's own `invalid` error and never cross the boundary. A bug is not an answer:
 * `kw_panic` (or abort, or a trap) is a fault the host reports, retries and quarantines, never an
 * error value.
 */
#ifndef KUBEWASM_H
#define KUBEWASM_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Resources --------------------------------------------------------------------------- */

/* A kind of Kubernetes object: group ("" for the core group), version and kind. */
typedef struct kw_gvk {
    const char *group;
    const char *version;
    const char *kind;
} kw_gvk;

#define KW_GVK(group, version, kind) ((kw_gvk){(group), (version), (kind)})
#define KW_CONFIGMAP KW_GVK("", "v1", "ConfigMap")
#define KW_SECRET KW_GVK("", "v1", "Secret")
#define KW_POD KW_GVK("", "v1", "Pod")
#define KW_SERVICE KW_GVK("", "v1", "Service")
#define KW_NAMESPACE KW_GVK("", "v1", "Namespace")
#define KW_NODE KW_GVK("", "v1", "Node")
#define KW_SERVICEACCOUNT KW_GVK("", "v1", "ServiceAccount")
#define KW_DEPLOYMENT KW_GVK("apps", "v1", "Deployment")
#define KW_STATEFULSET KW_GVK("apps", "v1", "StatefulSet")
#define KW_DAEMONSET KW_GVK("apps", "v1", "DaemonSet")
#define KW_JOB KW_GVK("batch", "v1", "Job")
#define KW_CRONJOB KW_GVK("batch", "v1", "CronJob")

/* The apiVersion of a kind: "v1", "apps/v1". */
const char *kw_api_version(kw_gvk gvk);
/* The kind of an object (from its apiVersion and kind; empty strings when absent). */
kw_gvk kw_gvk_of(const kw_value *object);

/* ---- Errors and results -------------------------------------------------------------------- */

typedef enum kw_code {
    KW_NOT_FOUND,
    KW_ALREADY_EXISTS,
    KW_CONFLICT,
    KW_FORBIDDEN,
    KW_INVALID,
    KW_UNAVAILABLE,
    KW_OTHER,
} kw_code;

typedef struct kw_error {
    kw_code code;
    const char *message;
} kw_error;

/* A new error, its message printf-formatted. */
const kw_error *kw_errorf(kw_code code, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* err unless it is a not-found (then NULL): what a "get, or make it" reconcile needs. */
const kw_error *kw_ignore_not_found(const kw_error *err);
/* "not-found", "conflict", ... as the WIT spells the code. */
const char *kw_code_name(kw_code code);

/* What a reconcile (finalize, released) answers: done, requeue after a while, or an error
 * (retried with backoff; a Warning Event unless the code is conflict). */
typedef struct kw_result {
    const kw_error *error;
    uint64_t requeue_after_ms;
} kw_result;

#define KW_DONE ((kw_result){0})
/* Reconcile again after `after` (C11's duration type), rounded up to whole milliseconds: a
 * positive duration never becomes 0 (which would mean "done"). */
kw_result kw_requeue_after(struct timespec after);
kw_result kw_requeue_after_ms(uint64_t milliseconds);
/* The error as a result (NULL: done), and a new error as one. */
kw_result kw_fail(const kw_error *err);
kw_result kw_failf(kw_code code, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Logs the message at error level, then traps: the host reports a fault (a bug, not an answer). */
_Noreturn void kw_panic(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* ---- The manifest: what the plugin is and needs ---------------------------------------------- */

typedef struct kw_manifest kw_manifest;

/* Verbs of a permission, or-ed: KW_CREATE | KW_PATCH. */
enum {
    KW_GET = 1 << 0,
    KW_LIST = 1 << 1,
    KW_WATCH = 1 << 2,
    KW_CREATE = 1 << 3,
    KW_UPDATE = 1 << 4,
    KW_PATCH = 1 << 5,
    KW_DELETE = 1 << 6,
};

/* How an event on a watched object becomes keys of primaries to reconcile (wit/plugin.wit). */
typedef enum kw_mapping {
    KW_BY_OWNER_REFERENCES,
    KW_BY_LABEL,       /* the primary named by a label of the watched object */
    KW_BY_MAP_RELATED, /* the plugin's map_related says */
} kw_mapping;

/* Each returns m, so calls may chain in one expression. The name and version are required (a
 * DNS-1123 label, and free text), as is the primary; the host validates the whole and refuses
 * the plugin with a message naming the field that is wrong. */
kw_manifest *kw_manifest_name(kw_manifest *m, const char *name, const char *version);
kw_manifest *kw_manifest_primary(kw_manifest *m, kw_gvk primary);
kw_manifest *kw_manifest_primary_selector(kw_manifest *m, const char *label_selector);
kw_manifest *kw_manifest_owns(kw_manifest *m, kw_gvk owned);
/* label: the label key for KW_BY_LABEL, else NULL; label_selector: NULL watches every object. */
kw_manifest *kw_manifest_watch(kw_manifest *m, kw_gvk watched, kw_mapping mapping, const char *label, const char *label_selector);
/* A grant beyond reading the primary, owned and watched kinds; subresource NULL for the
 * resource itself, "status" for its status. Every namespace the host serves. */
kw_manifest *kw_manifest_permission(kw_manifest *m, kw_gvk resource, const char *subresource, unsigned verbs);
kw_manifest *kw_manifest_finalizer(kw_manifest *m, const char *finalizer);
kw_manifest *kw_manifest_resync_seconds(kw_manifest *m, uint32_t seconds);
kw_manifest *kw_manifest_max_concurrency(kw_manifest *m, uint32_t workers);
kw_manifest *kw_manifest_deadline_ms(kw_manifest *m, uint32_t milliseconds);
kw_manifest *kw_manifest_memory_bytes(kw_manifest *m, uint64_t bytes);
/* The host caches only the metadata of this kind's objects (wit/views.wit). */
kw_manifest *kw_manifest_metadata_only(kw_manifest *m, kw_gvk resource);
/* The plugin is handed only these fields of this kind's objects (the primary kind, an owned or
 * a watched kind; contract 0.1.5, wit/projections.wit), each a dotted path from the object's
 * top: kw_manifest_reads_fields(m, KW_DEPLOYMENT, "status.availableReplicas"). Every object of
 * the kind it is handed (the one it reconciles, cache reads, map_related's, its writes'
 * answers) carries apiVersion, kind, metadata and only these fields of the rest: it parses
 * nothing it never reads. A path through a list keeps the list. kw_update of the kind is then
 * refused (the object lacks fields): apply or patch it, sending only the fields it sets. At least
 * one path; again for a kind adds to its paths. */
#define kw_manifest_reads_fields(m, resource, ...) kw_manifest_reads_field_list((m), (resource), (const char *const[]){__VA_ARGS__, NULL})
/* kw_manifest_reads_fields with the paths in a NULL-terminated array. */
kw_manifest *kw_manifest_reads_field_list(kw_manifest *m, kw_gvk resource, const char *const *fields);

/* A choice of member clusters (contract 0.1.4, wit/clusters.wit): KW_NO_MEMBERS, KW_ALL_MEMBERS,
 * or kw_members_matching("env=prod") (a label selector over the members' labels). */
typedef struct kw_members {
    enum { KW_MEMBERS_NONE, KW_MEMBERS_ALL, KW_MEMBERS_MATCHING } kind;
    const char *selector;
} kw_members;
#define KW_NO_MEMBERS ((kw_members){KW_MEMBERS_NONE, NULL})
#define KW_ALL_MEMBERS ((kw_members){KW_MEMBERS_ALL, NULL})
static inline kw_members kw_members_matching(const char *label_selector) {
    return (kw_members){KW_MEMBERS_MATCHING, label_selector};
}
/* Also reconcile the primaries of these members, each where it lives (kw_cluster names it). */
kw_manifest *kw_manifest_serve_members(kw_manifest *m, kw_members members);
/* Whether to reconcile the primaries of the host's own cluster (yes unless said here). */
kw_manifest *kw_manifest_serve_local(kw_manifest *m, bool serve);
/* Read and write in these members through kw_use_cluster, reconciling nothing there. */
kw_manifest *kw_manifest_reach_members(kw_manifest *m, kw_members members);

/* ---- Webhooks (contract 0.1.6, wit/webhooks.wit) ---------------------------------------------- */

/* The operations a hook admits, or-ed: KW_ON_CREATE | KW_ON_UPDATE; a review's one operation. */
enum {
    KW_ON_CREATE = 1 << 0,
    KW_ON_UPDATE = 1 << 1,
    KW_ON_DELETE = 1 << 2,
    KW_ON_CONNECT = 1 << 3,
};

/* What the API server does when the hook cannot answer (and the host when the plugin faults):
 * refuse the change, or let it through unchanged. */
typedef enum kw_failure_policy { KW_FAIL, KW_IGNORE } kw_failure_policy;

/* A plugin's hooks cannot write: none, or none on a dry run for a hook that logs differently. */
typedef enum kw_side_effects { KW_SIDE_EFFECTS_NONE, KW_SIDE_EFFECTS_NONE_ON_DRY_RUN } kw_side_effects;

typedef struct kw_hook kw_hook;

/* Declares a validating hook named name (a DNS label, unique in the plugin) admitting objects of
 * kind on CREATE and UPDATE, failing closed, with a 10 s timeout and no side effects, answered
 * by the plugin's validate; returns it for the kw_hook_* calls, which each return it. */
kw_hook *kw_manifest_validating_webhook(kw_manifest *m, const char *name, kw_gvk kind);
/* The same for a mutating (defaulting) hook, answered by the plugin's mutate. */
kw_hook *kw_manifest_mutating_webhook(kw_manifest *m, const char *name, kw_gvk kind);
/* Also admits objects of this kind. */
kw_hook *kw_hook_kind(kw_hook *hook, kw_gvk kind);
/* Replaces the operations it admits (KW_ON_* or-ed). */
kw_hook *kw_hook_operations(kw_hook *hook, unsigned operations);
kw_hook *kw_hook_failure_policy(kw_hook *hook, kw_failure_policy policy);
/* How long the API server waits for an answer: 1 to 30 seconds. */
kw_hook *kw_hook_timeout_seconds(kw_hook *hook, uint32_t seconds);
kw_hook *kw_hook_side_effects(kw_hook *hook, kw_side_effects side_effects);
/* Calls the hook only when the CEL expression is true (matchConditions). */
kw_hook *kw_hook_match_condition(kw_hook *hook, const char *name, const char *expression);
/* Serves the conversion webhook of this custom resource (its CRD's versions; the version given is
 * ignored), answered by the plugin's convert. */
kw_manifest *kw_manifest_converts(kw_manifest *m, kw_gvk resource);

/* One admission request: which hook, what change, by whom, and the objects. */
typedef struct kw_review {
    const char *hook; /* the name of the hook asked */
    const char *uid;
    kw_gvk kind;
    const char *subresource; /* NULL: the resource itself */
    const char *namespace_;  /* NULL: cluster-scoped */
    const char *name;        /* "" on a create whose name the API server generates */
    unsigned operation;      /* one KW_ON_* */
    const char *username;
    const char *user_uid;
    kw_value *groups; /* the user's groups: a JSON array of strings */
    bool dry_run;
    kw_value *object;     /* the object as it would be stored; NULL on delete */
    kw_value *old_object; /* the object as it is; NULL on create */
} kw_review;

/* A hook's answer: KW_ALLOWED, kw_mutated(object) or kw_deny(...). */
typedef struct kw_admission {
    uint16_t code;       /* 0: allowed; else a denial's HTTP status */
    const char *message; /* a denial's, for the user */
    kw_value *object;    /* mutate's: the object as it should be stored; NULL: unchanged */
} kw_admission;

#define KW_ALLOWED ((kw_admission){0})
/* Stores object instead of the request's (the host sends the API server the JSON patch to it). */
kw_admission kw_mutated(kw_value *object);
/* Refuses the change with an HTTP status, 400 to 599 (403 Forbidden when in doubt, 422 for an
 * invalid object), and a printf-formatted message, cut to 4 KiB at a character boundary. */
kw_admission kw_deny(uint16_t code, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Shows the user a warning beside the current hook call's answer, allowed or denied (at most 32,
 * each at most 512 bytes). */
void kw_warn(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* ---- Settings: NAME.toml beside the plugin, as JSON ------------------------------------------ */

typedef struct kw_settings kw_settings;

/* The setting key (NULL when it is not set). Asking declares the key: after describe returns, a
 * key the plugin never asked for is refused with `settings: unknown field "KEY"`, as in every
 * SDK (a typo must not run the plugin with a setting its operator believes is on). */
kw_value *kw_setting(kw_settings *settings, const char *key);

/* ---- Objects --------------------------------------------------------------------------------- */

/* metadata's fields; NULL (0 for the generation) when absent. A cluster-scoped object has no
 * namespace. */
const char *kw_name(const kw_value *object);
const char *kw_namespace(const kw_value *object);
const char *kw_uid(const kw_value *object);
int64_t kw_generation(const kw_value *object);
const char *kw_label(const kw_value *object, const char *key);
const char *kw_annotation(const kw_value *object, const char *key);
/* A new object {apiVersion, kind, metadata: {name, namespace}} (namespace NULL: none). */
kw_value *kw_new_object(kw_gvk gvk, const char *namespace_, const char *name);
/* The object's kind, name and namespace with this status: what kw_apply_status takes. */
kw_value *kw_status_object(const kw_value *object, kw_value *status);
/* An owner reference to owner that makes it the controller (blockOwnerDeletion too). */
kw_value *kw_controller_ref(const kw_value *owner);
/* Whether object's controller reference names owner (by uid). */
bool kw_is_controlled_by(const kw_value *object, const kw_value *owner);
/* Sets the condition of this type in object's status.conditions as Kubernetes'
 * meta.SetStatusCondition does (and every SDK's helper): lastTransitionTime, the host's clock to
 * the second, moves only when the status changes; observedGeneration is the object's generation
 * (left out when it has none). status is "True", "False" or "Unknown". */
void kw_set_condition(kw_value *object, const char *type, const char *status, const char *reason, const char *message);

/* ---- The cache: reads without an API round trip ---------------------------------------------- */

/* The object, or *out = NULL when there is none (not an error). namespace_ NULL: cluster-scoped. */
const kw_error *kw_cache_get(kw_gvk resource, const char *namespace_, const char *name, kw_value **out);
/* The objects of the namespace (NULL: every namespace) matching the label selector (NULL: all),
 * as a JSON array. */
const kw_error *kw_cache_list(kw_gvk resource, const char *namespace_, const char *label_selector, kw_value **out);
/* The objects whose controller reference has the uid owner (the host's owner index). */
const kw_error *kw_cache_list_controlled(kw_gvk resource, const char *namespace_, const char *owner_uid, kw_value **out);

/* ---- The client: writes as the plugin's identity --------------------------------------------- */

/* Server-side apply with the field manager kubewasm/NAME, taking over fields another manager
 * set (force, as a controller owns what it applies). *out (when out is not NULL) is the object
 * as the API server returned it, as for every write below. */
const kw_error *kw_apply(const kw_value *object, kw_value **out);
const kw_error *kw_apply_status(const kw_value *object, kw_value **out);
/* The same without force: a field another manager set is a conflict error. */
const kw_error *kw_apply_no_force(const kw_value *object, kw_value **out);
const kw_error *kw_apply_status_no_force(const kw_value *object, kw_value **out);
const kw_error *kw_create(const kw_value *object, kw_value **out);
const kw_error *kw_update(const kw_value *object, kw_value **out);
const kw_error *kw_update_status(const kw_value *object, kw_value **out);

typedef enum kw_patch_type { KW_MERGE_PATCH, KW_JSON_PATCH, KW_STRATEGIC_MERGE_PATCH } kw_patch_type;

const kw_error *kw_patch(kw_gvk resource, const char *namespace_, const char *name, kw_patch_type type, const kw_value *body, kw_value **out);
const kw_error *kw_delete(kw_gvk resource, const char *namespace_, const char *name);

/* ---- Events and logs ------------------------------------------------------------------------- */

typedef enum kw_event_type { KW_NORMAL, KW_WARNING } kw_event_type;

/* An Event about `regarding` (any object with apiVersion, kind and metadata.name): reason and
 * action 1 to 128 bytes, the note (printf-formatted) at most 1024. */
const kw_error *kw_event(const kw_value *regarding, kw_event_type type, const char *reason, const char *action, const char *note_format, ...)
    __attribute__((format(printf, 5, 6)));

typedef enum kw_level { KW_TRACE, KW_DEBUG, KW_INFO, KW_WARN, KW_ERROR } kw_level;

/* A record in the host's log, under the plugin's name. */
void kw_log(kw_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---- Member clusters (contract 0.1.4) -------------------------------------------------------- */

/* The member cluster the call's object lives in; NULL for the host's own cluster. */
const char *kw_cluster(void);
/* The members engaged now that the plugin serves or reaches, sorted by name: a JSON array of
 * {"name": ..., "labels": {...}} objects. */
kw_value *kw_clusters(void);
/* The host's own cluster, for kw_use_cluster. */
#define KW_HOST_CLUSTER ""
/* Sends the cache and client calls that follow in this call to `cluster` (a member's name, or
 * KW_HOST_CLUSTER); NULL sends them back to the call's own cluster. Every call starts in its own.
 * The plugin acts as its own identity there; a member outside its scope answers KW_FORBIDDEN,
 * one not engaged (or not synced yet) KW_UNAVAILABLE. Events and logs stay with the call, and
 * kw_cache_list_controlled reads the call's own cluster only. */
const kw_error *kw_use_cluster(const char *cluster);

/* ---- The current call ------------------------------------------------------------------------ */

/* How many times in a row this key failed before this call; 0 on a first attempt. */
uint32_t kw_retries(void);

/* The keys the plugin's map_related returns. */
typedef struct kw_keys kw_keys;
void kw_keys_add(kw_keys *keys, const char *namespace_, const char *name);

/* ---- The plugin ------------------------------------------------------------------------------ */

/* What a plugin is: its functions, of which describe and reconcile are required; a plugin that
 * leaves one of the others NULL gets "done" (finalize, released), no keys (map_related) or a
 * refusal (validate, mutate, convert). */
typedef struct kw_plugin {
    /* Fills the manifest from the settings; returns NULL, or a message saying what is wrong with
     * the settings to refuse loading. */
    const char *(*describe)(kw_manifest *m, kw_settings *settings);
    kw_result (*reconcile)(kw_value *object);
    /* The manifest names a finalizer and the object is being deleted. */
    kw_result (*finalize)(kw_value *object);
    /* The object stopped matching the primary selector. */
    kw_result (*released)(kw_value *object);
    /* An event on a watched object mapped KW_BY_MAP_RELATED: add the primaries' keys. */
    void (*map_related)(kw_gvk resource, kw_value *object, kw_keys *keys);
    /* A validating hook of the manifest (review->hook says which): KW_ALLOWED, or kw_deny —
     * controller-runtime's CustomValidator. The cache reads and logs work; writes and Events
     * answer KW_FORBIDDEN. A kw_panic is a fault, answered by the hook's failure policy. NULL
     * with a validating hook declared: every call is denied with 500. */
    kw_admission (*validate)(const kw_review *review);
    /* A mutating hook: kw_mutated(object) (review->object, changed, will do), KW_ALLOWED to
     * leave it unchanged, or kw_deny — controller-runtime's CustomDefaulter. As validate. */
    kw_admission (*mutate)(const kw_review *review);
    /* A conversion (kw_manifest_converts): *out is object in desired_api_version
     * ("group/version"), its kind, name, namespace and uid kept (object itself, changed, will
     * do); an error (its message) fails the API server's request that needed it. */
    const kw_error *(*convert)(kw_value *object, const char *desired_api_version, kw_value **out);
} kw_plugin;

/* Registers the plugin (KUBEWASM_PLUGIN does, once, when the instance starts). */
void kw_register(const kw_plugin *plugin);

/* Makes the functions given, by their designated initializers, the plugin:
 *     KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile);
 * in exactly one file of the plugin. */
#define KUBEWASM_PLUGIN(...)                                                                      \
    static const kw_plugin kubewasm_plugin_ = {__VA_ARGS__};                                      \
    __attribute__((constructor)) static void kubewasm_register_(void) { kw_register(&kubewasm_plugin_); }

#ifdef __cplusplus
}
#endif

#endif
