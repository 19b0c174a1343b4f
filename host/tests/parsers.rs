//! Property tests of every parser that reads text a Plugin author, a plugin or a registry
//! chooses: durations (`spec.pollInterval`, flags), Plugin specs, settings TOML
//! (`plugin::read_settings`), OCI references and manifests, plugin manifests
//! (`Manifest::validate` and the checks built on it) and label selectors. Each must answer every
//! input — with a value or an error — and never panic: a panic in a delivery pipeline or a load
//! is a host taken down by a spec (the audit's H2). A few hundred cases each: seconds in all.
//!
//! `cargo test -p kubewasm --test parsers`

use std::collections::BTreeSet;
use std::str::FromStr;
use std::time::Duration;

use kubewasm::delivery::read_plugin;
use kubewasm::manifest::{
    ChildRule, ChildSelector, Composition, LimitPolicy, Manifest, Mapping, Permission, Projection, RequestedLimits, UpdateStrategy, Verb, Watch,
};
use kubewasm::projection::Fields;
use kubewasm::resource::Gvk;
use kubewasm::selector::LabelSelector;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() }
}

/// Text that looks like the grammar more often than random bytes would.
fn durationish() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec((any::<u64>().prop_map(|n| n.to_string()), prop::sample::select(vec!["ms", "s", "m", "h", "", "d", "µs"])), 0..6)
            .prop_map(|parts| parts.into_iter().map(|(n, u)| format!("{n}{u}")).collect()),
        "[0-9]{1,40}(ms|s|m|h)([0-9]{1,25}(ms|s|m|h)){0,3}",
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)),
        ".{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z.-]{0,8}", inner, 0..6).prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn referenceish() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9.:-]{0,20}/[a-zA-Z0-9/._-]{0,30}(:[A-Za-z0-9._-]{0,20})?(@sha[0-9]{3}:[0-9a-f]{0,70})?",
        "(localhost|127\\.0\\.0\\.1:[0-9]{1,6}|ghcr\\.io)/team/p(:1)?(@sha256:[0-9a-f]{64})?",
    ]
}

fn wasm_manifest() -> impl Strategy<Value = Vec<u8>> {
    let descriptor = (prop::sample::select(vec!["application/wasm", "application/vnd.wasm.config.v0+json", "x"]), "(sha256:)?[0-9a-f./]{0,70}", any::<i64>())
        .prop_map(|(t, d, s)| serde_json::json!({"mediaType": t, "digest": d, "size": s}));
    prop_oneof![
        any::<Vec<u8>>(),
        (json_value(), prop::option::of(descriptor.clone()), prop::collection::vec(descriptor, 0..3), any::<bool>()).prop_map(
            |(extra, config, layers, index)| {
                let mut m = serde_json::json!({"schemaVersion": 2, "config": config, "layers": layers, "extra": extra});
                if index {
                    m["manifests"] = serde_json::json!([]);
                }
                serde_json::to_vec(&m).unwrap()
            }
        ),
    ]
}

fn gvk() -> impl Strategy<Value = Gvk> {
    ("[a-z.]{0,12}|.{0,8}", "v[0-9a-z]{0,4}|.{0,4}", "[A-Z][a-zA-Z]{0,10}|.{0,8}").prop_map(|(g, v, k)| Gvk::new(&g, &v, &k))
}

fn verbs() -> impl Strategy<Value = BTreeSet<Verb>> {
    prop::collection::btree_set(prop::sample::select(vec![Verb::Get, Verb::List, Verb::Watch, Verb::Create, Verb::Update, Verb::Patch, Verb::Delete]), 0..5)
}

