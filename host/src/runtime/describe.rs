//! Turns the manifest a guest returns from `describe` (and, since 0.1.1, the rules of its
//! `access` export) into the host's [`Manifest`], rejecting what cannot be represented (an
//! unknown verb, an oversized manifest).

use std::time::Duration;

use super::bindings::access_exports::Rule as WitRule;
use super::bindings::plugin_exports::{self as wit, Mapping as WitMapping, Verb as WitVerb};
use crate::manifest::{DEFAULT_RESYNC, Manifest, ManifestError, Mapping, Permission, RequestedLimits, Verb, Watch};
use crate::selector::LabelSelector;

/// More entries than this in any list of a manifest is a broken plugin, not a real need.
const MAX_ENTRIES: usize = 1000;

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ManifestError {
    ManifestError { field: field.into(), problem: problem.into() }
}

fn selector(field: &str, text: Option<String>) -> Result<Option<LabelSelector>, ManifestError> {
    text.map(|t| t.parse().map_err(|e: crate::selector::SelectorError| invalid(field, e.to_string()))).transpose()
}

pub(super) fn manifest(m: wit::Manifest, rules: Vec<WitRule>) -> Result<Manifest, ManifestError> {
    for (field, len) in [("owns", m.owns.len()), ("watches", m.watches.len()), ("permissions", m.permissions.len()), ("access.rules", rules.len())] {
        if len > MAX_ENTRIES {
            return Err(invalid(field, format!("{len} entries; at most {MAX_ENTRIES}")));
        }
    }
    let watches = m
        .watches
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            Ok(Watch {
                resource: w.resource.into(),
                mapping: match w.mapping {
                    WitMapping::OwnerReferences => Mapping::OwnerReferences,
                    WitMapping::Label(key) => Mapping::Label(key),
                    WitMapping::MapRelated => Mapping::MapRelated,
                },
                selector: selector(&format!("watches[{i}].label-selector"), w.label_selector)?,
            })
        })
        .collect::<Result<_, ManifestError>>()?;
    let mut permissions: Vec<Permission> = m
        .permissions
        .into_iter()
        .map(|p| Permission {
            resource: p.resource.into(),
            subresource: p.subresource,
            verbs: p.verbs.into_iter().map(verb).collect(),
            namespaces: p.namespaces.into_iter().collect(),
            names: Default::default(),
        })
        .collect();
    for (i, rule) in rules.into_iter().enumerate() {
        let verbs = rule.verbs.iter().map(|v| v.parse::<Verb>().map_err(|e| invalid(format!("access.rules[{i}].verbs"), e))).collect::<Result<_, _>>()?;
        permissions.push(Permission {
            resource: rule.resource.into(),
            subresource: rule.subresource,
            verbs,
            namespaces: rule.namespaces.into_iter().collect(),
            names: rule.resource_names.into_iter().collect(),
        });
    }
    Ok(Manifest {
        name: m.name,
        version: m.version,
        primary: m.primary.into(),
        primary_selector: selector("primary-selector", m.primary_selector)?,
        owns: m.owns.into_iter().map(Into::into).collect(),
        watches,
        finalizer: m.finalizer,
        resync: match m.resync_seconds {
            None => Some(DEFAULT_RESYNC),
            Some(0) => None,
            Some(s) => Some(Duration::from_secs(s.into())),
        },
        max_concurrency: m.max_concurrency,
        limits: RequestedLimits { deadline: m.limits.deadline_ms.map(|ms| Duration::from_millis(ms.into())), memory_bytes: m.limits.memory_bytes },
        permissions,
    })
}

fn verb(v: WitVerb) -> Verb {
    match v {
        WitVerb::Get => Verb::Get,
        WitVerb::List => Verb::List,
        WitVerb::Watch => Verb::Watch,
        WitVerb::Create => Verb::Create,
        WitVerb::Update => Verb::Update,
        WitVerb::Patch => Verb::Patch,
        WitVerb::Delete => Verb::Delete,
    }
}
