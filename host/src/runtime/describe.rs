//! Turns the manifest a guest returns from `describe` (and, since 0.1.1, the rules of its
//! `access` export; since 0.1.2, the kinds of its `views` export; since 0.1.3, a declarative
//! plugin's composition, with the grants managing its children takes; since 0.1.4, the clusters
//! of its `clusters` export; since 0.1.5, the fields of its `projections` export; since 0.1.6, the
//! hooks of its `webhooks` export) into the host's
//! [`Manifest`], rejecting what cannot be represented (an
//! unknown verb, a list or a string over its bound, with the field named). What the bounds
//! leave to judge (names, formats, counts per rule) is the manifest's validation.

use std::time::Duration;

use super::bindings::access_exports::Rule as WitRule;
use super::bindings::clusters_exports::{ClusterScope as WitScope, Members as WitMembers};
use super::bindings::composite_exports::{ChildSelector as WitChildSelector, Composition as WitComposition, UpdateStrategy as WitUpdateStrategy};
use super::bindings::plugin_exports::{self as wit, Gvk as WitGvk, Mapping as WitMapping, Verb as WitVerb};
use super::bindings::projections_exports::Projection as WitProjection;
use super::bindings::webhooks_exports::{self as wit_hooks, Declaration as WitDeclaration};
use super::boundary::{MAX_ENTRIES, MAX_FIELD_NAME, MAX_GROUP, MAX_KIND, MAX_SELECTOR, MAX_VERSION, too_long};
use crate::hooks::{AdmissionHook, FailurePolicy, Hooks, MatchCondition, Operation, SideEffects};
use crate::manifest::{
    ChildRule, ChildSelector, ClusterScope, Composition, DEFAULT_RESYNC, MAX_PATH_NAMES, MAX_PROJECTED_PATHS, MAX_PROJECTIONS, Manifest, ManifestError,
    Mapping, Members, Permission, Projection, RequestedLimits, UpdateStrategy, Verb, Watch,
};
use crate::projection::Fields;
use crate::resource::Gvk;
use crate::selector::LabelSelector;

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ManifestError {
    ManifestError { field: field.into(), problem: problem.into() }
}

fn selector(field: &str, text: Option<String>) -> Result<Option<LabelSelector>, ManifestError> {
    if let Some(problem) = text.as_ref().and_then(|t| too_long("label selector", t.len(), MAX_SELECTOR)) {
        return Err(invalid(field, problem));
    }
    text.map(|t| t.parse().map_err(|e: crate::selector::SelectorError| invalid(field, e.to_string()))).transpose()
}

/// A gvk within the bounds of its three strings.
fn gvk(field: &str, g: WitGvk) -> Result<Gvk, ManifestError> {
    for (part, len, max) in [("group", g.group.len(), MAX_GROUP), ("version", g.version.len(), MAX_VERSION), ("kind", g.kind.len(), MAX_KIND)] {
        if let Some(problem) = too_long(part, len, max) {
            return Err(invalid(format!("{field}.{part}"), problem));
        }
    }
    Ok(g.into())
}

/// The clusters of `clusters.scope`.
fn clusters(scope: WitScope) -> Result<ClusterScope, ManifestError> {
    let members = |field: &str, m: WitMembers| -> Result<Members, ManifestError> {
        Ok(match m {
            WitMembers::None => Members::None,
            WitMembers::All => Members::All,
            WitMembers::Matching(text) => Members::Matching(selector(field, Some(text))?.expect("given")),
        })
    };
    Ok(ClusterScope { serve_local: scope.serve_local, serve: members("clusters.serve", scope.serve)?, reach: members("clusters.reach", scope.reach)? })
}

