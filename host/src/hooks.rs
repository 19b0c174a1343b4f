//! The admission and conversion hooks a plugin declares (contract 0.1.6, `webhooks.declare`):
//! their kinds, operations, failure policy, timeout, side effects and match conditions, and the
//! rules a declaration follows. The manifest holds them; `webhook` serves them.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::resource::Gvk;

/// Admission hooks a plugin may declare.
pub const MAX_ADMISSION_HOOKS: usize = 32;
/// Conversion hooks a plugin may declare (one per custom resource).
pub const MAX_CONVERSION_HOOKS: usize = 16;
/// Kinds one admission hook may admit.
pub const MAX_HOOK_KINDS: usize = 100;
/// A hook's name: a DNS label.
pub const MAX_HOOK_NAME: usize = 63;
/// Kubernetes' bounds: match conditions per hook, a condition's name and its expression, the
/// timeout in seconds.
pub const MAX_MATCH_CONDITIONS: usize = 64;
pub const MAX_CONDITION_NAME: usize = 316;
pub const MAX_EXPRESSION: usize = 4096;
pub const MAX_TIMEOUT_SECONDS: u32 = 30;
/// What a denial's message and each warning may hold, and how many warnings one answer has.
pub const MAX_DENIAL_MESSAGE: usize = 4096;
pub const MAX_WARNING: usize = 512;
pub const MAX_WARNINGS: usize = 32;

