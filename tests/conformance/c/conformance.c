/* The SDK conformance plugin in C: what each data.do of a primary ConfigMap and each `do`
 * annotation of a watched Secret makes it do is in tests/conformance/README.md, the same in
 * every language. */
#include <stdlib.h>
#include <string.h>

#include <kubewasm.h>

/* The setting `prefix`, kept from describe for every later call. */
static char *prefix;

static const char *describe(kw_manifest *m, kw_settings *settings) {
    free(prefix);
    prefix = strdup(kw_str_or(kw_setting(settings, "prefix"), "conformance"));
    kw_manifest_name(m, "conformance", "0.1.0");
    kw_manifest_primary(m, KW_CONFIGMAP);
    kw_manifest_watch(m, KW_SECRET, KW_BY_MAP_RELATED, NULL, NULL);
    kw_manifest_permission(m, KW_CONFIGMAP, NULL, KW_PATCH);
    return NULL;
}

/* n copies of the text one, in the call's arena. */
static char *repeat(const char *one, size_t n) {
    size_t len = strlen(one);
    char *text = kw_alloc(len * n + 1);
    for (size_t i = 0; i < n; i++) {
        memcpy(text + i * len, one, len);
    }
    text[len * n] = '\0';
    return text;
}

static const kw_code CODES[] = {KW_NOT_FOUND, KW_ALREADY_EXISTS, KW_CONFLICT, KW_FORBIDDEN, KW_INVALID, KW_UNAVAILABLE, KW_OTHER};

static kw_result reconcile(kw_value *cm) {
    const char *do_ = kw_str_or(kw_path(cm, "data", "do", NULL), "done");
    const char *ns = kw_namespace(cm);
    kw_value *ignored;
    if (strcmp(do_, "done") == 0) {
        return KW_DONE;
    }
    if (strcmp(do_, "requeue") == 0) {
        /* C's unit of time is struct timespec (C11's, as thrd_sleep takes). */
        long long us = strtoll(kw_str_or(kw_path(cm, "data", "after-us", NULL), "0"), NULL, 10);
        return kw_requeue_after((struct timespec){.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000});
    }
    if (strcmp(do_, "error") == 0) {
        const char *code = kw_str_or(kw_path(cm, "data", "code", NULL), "");
        for (size_t i = 0; i < sizeof CODES / sizeof *CODES; i++) {
            if (strcmp(code, kw_code_name(CODES[i])) == 0) {
                return kw_failf(CODES[i], "%s: %s", prefix, code);
            }
        }
        return kw_failf(KW_OTHER, "unknown code \"%s\"", code);
    }
    if (strcmp(do_, "long-error") == 0) {
        return kw_failf(KW_OTHER, "%s", repeat("é", 40000));
    }
    if (strcmp(do_, "panic") == 0) {
        kw_panic("conformance panics on purpose");
    }
    if (strcmp(do_, "get-long-name") == 0) {
        return kw_fail(kw_cache_get(KW_CONFIGMAP, ns, repeat("a", 254), &ignored));
    }
    if (strcmp(do_, "list-long-selector") == 0) {
        return kw_fail(kw_cache_list(KW_CONFIGMAP, ns, repeat("a", 4097), &ignored));
    }
    if (strcmp(do_, "event-long-note") == 0) {
        return kw_fail(kw_event(cm, KW_NORMAL, "Checked", "Reconcile", "%s", repeat("n", 1025)));
    }
    if (strcmp(do_, "event-empty-reason") == 0) {
        return kw_fail(kw_event(cm, KW_NORMAL, "", "Reconcile", "%s", ""));
    }
    if (strcmp(do_, "read-pod") == 0) {
        return kw_fail(kw_cache_get(KW_POD, ns, "x", &ignored));
    }
    return kw_failf(KW_OTHER, "unknown do \"%s\"", do_);
}

/* map-related has no error value: failing, the C way, is a trap (kw_panic), as for a bug. */
static void map_related(kw_gvk resource, kw_value *secret, kw_keys *keys) {
    (void)resource;
    const char *do_ = kw_annotation(secret, "do");
    if (do_ && strcmp(do_, "panic") == 0) {
        kw_panic("conformance panics on purpose in map-related");
    }
    if (do_ && strcmp(do_, "error") == 0) {
        kw_panic("conformance fails map-related on purpose");
    }
    const char *primary = kw_label(secret, "primary");
    if (primary && *primary) {
        kw_keys_add(keys, kw_namespace(secret), primary);
    }
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile, .map_related = map_related);