fn manifest() -> impl Strategy<Value = Manifest> {
    let permission =
        (gvk(), prop::option::of("[a-z]{0,8}|.{0,6}"), verbs(), prop::collection::btree_set(".{0,10}", 0..3), prop::collection::btree_set(".{0,12}", 0..3))
            .prop_map(|(resource, subresource, verbs, namespaces, names)| Permission { resource, subresource, verbs, namespaces, names });
    let mapping = prop_oneof![Just(Mapping::OwnerReferences), Just(Mapping::MapRelated), ".{0,20}".prop_map(Mapping::Label)];
    let watch = (gvk(), mapping, prop::option::of(".{0,30}")).prop_map(|(resource, mapping, selector)| Watch {
        resource,
        mapping,
        selector: selector.and_then(|s| LabelSelector::from_str(&s).ok()),
    });
    (
        ("[a-z0-9-]{0,70}|.{0,10}", ".{0,70}", gvk(), prop::option::of(".{0,40}")),
        (prop::collection::vec(gvk(), 0..3), prop::collection::vec(watch, 0..3), prop::option::of(".{0,300}"), prop::option::of(any::<u64>())),
        (any::<u32>(), prop::option::of(any::<u64>()), prop::option::of(any::<u64>()), prop::collection::vec(permission, 0..4)),
    )
        .prop_map(|((name, version, primary, selector), (owns, watches, finalizer, resync), (max_concurrency, deadline, memory, permissions))| Manifest {
            name,
            version,
            // Before `primary` moves: its spec, read projected, when nothing else is declared.
            projections: if owns.is_empty() {
                vec![Projection { resource: primary.clone(), fields: std::sync::Arc::new(Fields::new([["spec"]])) }]
            } else {
                vec![]
            },
            primary,
            primary_selector: selector.and_then(|s| LabelSelector::from_str(&s).ok()),
            // Before `owns` moves: an owned kind read as metadata (valid), or none; and a
            // composition ruling the owned kinds.
            metadata_only: owns.first().cloned().into_iter().collect(),
            composition: (owns.len() == 2).then(|| Composition {
                children: owns.iter().map(|g| ChildRule { resource: g.clone(), update: UpdateStrategy::InPlace }).collect(),
                selector: ChildSelector::Generated,
            }),
            clusters: Default::default(),
            hooks: Default::default(),
            owns,
            watches,
            finalizer,
            resync: resync.map(Duration::from_secs),
            max_concurrency,
            limits: RequestedLimits { deadline: deadline.map(Duration::from_millis), memory_bytes: memory },
            permissions,
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn durations_parse_or_fail_and_never_wrap(text in durationish()) {
        if let Ok(d) = kubewasm::duration::parse(&text) {
            // What Go's time.Duration holds.
            prop_assert!(d.as_nanos() <= i64::MAX as u128, "{text:?} gave {d:?}");
        }
    }

    #[test]
    fn a_sum_of_small_parts_is_their_sum(parts in prop::collection::vec((0u64..100_000, 0usize..4), 1..5)) {
        let units = [("ms", 1u64), ("s", 1000), ("m", 60_000), ("h", 3_600_000)];
        let text: String = parts.iter().map(|(n, u)| format!("{n}{}", units[*u].0)).collect();
        let millis: u64 = parts.iter().map(|(n, u)| n * units[*u].1).sum();
        prop_assert_eq!(kubewasm::duration::parse(&text), Ok(Duration::from_millis(millis)));
    }

    #[test]
    fn plugin_specs_read_or_fail(module in referenceish(), poll in prop::option::of(durationish()), settings in json_value(), candidate in prop::option::of(referenceish()), raw in any::<String>()) {
        let object = serde_json::json!({
            "metadata": {"name": "p", "generation": 3},
            "spec": {"module": module, "pollInterval": poll, "settings": settings, "candidate": candidate},
        });
        for json in [object.to_string(), raw] {
            if let Ok(plugin) = read_plugin(&json) {
                match plugin.spec() {
                    Ok(spec) => prop_assert!(!spec.poll.is_zero()),
                    Err(failure) => prop_assert!(!failure.reason.as_str().is_empty() && !failure.message.is_empty()),
                }
            }
        }
    }

    #[test]
    fn oci_references_and_manifests_parse_or_fail(reference in referenceish(), manifest in wasm_manifest()) {
        if let Ok(r) = kubewasm::oci::parse_reference(&reference) {
            prop_assert!(r.digest().is_none_or(|d| d.starts_with("sha256:")));
        }
        if let Ok(layer) = kubewasm::oci::wasm_layer(&manifest) {
            prop_assert!(layer.digest.len() == 71 && layer.digest.starts_with("sha256:"));
        }
    }

    #[test]
    fn settings_files_read_or_fail(text in prop_oneof![any::<String>(), "([a-z-]{1,8} = (\"[^\"]{0,8}\"|[0-9.e+-]{1,12}|true|\\[\\])\n){0,4}(\\[kubewasm\\]\n([a-z-]{1,22} = [0-9.e+-]{1,24}\n){0,4})?"]) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.toml"), &text).unwrap();
        let read = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(kubewasm::plugin::read_settings(&dir.path().join("p.wasm")));
        if let Ok((settings, _)) = read {
            prop_assert!(serde_json::from_str::<serde_json::Value>(&settings).is_ok());
        }
    }

    #[test]
    fn plugin_manifests_validate_or_fail(m in manifest()) {
        if m.validate(&LimitPolicy::default()).is_ok() {
            // What the host derives from a valid manifest is defined for it too.
            let _ = (m.rules(), m.cached_resources(), m.field_manager());
            let _ = m.allows(Verb::Get, &m.primary, None, Some("ns"), Some("x"));
        }
    }

    #[test]
    fn selectors_parse_or_fail(text in prop_oneof![any::<String>(), "([!]?[a-z./-]{0,12} *(=|==|!=| in | notin |)[ (a-z,)]{0,12},?){0,4}"], labels in prop::collection::btree_map("[a-z./-]{0,10}", "[a-z]{0,5}", 0..4)) {
        if let Ok(selector) = LabelSelector::from_str(&text) {
            let _ = selector.matches(|k| labels.get(k).map(String::as_str));
            // What it prints parses to the same selector.
            prop_assert_eq!(LabelSelector::from_str(selector.as_str()).ok(), Some(selector.clone()));
        }
    }
}