/// The projections of `projections.fields`, each path within its bounds.
fn projections(declared: Vec<WitProjection>) -> Result<Vec<Projection>, ManifestError> {
    if declared.len() > MAX_PROJECTIONS {
        return Err(invalid("projections.fields", format!("{} entries; at most {MAX_PROJECTIONS}", declared.len())));
    }
    declared
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let field = format!("projections.fields[{i}]");
            if p.fields.len() > MAX_PROJECTED_PATHS {
                return Err(invalid(format!("{field}.fields"), format!("{} paths; at most {MAX_PROJECTED_PATHS}", p.fields.len())));
            }
            for (j, path) in p.fields.iter().enumerate() {
                let field = format!("{field}.fields[{j}]");
                if path.is_empty() || path.len() > MAX_PATH_NAMES {
                    return Err(invalid(field, format!("{} field names; 1 to {MAX_PATH_NAMES}", path.len())));
                }
                if let Some(name) = path.iter().find(|name| name.is_empty() || name.len() > MAX_FIELD_NAME) {
                    return Err(invalid(field, format!("a field name of {} bytes; 1 to {MAX_FIELD_NAME}", name.len())));
                }
            }
            Ok(Projection { resource: gvk(&field, p.resource)?, fields: Fields::new(&p.fields).into() })
        })
        .collect()
}

/// What a plugin declared: its manifest, and what its later exports add to it.
pub(super) struct Declared {
    pub manifest: wit::Manifest,
    pub rules: Vec<WitRule>,
    pub metadata_only: Vec<WitGvk>,
    pub projections: Vec<WitProjection>,
    pub composition: Option<WitComposition>,
    pub scope: Option<WitScope>,
    pub hooks: Option<WitDeclaration>,
}

pub(super) fn manifest(declared: Declared) -> Result<Manifest, ManifestError> {
    let Declared { manifest: m, rules, metadata_only, projections: projected, composition, scope, hooks } = declared;
    for (field, len) in [
        ("owns", m.owns.len()),
        ("watches", m.watches.len()),
        ("permissions", m.permissions.len()),
        ("access.rules", rules.len()),
        ("views.metadata-only", metadata_only.len()),
        ("composite.children", composition.as_ref().map_or(0, |c| c.children.len())),
    ] {
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
                resource: gvk(&format!("watches[{i}].resource"), w.resource)?,
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
        .enumerate()
        .map(|(i, p)| {
            Ok(Permission {
                resource: gvk(&format!("permissions[{i}].resource"), p.resource)?,
                subresource: p.subresource,
                verbs: p.verbs.into_iter().map(verb).collect(),
                namespaces: p.namespaces.into_iter().collect(),
                names: Default::default(),
            })
        })
        .collect::<Result<_, ManifestError>>()?;
    for (i, rule) in rules.into_iter().enumerate() {
        let verbs = rule.verbs.iter().map(|v| v.parse::<Verb>().map_err(|e| invalid(format!("access.rules[{i}].verbs"), e))).collect::<Result<_, _>>()?;
        permissions.push(Permission {
            resource: gvk(&format!("access.rules[{i}].resource"), rule.resource)?,
            subresource: rule.subresource,
            verbs,
            namespaces: rule.namespaces.into_iter().collect(),
            names: rule.resource_names.into_iter().collect(),
        });
    }
    let composition = composition
        .map(|c| {
            let children = c
                .children
                .into_iter()
                .enumerate()
                .map(|(i, rule)| {
                    Ok(ChildRule {
                        resource: gvk(&format!("composite.children[{i}].resource"), rule.resource)?,
                        update: match rule.update_strategy {
                            WitUpdateStrategy::OnDelete => UpdateStrategy::OnDelete,
                            WitUpdateStrategy::Recreate => UpdateStrategy::Recreate,
                            WitUpdateStrategy::InPlace => UpdateStrategy::InPlace,
                        },
                    })
                })
                .collect::<Result<_, ManifestError>>()?;
            let selector = match c.selector {
                WitChildSelector::Generated => ChildSelector::Generated,
                WitChildSelector::ParentSpecSelector => ChildSelector::ParentSpec,
            };
            Ok::<_, ManifestError>(Composition { children, selector })
        })
        .transpose()?;
    let mut manifest = Manifest {
        name: m.name,
        version: m.version,
        primary: gvk("primary", m.primary)?,
        primary_selector: selector("primary-selector", m.primary_selector)?,
        owns: m.owns.into_iter().enumerate().map(|(i, g)| gvk(&format!("owns[{i}]"), g)).collect::<Result<_, _>>()?,
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
        metadata_only: metadata_only.into_iter().enumerate().map(|(i, g)| gvk(&format!("views.metadata-only[{i}]"), g)).collect::<Result<_, _>>()?,
        projections: projections(projected)?,
        composition: None,
        clusters: scope.map(clusters).transpose()?.unwrap_or_default(),
        hooks: hooks.map(webhooks).transpose()?.unwrap_or_default(),
    };
    if let Some(composition) = composition {
        let grants = composition.grants(&manifest);
        manifest.permissions.extend(grants);
        manifest.composition = Some(composition);
    }
    Ok(manifest)
}

/// The hooks of `webhooks.declare`; the kinds within their bounds (the rest is the manifest's
/// validation).
fn webhooks(declared: WitDeclaration) -> Result<Hooks, ManifestError> {
    let admission = declared
        .admission
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            Ok(AdmissionHook {
                kinds: h.kinds.into_iter().enumerate().map(|(j, g)| gvk(&format!("webhooks.admission[{i}].kinds[{j}]"), g)).collect::<Result<_, _>>()?,
                name: h.name,
                mutating: h.mutating,
                operations: h.operations.into_iter().map(Operation::from).collect(),
                failure_policy: match h.failure_policy {
                    wit_hooks::FailurePolicy::Fail => FailurePolicy::Fail,
                    wit_hooks::FailurePolicy::Ignore => FailurePolicy::Ignore,
                },
                timeout: Duration::from_secs(h.timeout_seconds.into()),
                side_effects: match h.side_effects {
                    wit_hooks::SideEffects::None => SideEffects::None,
                    wit_hooks::SideEffects::NoneOnDryRun => SideEffects::NoneOnDryRun,
                },
                match_conditions: h.match_conditions.into_iter().map(|c| MatchCondition { name: c.name, expression: c.expression }).collect(),
            })
        })
        .collect::<Result<_, ManifestError>>()?;
    let conversion =
        declared.conversion.into_iter().enumerate().map(|(i, c)| gvk(&format!("webhooks.conversion[{i}].resource"), c.resource)).collect::<Result<_, _>>()?;
    Ok(Hooks { admission, conversion })
}

