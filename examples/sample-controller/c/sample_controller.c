/* The Kubernetes sample-controller (k8s.io/sample-controller) as a kubewasm plugin, in C.
 *
 * A Foo (samplecontroller.k8s.io/v1alpha1) asks for an nginx Deployment named
 * spec.deploymentName with spec.replicas replicas (default 1). The controller applies that
 * Deployment, owned by the Foo, and reports the Deployment's available replicas and the Foo's
 * observed generation in the Foo's status. A Deployment of that name that the Foo does not
 * control is left alone, with a Warning Event on the Foo.
 */
#include <kubewasm.h>

#define FOO KW_GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")

static const char *describe(kw_manifest *m, kw_settings *settings) {
    (void)settings;
    kw_manifest_name(m, "sample-controller", "0.1.0");
    kw_manifest_primary(m, FOO);
    kw_manifest_owns(m, KW_DEPLOYMENT);
    kw_manifest_permission(m, KW_DEPLOYMENT, NULL, KW_CREATE | KW_PATCH);
    kw_manifest_permission(m, FOO, "status", KW_PATCH);
    /* Parse only what is read: a Foo's spec, a Deployment's available replicas (and, of both,
     * the metadata, which every object keeps). */
    kw_manifest_reads_fields(m, FOO, "spec");
    kw_manifest_reads_fields(m, KW_DEPLOYMENT, "status.availableReplicas");
    kw_manifest_max_concurrency(m, 2);
    return NULL;
}

/* The Deployment a Foo asks for, owned by the Foo. */
static kw_value *deployment_for(const kw_value *foo, const char *name, int64_t replicas) {
    kw_value *labels = kw_object();
    kw_set(labels, "app", kw_string("nginx"));
    kw_set(labels, "controller", kw_string(kw_name(foo)));

    kw_value *deployment = kw_new_object(KW_DEPLOYMENT, kw_namespace(foo), name);
    kw_push(kw_set_path(deployment, kw_array(), "metadata", "ownerReferences", NULL), kw_controller_ref(foo));
    kw_value *spec = kw_set(deployment, "spec", kw_object());
    kw_set(spec, "replicas", kw_int(replicas));
    kw_set_path(spec, kw_copy(labels), "selector", "matchLabels", NULL);
    kw_value *template = kw_set(spec, "template", kw_object());
    kw_set_path(template, labels, "metadata", "labels", NULL);
    kw_value *container = kw_push(kw_set_path(template, kw_array(), "spec", "containers", NULL), kw_object());
    kw_set(container, "name", kw_string("nginx"));
    kw_set(container, "image", kw_string("nginx:latest"));
    return deployment;
}

static kw_result reconcile(kw_value *foo) {
    const char *name = kw_str(kw_path(foo, "spec", "deploymentName", NULL));
    if (!name || !*name) {
        return kw_fail(kw_event(foo, KW_WARNING, "InvalidSpec", "Reconcile", "spec.deploymentName must be set"));
    }

    kw_value *existing;
    const kw_error *err = kw_cache_get(KW_DEPLOYMENT, kw_namespace(foo), name, &existing);
    if (err) return kw_fail(err);
    if (existing && !kw_is_controlled_by(existing, foo)) {
        return kw_fail(kw_event(foo, KW_WARNING, "ErrResourceExists", "Reconcile", "Resource \"%s\" already exists and is not managed by Foo", name));
    }

    int64_t replicas = kw_int_or(kw_path(foo, "spec", "replicas", NULL), 1);
    kw_value *deployment;
    err = kw_apply(deployment_for(foo, name, replicas), &deployment);
    if (err) return kw_fail(err);

    kw_value *status = kw_object();
    kw_set(status, "availableReplicas", kw_int(kw_int_or(kw_path(deployment, "status", "availableReplicas", NULL), 0)));
    kw_set(status, "observedGeneration", kw_int(kw_generation(foo)));
    return kw_fail(kw_apply_status(kw_status_object(foo, status), NULL));
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile);
