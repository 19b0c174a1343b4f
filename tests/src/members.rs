//! Member clusters for the multi-cluster tests and benchmark: a kubeconfig file in a host's
//! `--clusters` directory, its current context labelled through the `kubewasm.io/labels`
//! extension, written whole and renamed as a mounted Secret changes.

use std::path::Path;

/// Engages the cluster of `kubeconfig` as member `name` of the host reading `dir`, with
/// `labels`.
pub fn engage(dir: &Path, name: &str, kubeconfig: &Path, labels: &[(&str, &str)]) -> std::io::Result<()> {
    let mut config = kube::config::Kubeconfig::read_from(kubeconfig).map_err(std::io::Error::other)?;
    let current = config.current_context.clone();
    let labels: serde_json::Map<String, serde_json::Value> = labels.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
    for context in config.contexts.iter_mut().filter(|c| Some(&c.name) == current.as_ref()) {
        let context = context.context.get_or_insert_with(Default::default);
        context.extensions =
            Some(vec![kube::config::NamedExtension { name: "kubewasm.io/labels".into(), extension: serde_json::Value::Object(labels.clone()) }]);
    }
    // JSON is YAML.
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&config).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, dir.join(format!("{name}.yaml")))
}

/// Disengages member `name` of the host reading `dir`.
pub fn disengage(dir: &Path, name: &str) -> std::io::Result<()> {
    std::fs::remove_file(dir.join(format!("{name}.yaml")))
}
