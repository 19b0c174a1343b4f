//! The API server's side of a hook call: an `AdmissionReview` or a `ConversionReview` (v1) in,
//! the answer out. Reads a review into what a plugin is handed, turns a plugin's answer into the
//! review's response — a mutation into the JSON patch from the request's object, a fault into
//! the hook's failure policy — and judges what a plugin answered against the rules the API server
//! would apply anyway, so that a plugin's mistake is reported as the plugin's.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::hooks::{FailurePolicy, MAX_CONVERT_BYTES, MAX_CONVERT_OBJECTS, Operation, Review, User, Verdict};
use crate::resource::Gvk;

/// What may be in an admission request: an object and its old self, each at most 3 MiB as the
/// API server stores them, with room for the rest of the review.
pub const MAX_ADMISSION_BODY: usize = 8 << 20;
/// A conversion request: the objects of a list the API server converts at once.
pub const MAX_CONVERSION_BODY: usize = 64 << 20;
/// What of a fault's text goes into an answer the user sees.
const MAX_FAULT_TEXT: usize = 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    #[error("the body is not an AdmissionReview v1: {0}")]
    Admission(String),
    #[error("the body is not a ConversionReview v1: {0}")]
    Conversion(String),
    #[error("the request has no `request`")]
    NoRequest,
    #[error("unknown operation {0:?}")]
    Operation(String),
}

#[derive(Deserialize)]
struct AdmissionReview<'a> {
    #[serde(borrow)]
    request: Option<AdmissionRequest<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionRequest<'a> {
    uid: String,
    kind: GroupVersionKind,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    operation: String,
    #[serde(default)]
    user_info: UserInfo,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize)]
struct GroupVersionKind {
    #[serde(default)]
    group: String,
    version: String,
    kind: String,
}

#[derive(Deserialize, Default)]
struct UserInfo {
    #[serde(default)]
    username: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    groups: Vec<String>,
}

/// An object as the review carries it: absent, JSON `null` or an object.
fn object(raw: Option<&RawValue>) -> Option<String> {
    raw.map(RawValue::get).filter(|text| *text != "null").map(str::to_owned)
}

/// Reads an admission review for `hook`.
pub fn admission(body: &[u8], hook: &str) -> Result<Review, ReviewError> {
    let review: AdmissionReview = serde_json::from_slice(body).map_err(|e| ReviewError::Admission(e.to_string()))?;
    let r = review.request.ok_or(ReviewError::NoRequest)?;
    Ok(Review {
        hook: hook.to_owned(),
        operation: Operation::parse(&r.operation).ok_or(ReviewError::Operation(r.operation))?,
        uid: r.uid,
        kind: Gvk::new(&r.kind.group, &r.kind.version, &r.kind.kind),
        subresource: r.sub_resource.filter(|s| !s.is_empty()),
        namespace: r.namespace.filter(|s| !s.is_empty()),
        name: r.name.unwrap_or_default(),
        user: User { username: r.user_info.username, uid: r.user_info.uid, groups: r.user_info.groups },
        object: object(r.object),
        old_object: object(r.old_object),
        dry_run: r.dry_run.unwrap_or(false),
    })
}

/// The uid of a review that could not be read, if it has one: the API server matches answers
/// by it.
pub fn uid_of(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Uid {
        request: Option<UidOnly>,
    }
    #[derive(Deserialize)]
    struct UidOnly {
        uid: String,
    }
    serde_json::from_slice::<Uid>(body).ok().and_then(|u| u.request).map(|r| r.uid).unwrap_or_default()
}

/// How a plugin's answer to a mutating hook breaks the rules.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Misanswer {
    #[error("its object does not parse: {0}")]
    Unparsable(String),
    #[error("it changed the object's {0}")]
    Changed(&'static str),
    #[error("it returned {got} objects for {asked}")]
    Count { got: usize, asked: usize },
    #[error("object {index} has apiVersion {got:?}, not {want:?}")]
    ApiVersion { index: usize, got: String, want: String },
    #[error("object {index} changed its {what}: only labels and annotations of the metadata may change")]
    Metadata { index: usize, what: String },
}

