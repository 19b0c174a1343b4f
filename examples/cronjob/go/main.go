// The kubebuilder book's CronJob controller (book.kubebuilder.io, "Tutorial: Building CronJob") as
// a kubewasm plugin, in Go, with typed k8s.io/api Jobs and robfig/cron, as its original.
//
// A CronJob (batch.tutorial.kubebuilder.io/v1) runs its jobTemplate as a Job on a cron schedule.
// Each reconcile lists the Jobs the CronJob controls (the host's controller-owner index: the
// tutorial's jobOwnerKey field index), sorts them into active, successful and failed, reports
// the active ones and the latest scheduled time in the status, deletes the oldest finished Jobs
// beyond the history limits, and — unless suspended — starts the most recent missed run
// (respecting startingDeadlineSeconds and the concurrency policy), then asks to be reconciled
// again at the next scheduled time. The clock is the host's: `kubewasm test` cases stop it.
package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kinds"
	"github.com/kubewasm/kubewasm/plugins/go/kubewasm"
	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CronJobKind is the tutorial's custom resource.
var CronJobKind = kubewasm.GVK{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Kind: "CronJob"}

// scheduledTimeAnnotation records on each Job the run it was started for: what the controller
// reads back to know the last run, since it never trusts its own status.
const scheduledTimeAnnotation = "batch.tutorial.kubebuilder.io/scheduled-at"

// maxMissedStarts bounds how many missed runs are counted before giving up (the tutorial's 100).
const maxMissedStarts = 100

