//! The spelling of what a plugin did — its client calls, Events and result — as table-test cases
//! write it, and readable diffs of two spellings. `kubewasm test` compares a case's
//! expectations with a run; a shadow run compares a candidate's calls with the live version's;
//! `kubewasm record` writes a live call down as a case. Whatever leaves the host as text (a
//! recorded case, a shadow diff in the log and the status ConfigMap) is spelled redacted: a
//! Secret's values are emptied, in objects and in patches of every type.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::client::{PatchKind, WriteOp, WriteRequest};
use crate::events::ObjectEvent;
use crate::runtime::{Action, CallError, code_name};

/// Whether `resource` is a core Secret, whose values are never spelled out.
fn is_secret(resource: &crate::resource::Gvk) -> bool {
    resource.group.is_empty() && resource.kind == "Secret"
}

/// Empties the values of a Secret object's `data` and `stringData` (the keys stay).
fn empty_values(object: &mut Value) {
    for field in ["data", "stringData"] {
        if let Some(map) = object.get_mut(field).and_then(Value::as_object_mut) {
            map.values_mut().for_each(|v| *v = json!(""));
        }
    }
}

/// `object` with its values emptied if it is a Secret (by its own `apiVersion` and `kind`).
pub fn redacted_object(mut object: Value) -> Value {
    if object.get("kind").and_then(Value::as_str) == Some("Secret") && object.get("apiVersion").and_then(Value::as_str) == Some("v1") {
        empty_values(&mut object);
    }
    object
}

/// A write as [`call`] spells it, with a Secret's values emptied — judged by the resource
/// written, whatever the body says: the object of an apply, create or update; the body of a
/// merge or strategic patch; the `value` of every JSON-patch operation under `/data` or
/// `/stringData` (a string, or a map whose values are emptied), or on the whole object.
pub fn redacted_call(write: &WriteRequest) -> Value {
    let mut spelled = call(write);
    if !is_secret(&write.resource) {
        return spelled;
    }
    let Some(body) = spelled.as_object_mut().and_then(|c| c.values_mut().next()) else { return spelled };
    match &write.op {
        WriteOp::Patch { patch_type: PatchKind::Json, .. } => {
            for operation in body.get_mut("body").and_then(Value::as_array_mut).into_iter().flatten() {
                let path = operation.get("path").and_then(Value::as_str).unwrap_or_default().to_string();
                let Some(value) = operation.get_mut("value") else { continue };
                if path.is_empty() || path == "/" {
                    empty_values(value);
                } else if ["/data", "/stringData"].iter().any(|field| path == *field || path.starts_with(&format!("{field}/"))) {
                    match value.as_object_mut() {
                        Some(map) => map.values_mut().for_each(|v| *v = json!("")),
                        None => *value = json!(""),
                    }
                }
            }
        }
        WriteOp::Patch { .. } => {
            if let Some(patch) = body.get_mut("body") {
                empty_values(patch);
            }
        }
        WriteOp::Delete { .. } => {}
        _ => empty_values(body),
    }
    spelled
}

/// A recorded write as the case files spell it.
pub fn call(write: &WriteRequest) -> Value {
    let target = || {
        let mut t = json!({"apiVersion": write.resource.api_version(), "kind": write.resource.kind, "name": write.name});
        if let Some(ns) = &write.namespace {
            t["namespace"] = json!(ns);
        }
        t
    };
    match &write.op {
        WriteOp::Apply { object, force, status } => {
            let mut call = json!({ if *status { "applyStatus" } else { "apply" }: object });
            if !force {
                call["force"] = json!(false);
            }
            call
        }
        WriteOp::Create { object, .. } => json!({ "create": object }),
        WriteOp::Update { object, status } => {
            json!({ if *status { "updateStatus" } else { "update" }: object })
        }
        WriteOp::Patch { patch_type, body } => {
            let mut t = target();
            t["type"] = json!(match patch_type {
                PatchKind::Merge => "merge",
                PatchKind::Json => "json",
                PatchKind::Strategic => "strategic",
            });
            t["body"] = body.clone();
            json!({ "patch": t })
        }
        WriteOp::Delete { uid } => {
            let mut t = target();
            if let Some(uid) = uid {
                t["uid"] = json!(uid);
            }
            json!({ "delete": t })
        }
    }
}

/// An Event as the case files spell it.
pub fn event(e: &ObjectEvent) -> Value {
    json!({
        "type": if e.warning { "Warning" } else { "Normal" },
        "reason": e.reason,
        "action": e.action,
        "note": e.note,
        "regarding": format!("{}/{}", e.regarding.kind, e.key),
    })
}

/// A call's result as the case files spell it.
pub fn result(result: &Result<Action, CallError>) -> Value {
    match result {
        Ok(Action::Done) => json!("done"),
        Ok(Action::RequeueAfter(after)) => json!({"requeueAfter": after.as_millis() as u64}),
        Err(CallError::Plugin { code, message }) => {
            json!({"error": code_name(*code), "message": message})
        }
        Err(CallError::Fault(fault)) => json!({"fault": fault.to_string()}),
    }
}

/// A unified diff of `expected` and `actual` as YAML, headed `WHAT differ:`; `None` when equal.
pub fn diff(what: &str, expected: &Value, actual: &Value) -> Option<String> {
    diff_labelled(what, ("expected", expected), ("actual", actual))
}

/// [`diff`] with the two sides named.
pub fn diff_labelled(what: &str, (left_name, left): (&str, &Value), (right_name, right): (&str, &Value)) -> Option<String> {
    if left == right {
        return None;
    }
    let yaml = |v: &Value| serde_saphyr::to_string(v).unwrap_or_else(|_| v.to_string());
    let (left, right) = (yaml(left), yaml(right));
    let diff = similar::TextDiff::from_lines(&left, &right);
    let mut out = format!("{what} differ:\n");
    let _ = write!(out, "{}", diff.unified_diff().context_radius(3).header(left_name, right_name));
    Some(out)
}
