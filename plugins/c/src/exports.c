/* The C SDK's exports: what the host calls (wit/), on top of the plugin kw_register'd
 * (KUBEWASM_PLUGIN), through the bindings `wit-bindgen c` generates (controller.c calls the
 * functions here; nothing here calls the bindings: host calls are host.c's).
 *
 * Memory: the canonical ABI's allocations for a call (the arguments the host passes in, the
 * results of host calls) come from the call's arena (cabi_export_realloc, cabi_import_realloc),
 * as does everything the SDK and the plugin make; the post-return of every export resets it. So
 * this file overrides the generated post-returns (weak, and freeing with free()), and leaves the
 * generated cabi_realloc (malloc) to the WASI adapter, whose state outlives calls.
 */
#include <stdlib.h>
#include <string.h>

#include "boundary.h"

/* ---- The manifest and the settings ----------------------------------------------------------- */

struct kw_manifest {
    exports_kubewasm_controller_plugin_manifest_t wit;
    size_t owns_cap, watches_cap, permissions_cap;
};

/* Kinds the host caches only the metadata of: kept beside the instance (malloc, not the arena),
 * for the `views` export the host calls after describe. */
static kubewasm_controller_types_gvk_t *metadata_only;
static size_t metadata_only_len;

/* The fields it reads of projected kinds, for the `projections` export the host calls after
 * describe: kept out of the arena too. */
static exports_kubewasm_controller_projections_projection_t *projections;
static size_t projections_len;

/* The clusters it serves and reaches, for the `clusters` export the host calls after describe
 * (its selectors kept out of the arena too). */
static exports_kubewasm_controller_clusters_cluster_scope_t scope;

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

/* A dotted path as its field names, kept out of the arena. */
static controller_list_string_t kept_path(const char *path) {
    size_t count = 1;
    for (const char *c = path; *c; c++) count += *c == '.';
    controller_string_t *names = calloc(count, sizeof *names);
    if (!names) abort();
    const char *start = path;
    for (size_t i = 0; i < count; i++) {
        const char *dot = strchr(start, '.');
        size_t len = dot ? (size_t)(dot - start) : strlen(start);
        char *name = malloc(len + 1);
        if (!name) abort();
        memcpy(name, start, len);
        name[len] = '\0';
        names[i] = wit_str(name);
        start += len + (dot != NULL);
    }
    return (controller_list_string_t){names, count};
}

static bool is_text(controller_string_t text, const char *s) {
    s = s ? s : "";
    return text.len == strlen(s) && memcmp(text.ptr, s, text.len) == 0;
}

kw_manifest *kw_manifest_reads_field_list(kw_manifest *m, kw_gvk resource, const char *const *fields) {
    size_t count = 0;
    while (fields[count]) count++;
    exports_kubewasm_controller_projections_projection_t *declared = NULL;
    for (size_t i = 0; i < projections_len && !declared; i++) {
        kubewasm_controller_types_gvk_t *g = &projections[i].resource;
        if (is_text(g->group, resource.group) && is_text(g->version, resource.version) && is_text(g->kind, resource.kind)) declared = &projections[i];
    }
    if (!declared) {
        /* Another call for the same kind adds to its paths: one projection per kind. */
        exports_kubewasm_controller_projections_projection_t *bigger = realloc(projections, (projections_len + 1) * sizeof *projections);
        if (!bigger) abort();
        projections = bigger;
        declared = &projections[projections_len++];
        *declared = (exports_kubewasm_controller_projections_projection_t){
            .resource = {kept(resource.group), kept(resource.version), kept(resource.kind)},
        };
    }
    controller_list_string_t *paths = realloc(declared->fields.ptr, (declared->fields.len + count + 1) * sizeof *paths);
    if (!paths) abort();
    for (size_t i = 0; i < count; i++) paths[declared->fields.len + i] = kept_path(fields[i]);
    declared->fields = (controller_list_list_string_t){paths, declared->fields.len + count};
    return m;
}

