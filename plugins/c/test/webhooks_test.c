/* Native unit tests of the webhooks export (exports.c) as the host calls it: the kubebuilder
 * tutorial's CronJob defaulter, validator and v1 <-> v2 conversion, cut down, registered as a
 * plugin is. The host's imports (controller.c) are not linked (see the Makefile): these hooks
 * make no host call. */
#include "../src/boundary.h"
#include "check.h"

#define CRONJOB_V1 KW_GVK("batch.tutorial.kubebuilder.io", "v1", "CronJob")
#define V1 "batch.tutorial.kubebuilder.io/v1"
#define V2 "batch.tutorial.kubebuilder.io/v2"

static const char *describe(kw_manifest *m, kw_settings *settings) {
    (void)settings;
    kw_manifest_primary(kw_manifest_name(m, "cronjob", "0.1.0"), CRONJOB_V1);
    kw_manifest_mutating_webhook(m, "default-cronjob", CRONJOB_V1);
    kw_hook_timeout_seconds(kw_hook_operations(kw_manifest_validating_webhook(m, "validate-cronjob", CRONJOB_V1), KW_ON_CREATE | KW_ON_DELETE), 5);
    kw_manifest_converts(m, CRONJOB_V1);
    return NULL;
}

static kw_result reconcile(kw_value *object) {
    (void)object;
    return KW_DONE;
}

static kw_admission validate(const kw_review *review) {
    const char *reason = kw_str(kw_get(kw_get(review->object, "spec"), "reason"));
    if (reason) {
        kw_warn("refused");
        return kw_deny(422, "%s", reason);
    }
    if (strlen(review->name) > 52) return kw_deny(403, "metadata.name: must be no more than 52 characters");
    kw_warn("spec.startingDeadlineSeconds is unset");
    return KW_ALLOWED;
}

static kw_admission mutate(const kw_review *review) {
    kw_value *spec = kw_get(review->object, "spec");
    if (kw_get(spec, "concurrencyPolicy")) return KW_ALLOWED;
    kw_set(spec, "concurrencyPolicy", kw_string("Allow"));
    return kw_mutated(review->object);
}

static const kw_error *convert(kw_value *object, const char *desired, kw_value **out) {
    kw_value *spec = kw_get(object, "spec");
    if (strcmp(desired, V2) == 0) {
        kw_value *schedule = kw_object();
        kw_set(schedule, "cron", kw_string(kw_str(kw_get(spec, "schedule"))));
        kw_set(spec, "schedule", schedule);
    } else if (strcmp(desired, V1) == 0) {
        kw_set(spec, "schedule", kw_string(kw_str(kw_get(kw_get(spec, "schedule"), "cron"))));
    } else {
        return kw_errorf(KW_INVALID, "unknown version %s", desired);
    }
    kw_set(object, "apiVersion", kw_string(desired));
    *out = object;
    return NULL;
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile, .validate = validate, .mutate = mutate, .convert = convert);

static controller_string_t text(const char *s) {
    return wit_str(s);
}

/* Describes the plugin, as the host does first on every instance. */
static bool described(void) {
    controller_string_t settings = text("{}");
    exports_kubewasm_controller_plugin_manifest_t manifest;
    controller_string_t refused;
    return exports_kubewasm_controller_plugin_describe(&settings, &manifest, &refused);
}

static exports_kubewasm_controller_webhooks_admission_request_t request(const char *hook, const char *name, const char *spec) {
    return (exports_kubewasm_controller_webhooks_admission_request_t){
        .hook = text(hook),
        .kind = wit_gvk(CRONJOB_V1),
        .namespace_ = wit_opt("default"),
        .name = text(name),
        .operation = EXPORTS_KUBEWASM_CONTROLLER_WEBHOOKS_OPERATION_CREATE,
        .object = {true, text(kw_sprintf("{\"apiVersion\":\"" V1 "\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"%s\"},\"spec\":%s}", name, spec))},
    };
}

static bool is(controller_string_t got, const char *want) {
    return got.len == strlen(want) && memcmp(got.ptr, want, got.len) == 0;
}

static void test_the_hooks_are_declared(void) {
    CHECK(described());
    exports_kubewasm_controller_webhooks_declaration_t declared;
    exports_kubewasm_controller_webhooks_declare(&declared);
    CHECK(declared.admission.len == 2 && declared.conversion.len == 1);
    exports_kubewasm_controller_webhooks_admission_hook_t *validating = &declared.admission.ptr[1];
    CHECK(declared.admission.ptr[0].mutating && !validating->mutating && is(validating->name, "validate-cronjob"));
    CHECK(validating->timeout_seconds == 5 && validating->operations.len == 2);
    CHECK(validating->operations.ptr[1] == EXPORTS_KUBEWASM_CONTROLLER_WEBHOOKS_OPERATION_DELETE);
    CHECK(is(validating->kinds.ptr[0].kind, "CronJob") && is(declared.conversion.ptr[0].resource.group, "batch.tutorial.kubebuilder.io"));
}

