//! The kubebuilder book's CronJob controller ("Tutorial: Building CronJob") as a kubewasm
//! plugin, in Rust: the same behaviour and table cases as the Go port beside it (`../go`), with
//! k8s-openapi's `Job` and the `croner` crate for the schedule. What it does, step by step, is in
//! `../README.md`; the step numbers below are the tutorial's.

use std::str::FromStr;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};
use croner::Cron;
use kubewasm_sdk::LogLevel;
use kubewasm_sdk::k8s_openapi::api::batch::v1::{Job, JobTemplateSpec};
use kubewasm_sdk::prelude::*;
use kubewasm_sdk::serde_json::{self, Value, json};

fn cronjob_kind() -> Gvk {
    Gvk::new("batch.tutorial.kubebuilder.io", "v1", "CronJob")
}

/// Records on each Job the run it was started for: what the controller reads back to know the
/// last run, since it never trusts its own status.
const SCHEDULED_TIME_ANNOTATION: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

/// How many missed runs are counted before giving up (the tutorial's 100).
const MAX_MISSED_STARTS: usize = 100;

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CronJobSpec {
    schedule: String,
    starting_deadline_seconds: Option<i64>,
    concurrency_policy: Option<String>,
    suspend: Option<bool>,
    job_template: JobTemplateSpec,
    successful_jobs_history_limit: Option<i32>,
    failed_jobs_history_limit: Option<i32>,
}

struct CronJobController;

impl Controller for CronJobController {
    type Primary = DynamicObject;
    type Settings = ();

    fn new(_: ()) -> std::result::Result<Self, String> {
        Ok(CronJobController)
    }

    fn manifest(&self) -> Manifest {
        Manifest::new("cronjob", "0.1.0").primary_gvk(&cronjob_kind()).owns::<Job>().permission::<Job>(&[Verb::Create, Verb::Delete]).grant(
            &cronjob_kind(),
            Some("status"),
            &[Verb::Update],
            &[],
        )
    }

