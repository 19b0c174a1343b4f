//! The spelling of what a plugin did — its client calls, Events and result — as table-test cases
//! write it, and readable diffs of two spellings. `kubewasm test` compares a case's
//! expectations with a run; a shadow run compares a candidate's calls with the live version's;
//! `kubewasm record` writes a live call down as a case.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::client::{PatchKind, WriteOp, WriteRequest};
use crate::events::ObjectEvent;
use crate::runtime::{Action, CallError, code_name};

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
        WriteOp::Create { object } => json!({ "create": object }),
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
        WriteOp::Delete => json!({ "delete": target() }),
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