static void test_a_validator_allows_with_warnings_and_denies(void) {
    CHECK(described());
    controller_list_string_t warnings;
    exports_kubewasm_controller_webhooks_denial_t denial;
    exports_kubewasm_controller_webhooks_admission_request_t ok = request("validate-cronjob", "ok", "{}");
    CHECK(exports_kubewasm_controller_webhooks_validate(&ok, &warnings, &denial));
    CHECK(warnings.len == 1 && is(warnings.ptr[0], "spec.startingDeadlineSeconds is unset"));
    exports_kubewasm_controller_webhooks_admission_request_t bad = request("validate-cronjob", "bad", "{\"reason\":\"bad schedule\"}");
    CHECK(!exports_kubewasm_controller_webhooks_validate(&bad, &warnings, &denial));
    CHECK(denial.code == 422 && is(denial.message, "bad schedule") && denial.warnings.len == 1 && is(denial.warnings.ptr[0], "refused"));
}

static void test_a_long_denial_is_cut_at_a_character_boundary(void) {
    CHECK(described());
    /* 4095 bytes, then a 2-byte character across the bound. */
    char reason[MAX_DENIAL_MESSAGE + 64];
    memset(reason, 'x', MAX_DENIAL_MESSAGE - 1);
    strcpy(reason + MAX_DENIAL_MESSAGE - 1, "\xc3\xa9yyyy");
    exports_kubewasm_controller_webhooks_admission_request_t long_one = request("validate-cronjob", "long", kw_sprintf("{\"reason\":\"%s\"}", reason));
    controller_list_string_t warnings;
    exports_kubewasm_controller_webhooks_denial_t denial;
    CHECK(!exports_kubewasm_controller_webhooks_validate(&long_one, &warnings, &denial));
    CHECK(denial.message.len == MAX_DENIAL_MESSAGE - 1);
}

static void test_a_defaulter_changes_the_object(void) {
    CHECK(described());
    exports_kubewasm_controller_webhooks_mutation_t mutation;
    exports_kubewasm_controller_webhooks_denial_t denial;
    exports_kubewasm_controller_webhooks_admission_request_t unset = request("default-cronjob", "a", "{\"schedule\":\"* * * * *\"}");
    CHECK(exports_kubewasm_controller_webhooks_mutate(&unset, &mutation, &denial) && mutation.object.is_some);
    kw_value *mutated = kw_parse((const char *)mutation.object.val.ptr, mutation.object.val.len, NULL);
    CHECK_STR(kw_str(kw_get(kw_get(mutated, "spec"), "concurrencyPolicy")), "Allow");
    CHECK_STR(kw_name(mutated), "a");
    exports_kubewasm_controller_webhooks_admission_request_t set = request("default-cronjob", "a", "{\"concurrencyPolicy\":\"Forbid\"}");
    CHECK(exports_kubewasm_controller_webhooks_mutate(&set, &mutation, &denial) && !mutation.object.is_some);
}

static void test_a_converter_changes_the_version_and_keeps_the_name(void) {
    CHECK(described());
    controller_string_t v1 = text("{\"apiVersion\":\"" V1 "\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"schedule\":\"*/5 * * * *\"}}");
    exports_kubewasm_controller_webhooks_list_object_t objects = {&v1, 1}, converted;
    controller_string_t desired = text(V2), err;
    CHECK(exports_kubewasm_controller_webhooks_convert(&objects, &desired, &converted, &err) && converted.len == 1);
    CHECK(is(converted.ptr[0], "{\"apiVersion\":\"" V2 "\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"schedule\":{\"cron\":\"*/5 * * * *\"}}}"));
    controller_string_t unknown = text("batch.tutorial.kubebuilder.io/v3");
    CHECK(!exports_kubewasm_controller_webhooks_convert(&objects, &unknown, &converted, &err));
    CHECK(is(err, "a: unknown version batch.tutorial.kubebuilder.io/v3"));
}

static const test tests[] = {
    T(the_hooks_are_declared),
    T(a_validator_allows_with_warnings_and_denies),
    T(a_long_denial_is_cut_at_a_character_boundary),
    T(a_defaulter_changes_the_object),
    T(a_converter_changes_the_version_and_keeps_the_name),
};

int main(void) {
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
