//! The API server's audit log (`DATA_DIR/audit.log`, JSON lines): every request that changed
//! something — who made it, as whom (impersonation), with which user agent, on what, with what
//! answer, and when. Tests read it to prove who wrote what, and when.

use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

/// One audited request.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub verb: String,
    pub user: User,
    #[serde(default)]
    pub impersonated_user: Option<User>,
    #[serde(default)]
    pub user_agent: String,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    pub request_received_timestamp: Timestamp,
    pub stage_timestamp: Timestamp,
    pub stage: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub username: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub api_group: Option<String>,
    #[serde(default)]
    pub subresource: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: u16,
}

impl AuditEvent {
    /// Whether the API server accepted it (a 2xx answer).
    pub fn accepted(&self) -> bool {
        self.response_status.as_ref().is_some_and(|s| (200..300).contains(&s.code))
    }

    /// Who the request was authorized as: the impersonated user if any, else the caller.
    pub fn acting_as(&self) -> &str {
        self.impersonated_user.as_ref().unwrap_or(&self.user).username.as_str()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object_ref.as_ref()?.namespace.as_deref()
    }

    pub fn resource(&self) -> &str {
        self.object_ref.as_ref().map_or("", |o| o.resource.as_str())
    }
}

/// Every completed request in the audit log of the control plane whose data directory is
/// `data_dir` (the rotated file first, if any).
pub fn read(data_dir: &Path) -> Vec<AuditEvent> {
    let mut events = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(data_dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("audit") && n.to_string_lossy().contains(".log")))
        .collect();
    // Rotated files (audit-TIMESTAMP.log) before the live one.
    files.sort_by_key(|p| p.file_name().is_some_and(|n| n == "audit.log"));
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        events.extend(text.lines().filter_map(|line| serde_json::from_str::<AuditEvent>(line).ok()).filter(|e| e.stage == "ResponseComplete"));
    }
    events
}