static exports_kubewasm_controller_clusters_members_t wit_members(kw_members members) {
    exports_kubewasm_controller_clusters_members_t wit = {.tag = EXPORTS_KUBEWASM_CONTROLLER_CLUSTERS_MEMBERS_NONE};
    switch (members.kind) {
    case KW_MEMBERS_NONE: break;
    case KW_MEMBERS_ALL: wit.tag = EXPORTS_KUBEWASM_CONTROLLER_CLUSTERS_MEMBERS_ALL; break;
    case KW_MEMBERS_MATCHING:
        wit.tag = EXPORTS_KUBEWASM_CONTROLLER_CLUSTERS_MEMBERS_MATCHING;
        wit.val.matching = kept(members.selector);
        break;
    }
    return wit;
}

kw_manifest *kw_manifest_serve_members(kw_manifest *m, kw_members members) {
    scope.serve = wit_members(members);
    return m;
}

kw_manifest *kw_manifest_serve_local(kw_manifest *m, bool serve) {
    scope.serve_local = serve;
    return m;
}

kw_manifest *kw_manifest_reach_members(kw_manifest *m, kw_members members) {
    scope.reach = wit_members(members);
    return m;
}

/* The hooks, for the `webhooks` export the host calls after describe: kept out of the arena, each
 * hook where its kw_hook * points for the plugin's later kw_hook_* calls. */
struct kw_hook {
    exports_kubewasm_controller_webhooks_admission_hook_t wit;
};
static kw_hook **hooks;
static size_t hooks_len;
static exports_kubewasm_controller_webhooks_conversion_hook_t *conversions;
static size_t conversions_len;

/* Room for one more item in a list kept out of the arena. */
static void *kept_grow(void *items, size_t len, size_t size) {
    void *bigger = realloc(items, (len + 1) * size);
    if (!bigger) abort();
    return bigger;
}

static kubewasm_controller_types_gvk_t kept_gvk(kw_gvk gvk) {
    return (kubewasm_controller_types_gvk_t){kept(gvk.group), kept(gvk.version), kept(gvk.kind)};
}

static kw_hook *declare_hook(const char *name, bool mutating, kw_gvk kind) {
    kw_hook *hook = calloc(1, sizeof *hook);
    if (!hook) abort();
    hook->wit = (exports_kubewasm_controller_webhooks_admission_hook_t){
        .name = kept(name),
        .mutating = mutating,
        .failure_policy = EXPORTS_KUBEWASM_CONTROLLER_WEBHOOKS_FAILURE_POLICY_FAIL,
        .timeout_seconds = 10,
        .side_effects = EXPORTS_KUBEWASM_CONTROLLER_WEBHOOKS_SIDE_EFFECTS_NONE,
    };
    kw_hook_operations(hook, KW_ON_CREATE | KW_ON_UPDATE);
    hooks = kept_grow(hooks, hooks_len, sizeof *hooks);
    hooks[hooks_len++] = hook;
    return kw_hook_kind(hook, kind);
}

kw_hook *kw_manifest_validating_webhook(kw_manifest *m, const char *name, kw_gvk kind) {
    (void)m;
    return declare_hook(name, false, kind);
}

kw_hook *kw_manifest_mutating_webhook(kw_manifest *m, const char *name, kw_gvk kind) {
    (void)m;
    return declare_hook(name, true, kind);
}

kw_hook *kw_hook_kind(kw_hook *hook, kw_gvk kind) {
    hook->wit.kinds.ptr = kept_grow(hook->wit.kinds.ptr, hook->wit.kinds.len, sizeof *hook->wit.kinds.ptr);
    hook->wit.kinds.ptr[hook->wit.kinds.len++] = kept_gvk(kind);
    return hook;
}

