//! Hook calls as the plugin's `webhooks` export spells them: a [`Review`] into the WIT request,
//! the WIT answers into a [`Verdict`], and the bounds every answer keeps.

use super::bindings::webhooks_exports::{AdmissionRequest, Denial, Mutation, Operation as WitOperation, UserInfo};
use super::call::Fault;
use crate::hooks::{MAX_CONVERTED_BYTES, MAX_DENIAL_MESSAGE, Operation, Review, Verdict};
use crate::runtime::boundary::MAX_OBJECT;

pub(super) fn request(review: &Review) -> AdmissionRequest {
    AdmissionRequest {
        hook: review.hook.clone(),
        uid: review.uid.clone(),
        kind: (&review.kind).into(),
        subresource: review.subresource.clone(),
        namespace: review.namespace.clone(),
        name: review.name.clone(),
        operation: match review.operation {
            Operation::Create => WitOperation::Create,
            Operation::Update => WitOperation::Update,
            Operation::Delete => WitOperation::Delete,
            Operation::Connect => WitOperation::Connect,
        },
        user: UserInfo { username: review.user.username.clone(), uid: review.user.uid.clone(), groups: review.user.groups.clone() },
        object: review.object.clone(),
        old_object: review.old_object.clone(),
        dry_run: review.dry_run,
    }
}

fn denied(d: Denial) -> Verdict {
    Verdict::Denied { code: d.code, message: d.message, warnings: d.warnings }
}

/// A validating hook's answer, within its bounds.
pub(super) fn validated(answer: Result<Vec<String>, Denial>) -> Result<Verdict, Fault> {
    checked(match answer {
        Ok(warnings) => Verdict::Allowed { object: None, warnings },
        Err(denial) => denied(denial),
    })
}

/// A mutating hook's answer, within its bounds.
pub(super) fn mutated(answer: Result<Mutation, Denial>) -> Result<Verdict, Fault> {
    let verdict = match answer {
        Ok(Mutation { object, warnings }) => {
            if let Some(object) = object.as_ref().filter(|o| o.len() > MAX_OBJECT) {
                return Err(Fault::Oversized(format!("mutate returned an object of {} bytes; at most {MAX_OBJECT}", object.len())));
            }
            Verdict::Allowed { object, warnings }
        }
        Err(denial) => denied(denial),
    };
    checked(verdict)
}

fn checked(verdict: Verdict) -> Result<Verdict, Fault> {
    match verdict.problem() {
        Some(problem) => Err(Fault::Oversized(problem)),
        None => Ok(verdict),
    }
}

/// A conversion's answer within its bounds: objects of at most 3 MiB each and
/// [`MAX_CONVERTED_BYTES`] together, or a message of at most [`MAX_DENIAL_MESSAGE`]. (Whether
/// they are the objects asked for is the webhook's to judge.)
pub(super) fn converted(answer: Result<Vec<String>, String>) -> Result<Result<Vec<String>, String>, Fault> {
    match &answer {
        Ok(objects) => {
            if let Some(object) = objects.iter().find(|o| o.len() > MAX_OBJECT) {
                return Err(Fault::Oversized(format!("convert returned an object of {} bytes; at most {MAX_OBJECT}", object.len())));
            }
            let total: usize = objects.iter().map(String::len).sum();
            if total > MAX_CONVERTED_BYTES {
                return Err(Fault::Oversized(format!("convert returned {total} bytes; at most {MAX_CONVERTED_BYTES}")));
            }
        }
        Err(message) if message.len() > MAX_DENIAL_MESSAGE => {
            return Err(Fault::Oversized(format!("a conversion error of {} bytes; at most {MAX_DENIAL_MESSAGE}", message.len())));
        }
        Err(_) => {}
    }
    Ok(answer)
}
