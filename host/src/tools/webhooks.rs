//! `kubewasm webhooks`: the webhook configurations and CRD conversion stanzas a host would write
//! for the plugins of a directory, as YAML, for a GitOps user who applies them instead of letting
//! the leader write them. They are what [`configuration::render`] and [`configuration::conversion`]
//! make, so the two never differ; only the kinds are resolved without a cluster: plurals as kube
//! pluralizes kinds, built-in cluster-scoped kinds known, custom kinds taken as namespaced and
//! their CRDs named `PLURAL.GROUP`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::manifest::Manifest;
use crate::resource::{builtin_scope, crd_name, plural};
use crate::webhook::configuration::{self, Endpoint, FIELD_MANAGER, Served};

/// What the host's flags would say.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host's name: the configurations' prefix and label (its Lease's name).
    pub host: String,
    pub endpoint: Endpoint,
    /// The CA bundle (PEM) the API server trusts the host's certificate by; none when the
    /// API server trusts it otherwise (cert-manager's CA injector, a public CA).
    pub ca: Option<Vec<u8>>,
    /// Namespaces served; empty for all.
    pub namespaces: Vec<String>,
}

/// Every plugin's configurations, then the conversion stanzas, as YAML documents ready for
/// server-side apply (as the host's own field manager, so that a host writing them later takes
/// them over without a conflict). Plugins without hooks contribute nothing.
pub fn render(manifests: &[Manifest], options: &Options) -> String {
    let ca = options.ca.as_deref();
    let mut objects: Vec<Value> = Vec::new();
    for m in manifests {
        let resources: BTreeMap<_, _> = m
            .hooks
            .admission
            .iter()
            .flat_map(|hook| &hook.kinds)
            .map(|kind| (kind.clone(), Served { plural: plural(kind), scope: builtin_scope(kind) }))
            .collect();
        let rendered = configuration::render(&options.host, &m.name, &m.hooks, &resources, &options.endpoint, ca, &options.namespaces);
        objects.extend(rendered.validating.into_iter().chain(rendered.mutating));
        objects.extend(m.hooks.conversion.iter().map(|kind| configuration::conversion(&options.host, &m.name, &crd_name(kind), &options.endpoint, ca)));
    }
    let header = format!("# kubectl apply --server-side --field-manager={FIELD_MANAGER} -f -\n");
    let documents: Vec<String> = objects.iter().map(|o| serde_saphyr::to_string(o).expect("JSON values serialize")).collect();
    format!("{header}{}", documents.join("---\n"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hooks::{AdmissionHook, FailurePolicy, Hooks, Operation, SideEffects};
    use crate::manifest::RequestedLimits;
    use crate::resource::Gvk;

    fn cronjob() -> Gvk {
        Gvk::new("batch.tutorial.kubebuilder.io", "v1", "CronJob")
    }

    fn hook(name: &str, mutating: bool, kind: Gvk) -> AdmissionHook {
        AdmissionHook {
            name: name.into(),
            mutating,
            kinds: vec![kind],
            operations: vec![Operation::Create, Operation::Update],
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            side_effects: SideEffects::None,
            match_conditions: vec![],
        }
    }

    fn manifest(name: &str, hooks: Hooks) -> Manifest {
        Manifest {
            name: name.into(),
            version: "1".into(),
            primary: cronjob(),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            resync: None,
            max_concurrency: 1,
            limits: RequestedLimits::default(),
            permissions: vec![],
            metadata_only: vec![],
            projections: vec![],
            composition: None,
            clusters: Default::default(),
            hooks,
        }
    }

    #[test]
    fn prints_each_plugins_configurations_and_the_crds_conversions() {
        let hooks = Hooks {
            admission: vec![hook("default", true, cronjob()), hook("validate", false, cronjob()), hook("nodes", false, Gvk::new("", "v1", "Node"))],
            conversion: vec![cronjob()],
        };
        let manifests = [manifest("cronjob", hooks), manifest("quiet", Hooks::default())];
        let options = Options {
            host: "kubewasm".into(),
            endpoint: Endpoint::service("kubewasm/kubewasm-webhooks").unwrap(),
            ca: Some(b"-----BEGIN CERTIFICATE-----\n".to_vec()),
            namespaces: vec!["team-a".into()],
        };
        let yaml = render(&manifests, &options);
        assert!(yaml.starts_with("# kubectl apply --server-side --field-manager=kubewasm-webhooks"), "{yaml}");
        let objects: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        let kinds: Vec<(&str, &str)> = objects.iter().map(|o| (o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap())).collect();
        assert_eq!(
            kinds,
            [
                ("ValidatingWebhookConfiguration", "kubewasm-cronjob"),
                ("MutatingWebhookConfiguration", "kubewasm-cronjob"),
                ("CustomResourceDefinition", "cronjobs.batch.tutorial.kubebuilder.io"),
            ],
            "nothing for a plugin without hooks"
        );
        let validating = &objects[0]["webhooks"];
        assert_eq!(validating[0]["rules"][0]["resources"], serde_json::json!(["cronjobs"]));
        assert_eq!(validating[0]["rules"][0]["scope"], "Namespaced");
        assert_eq!(validating[1]["rules"][0]["resources"], serde_json::json!(["nodes"]));
        assert_eq!(validating[1]["rules"][0]["scope"], "Cluster", "a built-in kind's scope is known");
        assert_eq!(validating[0]["clientConfig"]["service"]["path"], "/validate/cronjob/validate");
        assert_eq!(validating[0]["clientConfig"]["caBundle"], "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==");
        assert_eq!(validating[0]["namespaceSelector"]["matchExpressions"][0]["values"], serde_json::json!(["team-a"]));
        assert_eq!(objects[1]["webhooks"][0]["clientConfig"]["service"]["path"], "/mutate/cronjob/default");
        let conversion = &objects[2]["spec"]["conversion"];
        assert_eq!(conversion["strategy"], "Webhook");
        assert_eq!(conversion["webhook"]["clientConfig"]["service"]["path"], "/convert/cronjob");
        assert_eq!(render(&[manifests[1].clone()], &options).lines().count(), 1, "the header alone");
    }
}