kw_hook *kw_hook_operations(kw_hook *hook, unsigned operations) {
    free(hook->wit.operations.ptr);
    hook->wit.operations.ptr = malloc(4 * sizeof *hook->wit.operations.ptr);
    if (!hook->wit.operations.ptr) abort();
    hook->wit.operations.len = 0;
    /* KW_ON_CREATE ... KW_ON_CONNECT are the WIT's operations, in its order. */
    for (uint8_t operation = 0; operation < 4; operation++) {
        if (operations & (1u << operation)) {
            hook->wit.operations.ptr[hook->wit.operations.len++] = operation;
        }
    }
    return hook;
}

kw_hook *kw_hook_failure_policy(kw_hook *hook, kw_failure_policy policy) {
    hook->wit.failure_policy = (exports_kubewasm_controller_webhooks_failure_policy_t)policy;
    return hook;
}

kw_hook *kw_hook_timeout_seconds(kw_hook *hook, uint32_t seconds) {
    hook->wit.timeout_seconds = seconds;
    return hook;
}

kw_hook *kw_hook_side_effects(kw_hook *hook, kw_side_effects side_effects) {
    hook->wit.side_effects = (exports_kubewasm_controller_webhooks_side_effects_t)side_effects;
    return hook;
}

kw_hook *kw_hook_match_condition(kw_hook *hook, const char *name, const char *expression) {
    exports_kubewasm_controller_webhooks_list_match_condition_t *conditions = &hook->wit.match_conditions;
    conditions->ptr = kept_grow(conditions->ptr, conditions->len, sizeof *conditions->ptr);
    conditions->ptr[conditions->len++] = (exports_kubewasm_controller_webhooks_match_condition_t){kept(name), kept(expression)};
    return hook;
}

kw_manifest *kw_manifest_converts(kw_manifest *m, kw_gvk resource) {
    conversions = kept_grow(conversions, conversions_len, sizeof *conversions);
    conversions[conversions_len++] = (exports_kubewasm_controller_webhooks_conversion_hook_t){kept_gvk(resource)};
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

/* The plugin: set by KUBEWASM_PLUGIN's constructor, which runs when the instance starts
 * (`_initialize`), before the host's first call. */
static const kw_plugin *plugin;

void kw_register(const kw_plugin *registered) {
    plugin = registered;
}

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
    if (!plugin || !plugin->describe || !plugin->reconcile) {
        *err = wit_str("the plugin registers no describe and reconcile: add KUBEWASM_PLUGIN(.describe = ..., .reconcile = ...) to one of its files");
        return false;
    }
    kw_settings settings = {values, kw_object()};
    kw_manifest m = {.wit = {.max_concurrency = 1}};
    free(metadata_only);
    metadata_only = NULL;
    metadata_only_len = 0;
    free(projections);
    projections = NULL;
    projections_len = 0;
    scope = (exports_kubewasm_controller_clusters_cluster_scope_t){.serve_local = true};
    for (size_t i = 0; i < hooks_len; i++) free(hooks[i]);
    free(hooks);
    hooks = NULL;
    hooks_len = 0;
    free(conversions);
    conversions = NULL;
    conversions_len = 0;
    const char *refused = plugin->describe(&m, &settings);
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
    kw_call_begin();
    return answer(handle ? handle(decode(request->object)) : KW_DONE, ret, err);
}

bool exports_kubewasm_controller_reconciler_reconcile(exports_kubewasm_controller_reconciler_request_t *request, exports_kubewasm_controller_reconciler_action_t *ret, exports_kubewasm_controller_reconciler_error_t *err) {
    return call(plugin->reconcile, request, ret, err);
}

bool exports_kubewasm_controller_reconciler_finalize(exports_kubewasm_controller_reconciler_request_t *request, exports_kubewasm_controller_reconciler_action_t *ret, exports_kubewasm_controller_reconciler_error_t *err) {
    return call(plugin->finalize, request, ret, err);
}