    fn reconcile(&self, mut cronjob: DynamicObject, ctx: &Context) -> Result<Action> {
        let now: DateTime<Utc> = SystemTime::now().into();
        let spec: CronJobSpec = cronjob.parse_field("spec")?.unwrap_or_default();

        // 2: the child Jobs, active, successful and failed; the most recent scheduled run.
        let uid = cronjob.uid().unwrap_or_default().to_owned();
        let (mut active, mut successful, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        let mut most_recent: Option<DateTime<Utc>> = None;
        for job in ctx.list_controlled::<Job>(cronjob.namespace(), &uid)? {
            match scheduled_time(&job) {
                Ok(Some(at)) => most_recent = Some(most_recent.map_or(at, |t| t.max(at))),
                Ok(None) => {}
                Err(e) => ctx.log(LogLevel::Error, "unable to parse schedule time for child job", &[("job", job.name()), ("error", &e.to_string())]),
            }
            match finished_type(&job) {
                None => active.push(job),
                Some("Failed") => failed.push(job),
                Some(_) => successful.push(job),
            }
        }

        // Where the schedule stands decides the condition the status reports.
        let suspended = spec.suspend == Some(true);
        let schedule = if suspended { None } else { Some(next_schedule(&spec, &cronjob, most_recent, now)) };
        let (status, reason, message) = match &schedule {
            None => ("False", "Suspended", "suspended: no Job is started".to_owned()),
            Some(Ok((_, next))) => ("True", "Scheduled", format!("next run at {}", rfc3339(*next))),
            Some(Err(e)) => ("False", e.reason, e.message.clone()),
        };

        // 2 (cont.): the status, written when it changed.
        let before = cronjob.data.get("status").cloned();
        let status_fields = cronjob.data.entry("status").or_insert_with(|| json!({}));
        if !status_fields.is_object() {
            *status_fields = json!({});
        }
        let fields = status_fields.as_object_mut().expect("an object");
        match most_recent {
            Some(at) => fields.insert("lastScheduleTime".into(), rfc3339(at).into()),
            None => fields.remove("lastScheduleTime"),
        };
        let refs: Vec<Value> = active
            .iter()
            .map(|job| json!({"apiVersion": "batch/v1", "kind": "Job", "namespace": job.namespace(), "name": job.name(), "uid": job.uid()}))
            .collect();
        if refs.is_empty() {
            fields.remove("active");
        } else {
            fields.insert("active".into(), refs.into());
        }
        let generation = cronjob.generation();
        cronjob.set_condition(&StatusCondition {
            type_: "Available".into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
        });
        if cronjob.data.get("status") != before.as_ref() {
            ctx.update_status(&cronjob)?;
        }

        // 3: the oldest finished Jobs beyond the history limits.
        prune(ctx, failed, spec.failed_jobs_history_limit, "failed");
        prune(ctx, successful, spec.successful_jobs_history_limit, "successful");

        // 4: nothing more while suspended.
        let Some(schedule) = schedule else {
            ctx.debug("cronjob suspended, skipping");
            return Ok(Action::Done);
        };
        let (missed_run, next_run) = match schedule {
            Ok(runs) => runs,
            Err(e) => {
                // Not requeued: only a change of the CronJob can fix it.
                ctx.event(&cronjob, EventType::Warning, e.reason, "Reconcile", &e.message)?;
                return Ok(Action::Done);
            }
        };

        // 5 and 6: the missed run, if it is still due and the concurrency policy lets it start.
        let scheduled = Action::RequeueAfter((next_run - now).to_std().unwrap_or(Duration::ZERO));
        let Some(missed_run) = missed_run else {
            ctx.debug(&format!("no upcoming scheduled times, sleeping until {}", rfc3339(next_run)));
            return Ok(scheduled);
        };
        if let Some(deadline) = spec.starting_deadline_seconds
            && missed_run + chrono::Duration::seconds(deadline) < now
        {
            ctx.debug("missed starting deadline for last run, sleeping till next");
            return Ok(scheduled);
        }
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        if policy == "Forbid" && !active.is_empty() {
            ctx.debug("concurrency policy blocks concurrent runs, skipping");
            return Ok(scheduled);
        }
        if policy == "Replace" {
            for job in &active {
                ctx.delete::<Job>(job.namespace(), job.name()).or_else(ignore_not_found)?;
            }
        }
        ctx.create(&job_for(&cronjob, &spec, missed_run)?)?;
        ctx.debug(&format!("created Job for CronJob run {}", rfc3339(missed_run)));
        // 7: back at the next run.
        Ok(scheduled)
    }
}

fn ignore_not_found(e: Error) -> Result<()> {
    if e.is_not_found() { Ok(()) } else { Err(e) }
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `Complete` or `Failed` once a condition of that type is true; `None` while the Job runs.
fn finished_type(job: &Job) -> Option<&str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True").map(|c| c.type_.as_str())
}

fn scheduled_time(job: &Job) -> std::result::Result<Option<DateTime<Utc>>, chrono::ParseError> {
    match job.annotation(SCHEDULED_TIME_ANNOTATION) {
        None | Some("") => Ok(None),
        Some(raw) => Ok(Some(DateTime::parse_from_rfc3339(raw)?.with_timezone(&Utc))),
    }
}

/// A schedule the controller cannot follow: the reason and message of the condition and Event
/// that say so.
struct ScheduleError {
    reason: &'static str,
    message: String,
}

/// The most recent run missed since the last one (`None` when none) and the next run after now.
fn next_schedule(
    spec: &CronJobSpec,
    cronjob: &DynamicObject,
    last_run: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> std::result::Result<(Option<DateTime<Utc>>, DateTime<Utc>), ScheduleError> {
    let unparseable = || ScheduleError { reason: "InvalidSchedule", message: format!("unparseable schedule {:?}", spec.schedule) };
    let cron = Cron::from_str(&spec.schedule).map_err(|_| unparseable())?;
    let next_after = |t: DateTime<Utc>| cron.find_next_occurrence(&t, false).map_err(|_| unparseable());
    // Since the last run, or since the CronJob was made; not before the starting deadline.
    let created = cronjob.meta().creation_timestamp.as_ref().and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0));
    let mut earliest = last_run.or(created).unwrap_or(now);
    if let Some(deadline) = spec.starting_deadline_seconds {
        earliest = earliest.max(now - chrono::Duration::seconds(deadline));
    }
    if earliest > now {
        return Ok((None, next_after(now)?));
    }
    let mut missed = None;
    let mut t = next_after(earliest)?;
    for starts in 1.. {
        if t > now {
            break;
        }
        if starts > MAX_MISSED_STARTS {
            let message = "too many missed start times (> 100): set or decrease .spec.startingDeadlineSeconds or check clock skew".to_owned();
            return Err(ScheduleError { reason: "TooManyMissedStartTimes", message });
        }
        missed = Some(t);
        t = next_after(t)?;
    }
    Ok((missed, next_after(now)?))
}

/// Deletes the oldest of `jobs` (by start time, unstarted first) beyond `limit`; `None` keeps all.
fn prune(ctx: &Context, mut jobs: Vec<Job>, limit: Option<i32>, what: &str) {
    let Some(limit) = limit else { return };
    jobs.sort_by_key(|job| job.status.as_ref().and_then(|s| s.start_time.clone()).map(|t| t.0));
    let excess = jobs.len().saturating_sub(usize::try_from(limit).unwrap_or(0));
    for job in &jobs[..excess] {
        match ctx.delete::<Job>(job.namespace(), job.name()).or_else(ignore_not_found) {
            Ok(()) => ctx.debug(&format!("deleted old {what} job {}", job.name())),
            Err(e) => ctx.log(LogLevel::Error, &format!("unable to delete old {what} job"), &[("job", job.name()), ("error", &e.to_string())]),
        }
    }
}

/// The Job of the run at `scheduled`: the template's labels, annotations and spec, the run's
/// time in [`SCHEDULED_TIME_ANNOTATION`], controlled by the CronJob.
fn job_for(cronjob: &DynamicObject, spec: &CronJobSpec, scheduled: DateTime<Utc>) -> Result<Job> {
    let template = spec.job_template.metadata.clone().unwrap_or_default();
    let mut annotations = template.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIME_ANNOTATION.into(), rfc3339(scheduled));
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": format!("{}-{}", cronjob.name(), scheduled.timestamp()),
            "namespace": cronjob.namespace(),
            "labels": template.labels.unwrap_or_default(),
            "annotations": annotations,
            "ownerReferences": [cronjob.controller_owner_ref()],
        },
        "spec": spec.job_template.spec,
    });
    Ok(serde_json::from_value(job)?)
}

kubewasm_sdk::export_controller!(CronJobController);
