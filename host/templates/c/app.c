/* {{name}}: a kubewasm controller plugin.
 *
 * Every ConfigMap labeled {{name}}.example.com/enabled=true gets a summary ConfigMap,
 * <name>-summary, that lists the keys of its data and is owned by it (so Kubernetes deletes the
 * summary with it). One server-side apply per reconcile; the host does the rest (watches, cache,
 * queue, retries).
 *
 * describe says what the plugin reconciles and what it may do; reconcile is the logic;
 * KUBEWASM_PLUGIN names them. Everything the SDK hands out lives until the call returns:
 * nothing to free.
 */
#include <stdlib.h>
#include <string.h>

#include <kubewasm.h>

/* Selects the ConfigMaps this controller reconciles. */
#define LABEL "{{name}}.example.com/enabled"

/* The setting `suffix` ({{name}}.toml beside {{name}}.wasm): a summary is <name>-<suffix>. Kept
 * with malloc: describe's values are gone when it returns. */
static char *suffix;

static const char *describe(kw_manifest *m, kw_settings *settings) {
    kw_value *setting = kw_setting(settings, "suffix");
    if (setting && (!kw_str(setting) || !*kw_str(setting))) {
        return "suffix must be a non-empty string";
    }
    free(suffix);
    suffix = strdup(kw_str_or(setting, "summary"));
    kw_manifest_name(m, "{{name}}", "0.1.0");
    kw_manifest_primary(m, KW_CONFIGMAP);
    kw_manifest_primary_selector(m, LABEL "=true");
    kw_manifest_permission(m, KW_CONFIGMAP, NULL, KW_CREATE | KW_PATCH);
    return NULL;
}

static int by_text(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static kw_result reconcile(kw_value *cm) {
    const kw_value *data = kw_get(cm, "data");
    size_t count = kw_len(data);
    const char **keys = kw_alloc((count + 1) * sizeof *keys);
    size_t joined = 1;
    for (size_t i = 0; i < count; i++) {
        keys[i] = kw_key_at(data, i);
        joined += strlen(keys[i]) + 1;
    }
    qsort(keys, count, sizeof *keys, by_text);
    char *list = kw_alloc(joined);
    list[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (i > 0) strcat(list, ",");
        strcat(list, keys[i]);
    }

    kw_value *summary = kw_new_object(KW_CONFIGMAP, kw_namespace(cm), kw_sprintf("%s-%s", kw_name(cm), suffix));
    kw_push(kw_set_path(summary, kw_array(), "metadata", "ownerReferences", NULL), kw_controller_ref(cm));
    kw_value *out = kw_set(summary, "data", kw_object());
    kw_set(out, "source", kw_string(kw_name(cm)));
    kw_set(out, "keys", kw_string(list));
    kw_set(out, "count", kw_string(kw_sprintf("%zu", count)));
    const kw_error *err = kw_apply(summary, NULL);
    if (err) return kw_fail(err);
    kw_log(KW_INFO, "summarized %zu keys of configmap %s", count, kw_name(cm));
    return KW_DONE;
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile);