impl From<wit_hooks::Operation> for Operation {
    fn from(o: wit_hooks::Operation) -> Operation {
        match o {
            wit_hooks::Operation::Create => Operation::Create,
            wit_hooks::Operation::Update => Operation::Update,
            wit_hooks::Operation::Delete => Operation::Delete,
            wit_hooks::Operation::Connect => Operation::Connect,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn projection(fields: Vec<Vec<String>>) -> WitProjection {
        WitProjection { resource: WitGvk { group: "apps".into(), version: "v1".into(), kind: "Deployment".into() }, fields }
    }

    fn path(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn projections_past_their_bounds_name_the_field() {
        let ok = projections(vec![projection(vec![path(&["status", "availableReplicas"]), path(&["spec"])])]).unwrap();
        assert_eq!(ok[0].fields.paths(), vec![vec!["spec"], vec!["status", "availableReplicas"]]);
        for (declared, field, problem) in [
            (vec![projection(vec![]); MAX_PROJECTIONS + 1], "projections.fields", "101 entries; at most 100"),
            (vec![projection(vec![path(&["a"]); MAX_PROJECTED_PATHS + 1])], "projections.fields[0].fields", "65 paths; at most 64"),
            (vec![projection(vec![]), projection(vec![path(&[])])], "projections.fields[1].fields[0]", "0 field names; 1 to 8"),
            (vec![projection(vec![path(&["a"; 9])])], "projections.fields[0].fields[0]", "9 field names; 1 to 8"),
            (vec![projection(vec![path(&["spec", ""])])], "projections.fields[0].fields[0]", "a field name of 0 bytes; 1 to 253"),
            (vec![projection(vec![vec!["x".repeat(254)]])], "projections.fields[0].fields[0]", "a field name of 254 bytes; 1 to 253"),
        ] {
            let err = projections(declared).unwrap_err();
            assert_eq!((err.field.as_str(), err.problem.as_str()), (field, problem));
        }
    }
}