/// The API server's answer to an admission review: allowed, with warnings and for a mutation
/// the patch from the request's object to the plugin's; or refused.
pub fn admission_answer(uid: &str, review: &Review, verdict: Verdict) -> Result<Value, Misanswer> {
    let response = match verdict {
        Verdict::Allowed { object: Some(changed), warnings } => {
            let before: Value =
                review.object.as_deref().map(serde_json::from_str).transpose().map_err(|e| Misanswer::Unparsable(e.to_string()))?.unwrap_or(Value::Null);
            let after: Value = serde_json::from_str(&changed).map_err(|e| Misanswer::Unparsable(e.to_string()))?;
            for (what, pointer) in [("apiVersion", "/apiVersion"), ("kind", "/kind"), ("namespace", "/metadata/namespace")] {
                if before.pointer(pointer) != after.pointer(pointer) {
                    return Err(Misanswer::Changed(what));
                }
            }
            // A create whose name the API server generates has none yet.
            if !review.name.is_empty() && before.pointer("/metadata/name") != after.pointer("/metadata/name") {
                return Err(Misanswer::Changed("name"));
            }
            let patch = json_patch::diff(&before, &after);
            let mut response = json!({ "uid": uid, "allowed": true, "warnings": warnings });
            if !patch.0.is_empty() {
                let text = serde_json::to_vec(&patch).expect("a patch serializes");
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(text));
            }
            response
        }
        Verdict::Allowed { object: None, warnings } => json!({ "uid": uid, "allowed": true, "warnings": warnings }),
        Verdict::Denied { code, message, warnings } => {
            json!({ "uid": uid, "allowed": false, "warnings": warnings, "status": { "code": code, "message": message, "reason": reason(code) } })
        }
    };
    Ok(wrap_admission(response))
}

/// The `reason` of a denial's status, as the API server would name its code.
fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

/// The answer when the plugin could not give one (a fault, a misanswer, a deadline): the hook's
/// failure policy, with a message naming the plugin, the hook and what went wrong.
pub fn failed(uid: &str, plugin: &str, hook: &str, policy: FailurePolicy, what: &str) -> Value {
    let what = crate::excerpt::excerpt(what, MAX_FAULT_TEXT);
    wrap_admission(match policy {
        FailurePolicy::Fail => json!({
            "uid": uid,
            "allowed": false,
            "status": { "code": 500, "reason": "InternalError", "message": format!("kubewasm: hook {hook:?} of plugin {plugin:?} failed: {what} (failure policy Fail)") },
        }),
        FailurePolicy::Ignore => json!({
            "uid": uid,
            "allowed": true,
            "warnings": [format!("kubewasm: hook {hook:?} of plugin {plugin:?} failed ({what}); allowed by its failure policy Ignore")],
        }),
    })
}

/// The answer for a plugin this host no longer serves: allowed, with a warning — its
/// configuration is on its way out, and a `Fail` policy must not block the cluster on a plugin
/// that is gone.
pub fn gone(uid: &str, plugin: &str) -> Value {
    wrap_admission(json!({ "uid": uid, "allowed": true, "warnings": [format!("kubewasm serves no plugin {plugin:?} (removed): allowed unchecked")] }))
}

fn wrap_admission(response: Value) -> Value {
    json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response })
}

#[derive(Deserialize)]
struct ConversionReview<'a> {
    #[serde(borrow)]
    request: Option<ConversionRequest<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConversionRequest<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow, default)]
    objects: Vec<&'a RawValue>,
}

/// A conversion request: its uid, the `group/version` wanted, and the objects.
#[derive(Debug)]
pub struct Conversion {
    pub uid: String,
    pub desired: String,
    pub objects: Vec<String>,
}

pub fn conversion(body: &[u8]) -> Result<Conversion, ReviewError> {
    let review: ConversionReview = serde_json::from_slice(body).map_err(|e| ReviewError::Conversion(e.to_string()))?;
    let r = review.request.ok_or(ReviewError::NoRequest)?;
    Ok(Conversion { uid: r.uid, desired: r.desired_api_version, objects: r.objects.into_iter().map(|o| o.get().to_owned()).collect() })
}

/// The group and kind of an object's text.
pub fn group_kind(object: &str) -> Option<(String, String)> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct TypeMeta {
        api_version: String,
        kind: String,
    }
    let meta: TypeMeta = serde_json::from_str(object).ok()?;
    let group = meta.api_version.rsplit_once('/').map(|(group, _)| group.to_owned()).unwrap_or_default();
    Some((group, meta.kind))
}

