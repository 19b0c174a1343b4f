// Unit tests of the CronJob controller's schedule arithmetic under plain `go test` (the shared
// table tests in ../cases run the whole plugin).
package main

import (
	"errors"
	"testing"
	"time"

	"github.com/kubewasm/kubewasm/plugins/go/kubewasmtest"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNextScheduleCountsFromTheLastRunOrTheCreation(t *testing.T) {
	cronJob := kubewasmtest.Parse(`{"metadata": {"creationTimestamp": "2026-12-03T09:58:10Z"}}`)
	now := at("2026-12-03T10:00:30Z")
	deadline := int64(20)
	last := at("2026-12-03T10:00:00Z")
	for _, c := range []struct {
		name         string
		spec         CronJobSpec
		last         *time.Time
		missed, next string
	}{
		{"since the creation: the latest missed run", CronJobSpec{Schedule: "*/1 * * * *"}, nil, "2026-12-03T10:00:00Z", "2026-12-03T10:01:00Z"},
		{"since the last run: none missed", CronJobSpec{Schedule: "*/1 * * * *"}, &last, "", "2026-12-03T10:01:00Z"},
		{"the deadline hides older runs", CronJobSpec{Schedule: "*/1 * * * *", StartingDeadlineSeconds: &deadline}, nil, "", "2026-12-03T10:01:00Z"},
		{"hourly: 10:00 missed", CronJobSpec{Schedule: "@hourly"}, nil, "2026-12-03T10:00:00Z", "2026-12-03T11:00:00Z"},
	} {
		missed, next, err := nextSchedule(&c.spec, cronJob, c.last, now)
		gotMissed := ""
		if !missed.IsZero() {
			gotMissed = missed.Format(time.RFC3339)
		}
		if err != nil || gotMissed != c.missed || next.Format(time.RFC3339) != c.next {
			t.Errorf("%s: missed %q next %v (%v), want %q %q", c.name, gotMissed, next, err, c.missed, c.next)
		}
	}
}

func TestNextScheduleRefusesWhatItCannotFollow(t *testing.T) {
	cronJob := kubewasmtest.Parse(`{"metadata": {"creationTimestamp": "2026-12-01T00:00:00Z"}}`)
	for spec, reason := range map[string]string{"61 * * * *": "InvalidSchedule", "*/1 * * * *": "TooManyMissedStartTimes"} {
		_, _, err := nextSchedule(&CronJobSpec{Schedule: spec}, cronJob, nil, at("2026-12-03T10:00:30Z"))
		var e *scheduleError
		if !errors.As(err, &e) || e.reason != reason {
			t.Errorf("%q: %v, want %s", spec, err, reason)
		}
	}
}