bool exports_kubewasm_controller_release_released(exports_kubewasm_controller_release_request_t *request, exports_kubewasm_controller_release_action_t *ret, exports_kubewasm_controller_release_error_t *err) {
    return call(plugin->released, request, ret, err);
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
    kw_call_begin();
    if (plugin->map_related) {
        plugin->map_related(from_wit_gvk(*resource), decode(*object), &keys);
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

void exports_kubewasm_controller_projections_fields(exports_kubewasm_controller_projections_list_projection_t *ret) {
    *ret = (exports_kubewasm_controller_projections_list_projection_t){projections, projections_len};
}

void exports_kubewasm_controller_clusters_scope(exports_kubewasm_controller_clusters_cluster_scope_t *ret) {
    *ret = scope;
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

void exports_kubewasm_controller_webhooks_declare(exports_kubewasm_controller_webhooks_declaration_t *ret) {
    exports_kubewasm_controller_webhooks_admission_hook_t *admission = kw_alloc((hooks_len ? hooks_len : 1) * sizeof *admission);
    for (size_t i = 0; i < hooks_len; i++) admission[i] = hooks[i]->wit;
    *ret = (exports_kubewasm_controller_webhooks_declaration_t){
        .admission = {admission, hooks_len},
        .conversion = {conversions, conversions_len},
    };
}

static const char *optional(controller_option_string_t text) {
    return text.is_some ? from_wit(text.val) : NULL;
}

static kw_value *optional_object(exports_kubewasm_controller_webhooks_option_object_t text) {
    return text.is_some ? decode(text.val) : NULL;
}

static kw_review review_of(exports_kubewasm_controller_webhooks_admission_request_t *request) {
    kw_value *groups = kw_array();
    for (size_t i = 0; i < request->user.groups.len; i++) kw_push(groups, kw_stringn((const char *)request->user.groups.ptr[i].ptr, request->user.groups.ptr[i].len));
    return (kw_review){
        .hook = from_wit(request->hook),
        .uid = from_wit(request->uid),
        .kind = from_wit_gvk(request->kind),
        .subresource = optional(request->subresource),
        .namespace_ = optional(request->namespace_),
        .name = from_wit(request->name),
        .operation = 1u << request->operation,
        .username = from_wit(request->user.username),
        .user_uid = from_wit(request->user.uid),
        .groups = groups,
        .dry_run = request->dry_run,
        .object = optional_object(request->object),
        .old_object = optional_object(request->old_object),
    };
}

typedef kw_admission (*hook_handler)(const kw_review *review);

/* Runs the plugin's handler for the request (a 500 denial when it registers none); false with
 * *err set for a denial, which carries the call's warnings as an allowed answer does. */
static bool admit(hook_handler handle, const char *handler, exports_kubewasm_controller_webhooks_admission_request_t *request, kw_admission *answer, exports_kubewasm_controller_webhooks_denial_t *err) {
    kw_call_begin();
    kw_review review = review_of(request);
    *answer = handle ? handle(&review) : kw_deny(500, "the plugin declares hook \"%s\" but registers no %s", review.hook, handler);
    if (answer->code == 0) return true;
    *err = (exports_kubewasm_controller_webhooks_denial_t){answer->code, wit_cut(answer->message, MAX_DENIAL_MESSAGE), kw_call_warnings()};
    return false;
}

bool exports_kubewasm_controller_webhooks_validate(exports_kubewasm_controller_webhooks_admission_request_t *request, controller_list_string_t *ret, exports_kubewasm_controller_webhooks_denial_t *err) {
    kw_admission answer;
    if (!admit(plugin->validate, "validate", request, &answer, err)) return false;
    *ret = kw_call_warnings();
    return true;
}

bool exports_kubewasm_controller_webhooks_mutate(exports_kubewasm_controller_webhooks_admission_request_t *request, exports_kubewasm_controller_webhooks_mutation_t *ret, exports_kubewasm_controller_webhooks_denial_t *err) {
    kw_admission answer;
    if (!admit(plugin->mutate, "mutate", request, &answer, err)) return false;
    *ret = (exports_kubewasm_controller_webhooks_mutation_t){.warnings = kw_call_warnings()};
    if (answer.object) {
        ret->object = (exports_kubewasm_controller_webhooks_option_object_t){true, wit_str(kw_print(answer.object, NULL))};
    }
    return true;
}

/* Converts each object; the first that cannot be fails the whole request, named. */
bool exports_kubewasm_controller_webhooks_convert(exports_kubewasm_controller_webhooks_list_object_t *objects, controller_string_t *desired_api_version, exports_kubewasm_controller_webhooks_list_object_t *ret, controller_string_t *err) {
    kw_call_begin();
    const char *desired = from_wit(*desired_api_version);
    if (!plugin->convert) {
        *err = wit_cut(kw_sprintf("the plugin declares a conversion but registers no convert (to %s)", desired), MAX_DENIAL_MESSAGE);
        return false;
    }
    *ret = (exports_kubewasm_controller_webhooks_list_object_t){kw_alloc((objects->len ? objects->len : 1) * sizeof *ret->ptr), objects->len};
    for (size_t i = 0; i < objects->len; i++) {
        kw_value *object = decode(objects->ptr[i]);
        const char *name = kw_name(object);
        kw_value *converted = NULL;
        const kw_error *failed = plugin->convert(object, desired, &converted);
        if (failed || !converted) {
            *err = wit_cut(kw_sprintf("%s: %s", name ? name : "", failed ? failed->message : "convert gave no object"), MAX_DENIAL_MESSAGE);
            return false;
        }
        ret->ptr[i] = wit_str(kw_print(converted, NULL));
    }
    return true;
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

POST_RETURN("plugin@0.1.6#describe", __wasm_export_exports_kubewasm_controller_plugin_describe_post_return)
POST_RETURN("reconciler@0.1.6#reconcile", __wasm_export_exports_kubewasm_controller_reconciler_reconcile_post_return)
POST_RETURN("reconciler@0.1.6#finalize", __wasm_export_exports_kubewasm_controller_reconciler_finalize_post_return)
POST_RETURN("reconciler@0.1.6#map-related", __wasm_export_exports_kubewasm_controller_reconciler_map_related_post_return)
POST_RETURN("access@0.1.6#rules", __wasm_export_exports_kubewasm_controller_access_rules_post_return)
POST_RETURN("release@0.1.6#released", __wasm_export_exports_kubewasm_controller_release_released_post_return)
POST_RETURN("views@0.1.6#metadata-only", __wasm_export_exports_kubewasm_controller_views_metadata_only_post_return)
POST_RETURN("projections@0.1.6#fields", __wasm_export_exports_kubewasm_controller_projections_fields_post_return)
POST_RETURN("clusters@0.1.6#scope", __wasm_export_exports_kubewasm_controller_clusters_scope_post_return)
POST_RETURN("composite@0.1.6#describe-composition", __wasm_export_exports_kubewasm_controller_composite_describe_composition_post_return)
POST_RETURN("composite@0.1.6#customize", __wasm_export_exports_kubewasm_controller_composite_customize_post_return)
POST_RETURN("composite@0.1.6#sync", __wasm_export_exports_kubewasm_controller_composite_sync_post_return)
POST_RETURN("composite@0.1.6#finalize", __wasm_export_exports_kubewasm_controller_composite_finalize_post_return)
POST_RETURN("webhooks@0.1.6#declare", __wasm_export_exports_kubewasm_controller_webhooks_declare_post_return)
POST_RETURN("webhooks@0.1.6#validate", __wasm_export_exports_kubewasm_controller_webhooks_validate_post_return)
POST_RETURN("webhooks@0.1.6#mutate", __wasm_export_exports_kubewasm_controller_webhooks_mutate_post_return)
POST_RETURN("webhooks@0.1.6#convert", __wasm_export_exports_kubewasm_controller_webhooks_convert_post_return)