impl Conversion {
    /// The objects in the batches one `convert` call takes: at most [`MAX_CONVERT_OBJECTS`] and
    /// [`MAX_CONVERT_BYTES`] each (an object alone may be larger: it goes alone).
    pub fn batches(&mut self) -> Vec<Vec<String>> {
        let mut batches = Vec::new();
        let mut batch: Vec<String> = Vec::new();
        let mut bytes = 0;
        for object in std::mem::take(&mut self.objects) {
            if !batch.is_empty() && (batch.len() == MAX_CONVERT_OBJECTS || bytes + object.len() > MAX_CONVERT_BYTES) {
                batches.push(std::mem::take(&mut batch));
                bytes = 0;
            }
            bytes += object.len();
            batch.push(object);
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
        batches
    }
}

/// Judges converted objects against the objects asked for: as many, each in `desired`, of the
/// same kind, its metadata the same but for labels and annotations (the API server's rule).
pub fn check_converted(asked: &[String], converted: &[String], desired: &str, first_index: usize) -> Result<(), Misanswer> {
    if asked.len() != converted.len() {
        return Err(Misanswer::Count { got: converted.len(), asked: asked.len() });
    }
    for (i, (before, after)) in asked.iter().zip(converted).enumerate() {
        let index = first_index + i;
        let before: Value = serde_json::from_str(before).map_err(|e| Misanswer::Unparsable(e.to_string()))?;
        let after: Value = serde_json::from_str(after).map_err(|e| Misanswer::Unparsable(format!("object {index}: {e}")))?;
        let version = after["apiVersion"].as_str().unwrap_or_default();
        if version != desired {
            return Err(Misanswer::ApiVersion { index, got: version.to_owned(), want: desired.to_owned() });
        }
        if before["kind"] != after["kind"] {
            return Err(Misanswer::Metadata { index, what: "kind".into() });
        }
        let meta = |v: &Value| {
            let mut meta = v["metadata"].as_object().cloned().unwrap_or_default();
            meta.remove("labels");
            meta.remove("annotations");
            meta
        };
        let (was, is) = (meta(&before), meta(&after));
        if let Some(field) = was.keys().chain(is.keys()).find(|k| was.get(*k) != is.get(*k)) {
            return Err(Misanswer::Metadata { index, what: format!("metadata.{field}") });
        }
    }
    Ok(())
}

pub fn conversion_answer(uid: &str, converted: Result<Vec<String>, String>) -> Value {
    let response = match converted {
        Ok(objects) => {
            // The objects were checked to parse: pass their text through untouched.
            let objects: Vec<Box<RawValue>> = objects.into_iter().map(|o| RawValue::from_string(o).expect("checked to parse")).collect();
            json!({ "uid": uid, "convertedObjects": objects, "result": { "status": "Success" } })
        }
        Err(message) => json!({ "uid": uid, "convertedObjects": [], "result": { "status": "Failure", "message": message } }),
    };
    json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREATE: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
        "uid":"u-1","kind":{"group":"batch.tutorial.kubebuilder.io","version":"v1","kind":"CronJob"},
        "resource":{"group":"batch.tutorial.kubebuilder.io","version":"v1","resource":"cronjobs"},
        "name":"nightly","namespace":"ns","operation":"CREATE",
        "userInfo":{"username":"alice","uid":"a-1","groups":["devs"]},
        "object":{"apiVersion":"batch.tutorial.kubebuilder.io/v1","kind":"CronJob","metadata":{"name":"nightly","namespace":"ns"},"spec":{"schedule":"0 0 * * *"}},
        "oldObject":null,"dryRun":true}}"#;

    #[test]
    fn an_admission_review_is_read_as_the_plugin_is_handed_it() {
        let review = admission(CREATE.as_bytes(), "default").unwrap();
        assert_eq!((review.uid.as_str(), review.hook.as_str(), review.operation), ("u-1", "default", Operation::Create));
        assert_eq!(review.kind, Gvk::new("batch.tutorial.kubebuilder.io", "v1", "CronJob"));
        assert_eq!((review.namespace.as_deref(), review.name.as_str(), review.dry_run), (Some("ns"), "nightly", true));
        assert_eq!(review.user, User { username: "alice".into(), uid: "a-1".into(), groups: vec!["devs".into()] });
        assert!(review.object.unwrap().contains(r#""schedule":"0 0 * * *""#));
        assert_eq!(review.old_object, None);
        assert!(matches!(admission(b"{}", "h"), Err(ReviewError::NoRequest)));
        assert!(matches!(admission(b"[", "h"), Err(ReviewError::Admission(_))));
        assert_eq!(uid_of(CREATE.as_bytes()), "u-1");
    }

    #[test]
    fn a_mutation_is_answered_with_the_patch_to_it() {
        let review = admission(CREATE.as_bytes(), "default").unwrap();
        let mut changed: Value = serde_json::from_str(review.object.as_deref().unwrap()).unwrap();
        changed["spec"]["concurrencyPolicy"] = json!("Allow");
        let answer = admission_answer("u-1", &review, Verdict::Allowed { object: Some(changed.to_string()), warnings: vec!["defaulted".into()] }).unwrap();
        let response = &answer["response"];
        assert_eq!((response["uid"].as_str(), response["allowed"].as_bool(), response["patchType"].as_str()), (Some("u-1"), Some(true), Some("JSONPatch")));
        let patch: Value = serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(response["patch"].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(patch, json!([{ "op": "add", "path": "/spec/concurrencyPolicy", "value": "Allow" }]));
        assert_eq!(response["warnings"], json!(["defaulted"]));

        changed["metadata"]["namespace"] = json!("elsewhere");
        assert_eq!(
            admission_answer("u-1", &review, Verdict::Allowed { object: Some(changed.to_string()), warnings: vec![] }),
            Err(Misanswer::Changed("namespace"))
        );
        let unchanged = admission_answer("u-1", &review, Verdict::Allowed { object: review.object.clone(), warnings: vec![] }).unwrap();
        assert_eq!(unchanged["response"].get("patch"), None);
    }

    #[test]
    fn a_denial_and_the_failure_policies_answer_as_the_api_server_reads_them() {
        let review = admission(CREATE.as_bytes(), "validate").unwrap();
        let denied = admission_answer("u-1", &review, Verdict::Denied { code: 422, message: "bad schedule".into(), warnings: vec![] }).unwrap();
        assert_eq!(denied["response"]["status"], json!({ "code": 422, "message": "bad schedule", "reason": "Invalid" }));
        assert_eq!(denied["response"]["allowed"], json!(false));
        let closed = failed("u-1", "cron", "validate", FailurePolicy::Fail, "trapped: unreachable");
        assert_eq!(closed["response"]["allowed"], json!(false));
        assert_eq!(
            closed["response"]["status"]["message"],
            json!("kubewasm: hook \"validate\" of plugin \"cron\" failed: trapped: unreachable (failure policy Fail)")
        );
        let open = failed("u-1", "cron", "validate", FailurePolicy::Ignore, &"x".repeat(100_000));
        assert_eq!(open["response"]["allowed"], json!(true));
        assert!(open["response"]["warnings"][0].as_str().unwrap().len() < 2 * MAX_FAULT_TEXT);
        assert_eq!(gone("u-1", "cron")["response"]["allowed"], json!(true));
    }

    fn cron(version: &str, name: &str) -> String {
        json!({ "apiVersion": format!("batch.tutorial.kubebuilder.io/{version}"), "kind": "CronJob", "metadata": { "name": name, "uid": "x", "labels": { "a": "b" } } }).to_string()
    }

    #[test]
    fn converted_objects_are_judged_by_the_api_servers_rules() {
        let body = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {
            "uid": "c-1", "desiredAPIVersion": "batch.tutorial.kubebuilder.io/v2", "objects": [serde_json::from_str::<Value>(&cron("v1", "a")).unwrap()] } });
        let conversion = conversion(body.to_string().as_bytes()).unwrap();
        assert_eq!((conversion.uid.as_str(), conversion.desired.as_str(), conversion.objects.len()), ("c-1", "batch.tutorial.kubebuilder.io/v2", 1));
        let desired = "batch.tutorial.kubebuilder.io/v2";
        let asked = vec![cron("v1", "a")];
        check_converted(&asked, &[cron("v2", "a")], desired, 0).unwrap();
        let relabelled = json!({ "apiVersion": desired, "kind": "CronJob", "metadata": { "name": "a", "uid": "x", "labels": { "c": "d" } } }).to_string();
        check_converted(&asked, &[relabelled], desired, 0).unwrap();
        assert_eq!(check_converted(&asked, &[], desired, 0), Err(Misanswer::Count { got: 0, asked: 1 }));
        assert!(matches!(check_converted(&asked, &[cron("v1", "a")], desired, 3), Err(Misanswer::ApiVersion { index: 3, .. })));
        assert_eq!(check_converted(&asked, &[cron("v2", "b")], desired, 0), Err(Misanswer::Metadata { index: 0, what: "metadata.name".into() }));
        let answer = conversion_answer("c-1", Ok(vec![cron("v2", "a")]));
        assert_eq!(answer["response"]["convertedObjects"][0]["apiVersion"], json!(desired));
        assert_eq!(conversion_answer("c-1", Err("no".into()))["response"]["result"], json!({ "status": "Failure", "message": "no" }));
    }

    #[test]
    fn a_large_conversion_is_split_into_calls_within_their_bounds() {
        let small = "x".repeat(100);
        let mut many = Conversion { uid: String::new(), desired: String::new(), objects: vec![small; 600] };
        assert_eq!(many.batches().iter().map(Vec::len).collect::<Vec<_>>(), [256, 256, 88]);
        let big = "y".repeat(3 << 20);
        let mut large = Conversion { uid: String::new(), desired: String::new(), objects: vec![big; 5] };
        assert_eq!(large.batches().iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    }
}