/// The hooks of one plugin; empty for a plugin without the `webhooks` export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    pub admission: Vec<AdmissionHook>,
    /// Custom resources the plugin converts between versions of (their version is ignored).
    pub conversion: Vec<Gvk>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionHook {
    pub name: String,
    /// Called through `mutate` (else `validate`).
    pub mutating: bool,
    pub kinds: Vec<Gvk>,
    pub operations: Vec<Operation>,
    pub failure_policy: FailurePolicy,
    /// What the API server waits; the host answers before it.
    pub timeout: Duration,
    pub side_effects: SideEffects,
    pub match_conditions: Vec<MatchCondition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// As admission requests and webhook rules spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    pub fn parse(text: &str) -> Option<Operation> {
        [Operation::Create, Operation::Update, Operation::Delete, Operation::Connect].into_iter().find(|o| o.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

impl FailurePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideEffects {
    None,
    NoneOnDryRun,
}

impl SideEffects {
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffects::None => "None",
            SideEffects::NoneOnDryRun => "NoneOnDryRun",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchCondition {
    pub name: String,
    pub expression: String,
}

/// Objects one `convert` call is handed at most, and their bytes together; what its converted
/// objects may come to together.
pub const MAX_CONVERT_OBJECTS: usize = 256;
pub const MAX_CONVERT_BYTES: usize = 8 << 20;
pub const MAX_CONVERTED_BYTES: usize = 16 << 20;

/// One admission request as a plugin's hook is handed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub hook: String,
    pub uid: String,
    pub kind: Gvk,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: String,
    pub operation: Operation,
    pub user: User,
    pub object: Option<String>,
    pub old_object: Option<String>,
    pub dry_run: bool,
}

/// Who asked for a change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed; a mutating hook's object as it should be stored, if it changed it.
    Allowed {
        object: Option<String>,
        warnings: Vec<String>,
    },
    Denied {
        code: u16,
        message: String,
        warnings: Vec<String>,
    },
}

impl Verdict {
    /// What breaks the bounds of an answer: a denial's code and message, the warnings.
    pub fn problem(&self) -> Option<String> {
        let warnings = match self {
            Verdict::Allowed { warnings, .. } => warnings,
            Verdict::Denied { code, message, warnings } => {
                if !(400..=599).contains(code) {
                    return Some(format!("a denial with HTTP status {code}; 400 to 599"));
                }
                if message.len() > MAX_DENIAL_MESSAGE {
                    return Some(format!("a denial message of {} bytes; at most {MAX_DENIAL_MESSAGE}", message.len()));
                }
                warnings
            }
        };
        if warnings.len() > MAX_WARNINGS {
            return Some(format!("{} warnings; at most {MAX_WARNINGS}", warnings.len()));
        }
        warnings.iter().find(|w| w.len() > MAX_WARNING).map(|w| format!("a warning of {} bytes; at most {MAX_WARNING}", w.len()))
    }
}

/// A declaration field that is not acceptable (the manifest names it `webhooks.<field>`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {problem}")]
pub struct HookError {
    pub field: String,
    pub problem: String,
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> HookError {
    HookError { field: field.into(), problem: problem.into() }
}

fn count(field: &str, len: usize, min: usize, max: usize) -> Result<(), HookError> {
    if len < min || len > max {
        return Err(invalid(field, format!("{len} entries; {min} to {max}")));
    }
    Ok(())
}

impl Hooks {
    pub fn is_empty(&self) -> bool {
        self.admission.is_empty() && self.conversion.is_empty()
    }

    pub fn admission(&self, name: &str) -> Option<&AdmissionHook> {
        self.admission.iter().find(|h| h.name == name)
    }

    /// Whether the plugin converts `group`/`kind`.
    pub fn converts(&self, group: &str, kind: &str) -> bool {
        self.conversion.iter().any(|g| g.group == group && g.kind == kind)
    }

    /// Checks every hook, returning the first problem found. Kinds are checked against what the
    /// API server serves when the configurations are written, not here.
    pub fn validate(&self) -> Result<(), HookError> {
        count("admission", self.admission.len(), 0, MAX_ADMISSION_HOOKS)?;
        count("conversion", self.conversion.len(), 0, MAX_CONVERSION_HOOKS)?;
        let mut names = BTreeSet::new();
        for (i, hook) in self.admission.iter().enumerate() {
            let field = |name: &str| format!("admission[{i}].{name}");
            if !crate::resource::is_dns_label(&hook.name) {
                return Err(invalid(
                    field("name"),
                    format!("{:?} must be a DNS label: lower-case letters, digits and '-', 1 to {MAX_HOOK_NAME} bytes", hook.name),
                ));
            }
            if !names.insert(hook.name.as_str()) {
                return Err(invalid(field("name"), format!("{:?} is declared twice", hook.name)));
            }
            count(&field("kinds"), hook.kinds.len(), 1, MAX_HOOK_KINDS)?;
            count(&field("operations"), hook.operations.len(), 1, 4)?;
            if hook.operations.iter().collect::<BTreeSet<_>>().len() != hook.operations.len() {
                return Err(invalid(field("operations"), "an operation is listed twice"));
            }
            let seconds = hook.timeout.as_secs();
            if !(1..=u64::from(MAX_TIMEOUT_SECONDS)).contains(&seconds) {
                return Err(invalid(field("timeout-seconds"), format!("{seconds}; 1 to {MAX_TIMEOUT_SECONDS}")));
            }
            count(&field("match-conditions"), hook.match_conditions.len(), 0, MAX_MATCH_CONDITIONS)?;
            let mut conditions = BTreeSet::new();
            for (j, condition) in hook.match_conditions.iter().enumerate() {
                if condition.name.is_empty() || condition.name.len() > MAX_CONDITION_NAME || !conditions.insert(condition.name.as_str()) {
                    return Err(invalid(
                        field(&format!("match-conditions[{j}].name")),
                        format!("{:?}: 1 to {MAX_CONDITION_NAME} bytes, unique in the hook", condition.name),
                    ));
                }
                if condition.expression.is_empty() || condition.expression.len() > MAX_EXPRESSION {
                    return Err(invalid(field(&format!("match-conditions[{j}].expression")), format!("1 to {MAX_EXPRESSION} bytes")));
                }
            }
        }
        let mut converted = BTreeSet::new();
        for (i, resource) in self.conversion.iter().enumerate() {
            if resource.group.is_empty() {
                return Err(invalid(format!("conversion[{i}].resource.group"), "only custom resources convert through a webhook: name their group"));
            }
            if !converted.insert((&resource.group, &resource.kind)) {
                return Err(invalid(format!("conversion[{i}].resource"), format!("{}/{} is declared twice", resource.group, resource.kind)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(name: &str) -> AdmissionHook {
        AdmissionHook {
            name: name.into(),
            mutating: false,
            kinds: vec![Gvk::new("batch.tutorial.kubebuilder.io", "v1", "CronJob")],
            operations: vec![Operation::Create, Operation::Update],
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            side_effects: SideEffects::None,
            match_conditions: vec![],
        }
    }

    fn problem(hooks: Hooks) -> String {
        let e = hooks.validate().unwrap_err();
        format!("{}: {}", e.field, e.problem)
    }

    #[test]
    fn a_tutorial_declaration_is_valid() {
        let hooks = Hooks {
            admission: vec![hook("validate"), AdmissionHook { mutating: true, ..hook("default") }],
            conversion: vec![Gvk::new("batch.tutorial.kubebuilder.io", "", "CronJob")],
        };
        hooks.validate().unwrap();
        assert!(hooks.converts("batch.tutorial.kubebuilder.io", "CronJob"));
        assert!(hooks.admission("default").unwrap().mutating);
    }

    #[test]
    fn each_rule_names_its_field() {
        assert_eq!(
            problem(Hooks { admission: vec![hook("Bad_Name")], ..Hooks::default() }),
            "admission[0].name: \"Bad_Name\" must be a DNS label: lower-case letters, digits and '-', 1 to 63 bytes"
        );
        assert_eq!(problem(Hooks { admission: vec![hook("a"), hook("a")], ..Hooks::default() }), "admission[1].name: \"a\" is declared twice");
        assert_eq!(
            problem(Hooks { admission: vec![AdmissionHook { kinds: vec![], ..hook("a") }], ..Hooks::default() }),
            "admission[0].kinds: 0 entries; 1 to 100"
        );
        assert_eq!(
            problem(Hooks { admission: vec![AdmissionHook { operations: vec![Operation::Create, Operation::Create], ..hook("a") }], ..Hooks::default() }),
            "admission[0].operations: an operation is listed twice"
        );
        assert_eq!(
            problem(Hooks { admission: vec![AdmissionHook { timeout: Duration::from_secs(31), ..hook("a") }], ..Hooks::default() }),
            "admission[0].timeout-seconds: 31; 1 to 30"
        );
        assert_eq!(
            problem(Hooks { admission: vec![AdmissionHook { timeout: Duration::ZERO, ..hook("a") }], ..Hooks::default() }),
            "admission[0].timeout-seconds: 0; 1 to 30"
        );
        let condition = MatchCondition { name: "c".into(), expression: "x".repeat(MAX_EXPRESSION + 1) };
        assert_eq!(
            problem(Hooks { admission: vec![AdmissionHook { match_conditions: vec![condition], ..hook("a") }], ..Hooks::default() }),
            "admission[0].match-conditions[0].expression: 1 to 4096 bytes"
        );
        assert_eq!(
            problem(Hooks { conversion: vec![Gvk::new("", "v1", "ConfigMap")], ..Hooks::default() }),
            "conversion[0].resource.group: only custom resources convert through a webhook: name their group"
        );
        assert_eq!(problem(Hooks { admission: (0..33).map(|i| hook(&format!("h{i}"))).collect(), ..Hooks::default() }), "admission: 33 entries; 0 to 32");
    }

    #[test]
    fn operations_spell_as_the_api_server_does() {
        for op in [Operation::Create, Operation::Update, Operation::Delete, Operation::Connect] {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        assert_eq!(Operation::parse("create"), None);
    }
}
