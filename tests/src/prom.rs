//! Reading Prometheus text: the host's `/metrics` and the API server's own, which tells from the
//! server's side how many watches are open.
//!
//! Owns no state; parsing is deliberately small (names, labels, values), enough for the
//! counters and gauges the suite reads.

use std::collections::BTreeMap;

use kube::Client;

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample in `text` (comments skipped; lines that do not parse skipped).
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let mut labels = BTreeMap::new();
    let rest = if let Some(mut inner) = rest.strip_prefix('{') {
        loop {
            inner = inner.trim_start_matches([',', ' ']);
            if let Some(after) = inner.strip_prefix('}') {
                break after;
            }
            let (key, after) = inner.split_once("=\"")?;
            // The value runs to the next unescaped quote.
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    '"' => break i,
                    c => value.push(c),
                }
            };
            labels.insert(key.trim().to_string(), value);
            inner = &after[end + 1..];
        }
    } else {
        rest
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample { name: name.to_string(), labels, value })
}

/// The sum of the samples of `name` whose labels include every pair of `labels`; 0 when none.
pub fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text).iter().filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))).map(|s| s.value).sum()
}

/// The API server's `/metrics`, read with `client` (an admin client).
pub async fn apiserver_metrics(client: &Client) -> Result<String, kube::Error> {
    let request = http::Request::get("/metrics").body(Vec::new()).expect("a valid request");
    client.request_text(request).await
}

/// Watches of `resource` (plural, e.g. `configmaps`) open on the API server now, from its own
/// gauge `apiserver_longrunning_requests{verb="WATCH"}`, over every scope (cluster-wide,
/// per-namespace and single-object watches).
pub async fn apiserver_watches(client: &Client, group: &str, resource: &str) -> Result<f64, kube::Error> {
    let text = apiserver_metrics(client).await?;
    Ok(sum(&text, "apiserver_longrunning_requests", &[("verb", "WATCH"), ("group", group), ("resource", resource)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_labels_and_values() {
        let text = r#"# HELP x help
# TYPE x counter
workqueue_adds_total{name="foo",controller="foo"} 7
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
odd{note="a \"quoted\" value, with a comma"} 1.5
plain 3e2
"#;
        assert_eq!(sum(text, "workqueue_adds_total", &[("controller", "foo")]), 7.0);
        assert_eq!(sum(text, "workqueue_adds_total", &[("controller", "bar")]), 0.0);
        assert_eq!(sum(text, "apiserver_longrunning_requests", &[("verb", "WATCH"), ("resource", "configmaps")]), 3.0);
        assert_eq!(sum(text, "plain", &[]), 300.0);
        let odd = samples(text).into_iter().find(|s| s.name == "odd").unwrap();
        assert_eq!(odd.labels["note"], "a \"quoted\" value, with a comma");
        assert_eq!(odd.value, 1.5);
    }
}