// CronJobSpec is the tutorial's.
type CronJobSpec struct {
	Schedule                   string                  `json:"schedule"`
	StartingDeadlineSeconds    *int64                  `json:"startingDeadlineSeconds,omitempty"`
	ConcurrencyPolicy          string                  `json:"concurrencyPolicy,omitempty"`
	Suspend                    *bool                   `json:"suspend,omitempty"`
	JobTemplate                batchv1.JobTemplateSpec `json:"jobTemplate"`
	SuccessfulJobsHistoryLimit *int32                  `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32                  `json:"failedJobsHistoryLimit,omitempty"`
}

type CronJobController struct{}

func New(kubewasm.NoSettings) (*CronJobController, error) { return &CronJobController{}, nil }

func (*CronJobController) Manifest() *kubewasm.Manifest {
	return kubewasm.NewManifest("cronjob", "0.1.0").
		Primary(CronJobKind).
		Owns(kinds.Job).
		Permission(kinds.Job, kubewasm.VerbCreate, kubewasm.VerbDelete).
		StatusPermission(CronJobKind, kubewasm.VerbUpdate)
}

func (*CronJobController) Reconcile(ctx *kubewasm.Context, cronJob kubewasm.Object) (kubewasm.Result, error) {
	now := time.Now().UTC()
	var spec CronJobSpec
	if err := cronJob.Decode(&spec, "spec"); err != nil {
		return kubewasm.Result{}, err
	}

	// 2: the child Jobs, active, successful and failed; the most recent scheduled run.
	var jobs []batchv1.Job
	if err := kubewasm.ListControlledInto(ctx, kinds.Job, cronJob.UID(), &jobs, kubewasm.InNamespace(cronJob.Namespace())); err != nil {
		return kubewasm.Result{}, err
	}
	var active, successful, failed []*batchv1.Job
	var mostRecent *time.Time
	for i := range jobs {
		job := &jobs[i]
		switch finishedType(job) {
		case "":
			active = append(active, job)
		case batchv1.JobFailed:
			failed = append(failed, job)
		case batchv1.JobComplete:
			successful = append(successful, job)
		}
		scheduled, err := scheduledTime(job)
		if err != nil {
			ctx.Error("unable to parse schedule time for child job", "job", job.Name, "error", err.Error())
			continue
		}
		if scheduled != nil && (mostRecent == nil || mostRecent.Before(*scheduled)) {
			mostRecent = scheduled
		}
	}

	// Where the schedule stands decides the condition the status reports.
	suspended := spec.Suspend != nil && *spec.Suspend
	var missedRun, nextRun time.Time
	var scheduleErr error
	condition := kubewasm.Condition{Type: "Available", Status: "False", Reason: "Suspended", Message: "suspended: no Job is started", ObservedGeneration: cronJob.Generation()}
	if !suspended {
		missedRun, nextRun, scheduleErr = nextSchedule(&spec, cronJob, mostRecent, now)
		switch e := scheduleErr.(type) {
		case nil:
			condition.Status, condition.Reason, condition.Message = "True", "Scheduled", "next run at "+nextRun.Format(time.RFC3339)
		case *scheduleError:
			condition.Reason, condition.Message = e.reason, e.message
		}
	}

	// 2 (cont.): the status, written when it changed.
	before, _ := json.Marshal(cronJob.Map("status"))
	if mostRecent != nil {
		cronJob.SetField(mostRecent.Format(time.RFC3339), "status", "lastScheduleTime")
	} else {
		cronJob.RemoveField("status", "lastScheduleTime")
	}
	refs := make([]any, len(active))
	for i, job := range active {
		refs[i] = corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: job.Namespace, Name: job.Name, UID: job.UID}
	}
	if len(refs) > 0 {
		cronJob.SetField(refs, "status", "active")
	} else {
		cronJob.RemoveField("status", "active")
	}
	cronJob.SetCondition(condition)
	if after, _ := json.Marshal(cronJob.Map("status")); string(after) != string(before) {
		if _, err := ctx.UpdateStatus(cronJob); err != nil {
			return kubewasm.Result{}, err
		}
	}

	// 3: the oldest finished Jobs beyond the history limits.
	prune(ctx, failed, spec.FailedJobsHistoryLimit, "failed")
	prune(ctx, successful, spec.SuccessfulJobsHistoryLimit, "successful")

	// 4: nothing more while suspended.
	if suspended {
		ctx.Debug("cronjob suspended, skipping")
		return kubewasm.Result{}, nil
	}
	if e, ok := scheduleErr.(*scheduleError); ok {
		// Not requeued: only a change of the CronJob can fix it.
		return kubewasm.Result{}, ctx.Event(cronJob, kubewasm.Warning, e.reason, "Reconcile", e.message)
	}

	// 5 and 6: the missed run, if it is still due and the concurrency policy lets it start.
	scheduled := kubewasm.Result{RequeueAfter: nextRun.Sub(now)}
	if missedRun.IsZero() {
		ctx.Debug("no upcoming scheduled times, sleeping until next", "next", nextRun.Format(time.RFC3339))
		return scheduled, nil
	}
	if spec.StartingDeadlineSeconds != nil && missedRun.Add(time.Duration(*spec.StartingDeadlineSeconds)*time.Second).Before(now) {
		ctx.Debug("missed starting deadline for last run, sleeping till next", "run", missedRun.Format(time.RFC3339))
		return scheduled, nil
	}
	if spec.ConcurrencyPolicy == "Forbid" && len(active) > 0 {
		ctx.Debug("concurrency policy blocks concurrent runs, skipping", "active", len(active))
		return scheduled, nil
	}
	if spec.ConcurrencyPolicy == "Replace" {
		for _, job := range active {
			if err := ctx.Delete(kinds.Job, job.Namespace, job.Name); kubewasm.IgnoreNotFound(err) != nil {
				return kubewasm.Result{}, err
			}
		}
	}
	if _, err := ctx.Create(jobFor(cronJob, &spec, missedRun)); err != nil {
		return kubewasm.Result{}, err
	}
	ctx.Debug("created Job for CronJob run", "run", missedRun.Format(time.RFC3339))
	// 7: back at the next run.
	return scheduled, nil
}

// finishedType is JobComplete or JobFailed once a condition of that type is true; "" while the
// Job runs.
func finishedType(job *batchv1.Job) batchv1.JobConditionType {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func scheduledTime(job *batchv1.Job) (*time.Time, error) {
	raw := job.Annotations[scheduledTimeAnnotation]
	if raw == "" {
		return nil, nil
	}
	parsed, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil, err
	}
	return &parsed, nil
}

// scheduleError is a schedule the controller cannot follow: the reason and message of the
// condition and Event that say so.
type scheduleError struct{ reason, message string }

func (e *scheduleError) Error() string { return e.message }

// nextSchedule is the most recent run missed since the last one (zero when none) and the next
// run after now, in UTC.
func nextSchedule(spec *CronJobSpec, cronJob kubewasm.Object, lastRun *time.Time, now time.Time) (missed, next time.Time, err error) {
	schedule, err := cron.ParseStandard(spec.Schedule)
	if err != nil {
		return time.Time{}, time.Time{}, &scheduleError{"InvalidSchedule", fmt.Sprintf("unparseable schedule %q", spec.Schedule)}
	}
	// Since the last run, or since the CronJob was made; not before the starting deadline.
	earliest := now
	if lastRun != nil {
		earliest = *lastRun
	} else if created, _ := cronJob.String("metadata", "creationTimestamp"); created != "" {
		if t, err := time.Parse(time.RFC3339, created); err == nil {
			earliest = t
		}
	}
	if spec.StartingDeadlineSeconds != nil {
		if deadline := now.Add(-time.Duration(*spec.StartingDeadlineSeconds) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	earliest, now = earliest.UTC(), now.UTC()
	if earliest.After(now) {
		return time.Time{}, schedule.Next(now), nil
	}
	starts := 0
	for t := schedule.Next(earliest); !t.After(now); t = schedule.Next(t) {
		missed = t
		if starts++; starts > maxMissedStarts {
			return time.Time{}, time.Time{}, &scheduleError{"TooManyMissedStartTimes", "too many missed start times (> 100): set or decrease .spec.startingDeadlineSeconds or check clock skew"}
		}
	}
	return missed, schedule.Next(now), nil
}

// prune deletes the oldest of jobs (by start time, unstarted first) beyond limit; nil keeps all.
func prune(ctx *kubewasm.Context, jobs []*batchv1.Job, limit *int32, what string) {
	if limit == nil {
		return
	}
	slices.SortStableFunc(jobs, func(a, b *batchv1.Job) int {
		switch {
		case a.Status.StartTime == nil && b.Status.StartTime == nil:
			return 0
		case a.Status.StartTime == nil:
			return -1
		case b.Status.StartTime == nil:
			return 1
		}
		return a.Status.StartTime.Compare(b.Status.StartTime.Time)
	})
	for i, job := range jobs {
		if i >= len(jobs)-int(*limit) {
			break
		}
		if err := ctx.Delete(kinds.Job, job.Namespace, job.Name); kubewasm.IgnoreNotFound(err) != nil {
			ctx.Error("unable to delete old "+what+" job", "job", job.Name, "error", err.Error())
		} else {
			ctx.Debug("deleted old "+what+" job", "job", job.Name)
		}
	}
}

// jobFor is the Job of the run at scheduled: the template's labels, annotations and spec, the
// run's time in scheduledTimeAnnotation, controlled by the CronJob. Typed, without TypeMeta: the
// SDK takes apiVersion and kind from the manifest's Job.
func jobFor(cronJob kubewasm.Object, spec *CronJobSpec, scheduled time.Time) *batchv1.Job {
	owner := cronJob.ControllerOwnerRef()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%d", cronJob.Name(), scheduled.Unix()),
			Namespace:   cronJob.Namespace(),
			Labels:      map[string]string{},
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: types.UID(owner.UID),
				Controller: owner.Controller, BlockOwnerDeletion: owner.BlockOwnerDeletion,
			}},
		},
		Spec: *spec.JobTemplate.Spec.DeepCopy(),
	}
	for k, v := range spec.JobTemplate.Annotations {
		job.Annotations[k] = v
	}
	job.Annotations[scheduledTimeAnnotation] = scheduled.Format(time.RFC3339)
	for k, v := range spec.JobTemplate.Labels {
		job.Labels[k] = v
	}
	return job
}

func init() { kubewasm.Export(New) }

func main() {}
