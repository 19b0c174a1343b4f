/* The kubebuilder book's CronJob controller ("Tutorial: Building CronJob") as a kubewasm plugin,
 * in C: the same behaviour and table cases as the Go, Rust, JavaScript and Python ports beside it,
 * with a cron parser of its own (cron.c: robfig/cron's ParseStandard, as the Go port uses). What
 * it does, step by step, is in ../README.md; the step numbers below are the tutorial's.
 *
 * A CronJob (batch.tutorial.kubebuilder.io/v1) runs its jobTemplate as a Job on a cron schedule.
 * Each reconcile lists the Jobs the CronJob controls (the host's controller-owner index: the
 * tutorial's jobOwnerKey field index), sorts them into active, successful and failed, reports
 * the active ones and the latest scheduled time in the status, deletes the oldest finished Jobs
 * beyond the history limits, and — unless suspended — starts the most recent missed run
 * (respecting startingDeadlineSeconds and the concurrency policy), then asks to be reconciled
 * again at the next scheduled time. The clock is the host's: `kubewasm test` cases stop it.
 */
#include <string.h>
#include <time.h>

#include <kubewasm.h>

#include "cron.h"

#define CRONJOB KW_GVK("batch.tutorial.kubebuilder.io", "v1", "CronJob")

/* Records on each Job the run it was started for: what the controller reads back to know the
 * last run, since it never trusts its own status. */
#define SCHEDULED_TIME_ANNOTATION "batch.tutorial.kubebuilder.io/scheduled-at"

/* How many missed runs are counted before giving up (the tutorial's 100). */
#define MAX_MISSED_STARTS 100

static const char *describe(kw_manifest *m, kw_settings *settings) {
    (void)settings;
    kw_manifest_name(m, "cronjob", "0.1.0");
    kw_manifest_primary(m, CRONJOB);
    kw_manifest_owns(m, KW_JOB);
    kw_manifest_permission(m, KW_JOB, NULL, KW_CREATE | KW_DELETE);
    kw_manifest_permission(m, CRONJOB, "status", KW_UPDATE);
    return NULL;
}

/* ---- Time ------------------------------------------------------------------------------------ */

static utc_time at_second(int64_t sec) { return (utc_time){sec, 0, 0}; }

static const char *rfc3339(utc_time t) { return utc_format_rfc3339(t, kw_alloc(40)); }

/* t plus seconds (saturating: a deadline of any size is a comparison, never a wrap). */
static utc_time add_seconds(utc_time t, int64_t seconds) {
    int64_t sec;
    if (__builtin_add_overflow(t.sec, seconds, &sec)) sec = seconds < 0 ? INT64_MIN : INT64_MAX;
    return (utc_time){sec, t.nsec, 0};
}

/* The time of an RFC 3339 string value; false when absent, empty or not RFC 3339. */
static bool time_of(const kw_value *v, utc_time *out) {
    const char *text = kw_str(v);
    return text && *text && utc_parse_rfc3339(text, out);
}

/* ---- The spec ---------------------------------------------------------------------------------- */

/* The tutorial's CronJobSpec; the optional fields say whether they are set. */
typedef struct spec {
    const char *schedule;
    bool has_deadline;
    int64_t starting_deadline_seconds;
    const char *concurrency_policy;
    bool suspend;
    const kw_value *job_template;
    bool has_successful_limit, has_failed_limit;
    int64_t successful_limit, failed_limit;
} spec;

/* An optional integer field: set when it is one, an error when it is something else (the Go
 * port's typed decode refuses it too). */
static const kw_error *optional_int(const kw_value *s, const char *key, int64_t min, int64_t max, bool *has, int64_t *out) {
    const kw_value *v = kw_get(s, key);
    *has = false;
    if (kw_type_of(v) == KW_NULL) return NULL;
    if (!kw_as_int(v, out) || *out < min || *out > max) return kw_errorf(KW_INVALID, "spec.%s: not an integer of its range", key);
    *has = true;
    return NULL;
}

static const kw_error *optional_string(const kw_value *s, const char *key, const char **out) {
    const kw_value *v = kw_get(s, key);
    *out = kw_str_or(v, "");
    if (kw_type_of(v) != KW_NULL && kw_type_of(v) != KW_STRING) return kw_errorf(KW_INVALID, "spec.%s: not a string", key);
    return NULL;
}

static const kw_error *decode_spec(const kw_value *cronjob, spec *out) {
    const kw_value *s = kw_get(cronjob, "spec");
    const kw_error *err;
    *out = (spec){0};
    if (kw_type_of(s) != KW_NULL && kw_type_of(s) != KW_OBJECT) return kw_errorf(KW_INVALID, "spec: not an object");
    if ((err = optional_string(s, "schedule", &out->schedule))) return err;
    if ((err = optional_string(s, "concurrencyPolicy", &out->concurrency_policy))) return err;
    if ((err = optional_int(s, "startingDeadlineSeconds", INT64_MIN, INT64_MAX, &out->has_deadline, &out->starting_deadline_seconds))) return err;
    if ((err = optional_int(s, "successfulJobsHistoryLimit", INT32_MIN, INT32_MAX, &out->has_successful_limit, &out->successful_limit))) return err;
    if ((err = optional_int(s, "failedJobsHistoryLimit", INT32_MIN, INT32_MAX, &out->has_failed_limit, &out->failed_limit))) return err;
    const kw_value *suspend = kw_get(s, "suspend");
    if (kw_type_of(suspend) != KW_NULL && kw_type_of(suspend) != KW_BOOL) return kw_errorf(KW_INVALID, "spec.suspend: not a boolean");
    out->suspend = kw_bool_or(suspend, false);
    out->job_template = kw_get(s, "jobTemplate");
    return NULL;
}

/* ---- Jobs ---------------------------------------------------------------------------------------- */

/* "Complete" or "Failed" once a condition of that type is true; NULL while the Job runs. */
static const char *finished_type(const kw_value *job) {
    const kw_value *conditions = kw_path(job, "status", "conditions", NULL);
    for (size_t i = 0; i < kw_len(conditions); i++) {
        const kw_value *c = kw_at(conditions, i);
        const char *type = kw_str_or(kw_get(c, "type"), ""), *status = kw_str_or(kw_get(c, "status"), "");
        if ((strcmp(type, "Complete") == 0 || strcmp(type, "Failed") == 0) && strcmp(status, "True") == 0) return type;
    }
    return NULL;
}

/* A list of Jobs (pointers into the cache's answer). */
typedef struct jobs {
    kw_value **items;
    size_t len;
} jobs;

static void jobs_push(jobs *list, kw_value *job) { list->items[list->len++] = job; }

/* Whether a started before b: unstarted first (the Go port's order). */
static bool started_before(const kw_value *a, const kw_value *b) {
    utc_time ta, tb;
    bool has_a = time_of(kw_path(a, "status", "startTime", NULL), &ta), has_b = time_of(kw_path(b, "status", "startTime", NULL), &tb);
    if (!has_a || !has_b) return !has_a && has_b;
    return utc_compare(ta, tb) < 0;
}

/* Deletes the oldest of list (by start time, unstarted first) beyond the limit; unset keeps all. */
static void prune(jobs list, bool has_limit, int64_t limit, const char *what) {
    if (!has_limit) return;
    for (size_t i = 1; i < list.len; i++) { /* a stable insertion sort */
        kw_value *job = list.items[i];
        size_t j = i;
        for (; j > 0 && started_before(job, list.items[j - 1]); j--) list.items[j] = list.items[j - 1];
        list.items[j] = job;
    }
    for (size_t i = 0; (int64_t)i < (int64_t)list.len - limit; i++) {
        const kw_value *job = list.items[i];
        const char *name = kw_str_or(kw_path(job, "metadata", "name", NULL), "");
        const kw_error *err = kw_ignore_not_found(kw_delete(KW_JOB, kw_namespace(job), name));
        if (err) {
            kw_log(KW_ERROR, "unable to delete old %s job job=%s error=%s", what, name, err->message);
        } else {
            kw_log(KW_DEBUG, "deleted old %s job job=%s", what, name);
        }
    }
}

/* The Job of the run at scheduled: the template's labels, annotations and spec, the run's time in
 * the annotation, controlled by the CronJob. */
static kw_value *job_for(const kw_value *cronjob, const spec *s, int64_t scheduled) {
    const kw_value *meta = kw_get(s->job_template, "metadata");
    kw_value *job = kw_new_object(KW_JOB, kw_namespace(cronjob), kw_sprintf("%s-%lld", kw_str_or(kw_path(cronjob, "metadata", "name", NULL), ""), (long long)scheduled));
    const kw_value *labels = kw_get(meta, "labels"), *annotations = kw_get(meta, "annotations");
    kw_set_path(job, kw_type_of(labels) == KW_OBJECT ? kw_copy(labels) : kw_object(), "metadata", "labels", NULL);
    kw_value *copy = kw_set_path(job, kw_type_of(annotations) == KW_OBJECT ? kw_copy(annotations) : kw_object(), "metadata", "annotations", NULL);
    kw_set(copy, SCHEDULED_TIME_ANNOTATION, kw_string(rfc3339(at_second(scheduled))));
    kw_push(kw_set_path(job, kw_array(), "metadata", "ownerReferences", NULL), kw_controller_ref(cronjob));
    const kw_value *template_spec = kw_get(s->job_template, "spec");
    if (template_spec) kw_set(job, "spec", kw_copy(template_spec));
    return job;
}

/* ---- The schedule ------------------------------------------------------------------------------ */

/* A schedule the controller cannot follow: the reason and message of the condition and Event that
 * say so (reason NULL: none). */
typedef struct schedule_error {
    const char *reason;
    const char *message;
} schedule_error;

/* text quoted as Go's %q does (strconv.Quote), for what a schedule holds. Printable non-ASCII
 * characters stay as they are; of the others, the C1 controls and the Unicode spaces and format
 * characters a schedule might carry are escaped as \u.... */
static const char *go_quote(const char *text) {
    size_t n = strlen(text);
    char *out = kw_alloc(n * 10 + 3), *o = out;
    const unsigned char *p = (const unsigned char *)text;
    *o++ = '"';
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            *o++ = '\\', *o++ = (char)c, p++;
        } else if (c >= 0x20 && c < 0x7f) {
            *o++ = (char)c, p++;
        } else if (c < 0x80) {
            static const char letters[] = "abtnvfr"; /* \a \b \t \n \v \f \r: 7 to 13 */
            if (c >= 7 && c <= 13) {
                *o++ = '\\', *o++ = letters[c - 7];
            } else {
                o += strlen(strcpy(o, kw_sprintf("\\x%02x", c)));
            }
            p++;
        } else {
            /* A UTF-8 sequence: its code point, or an invalid byte. */
            size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0f : c & 0x1f;
            for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80) {
                    len = 0;
                    break;
                }
                cp = cp << 6 | (p[i] & 0x3f);
            }
            if (len == 0 || (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
                o += strlen(strcpy(o, kw_sprintf("\\x%02x", c)));
                p++;
                continue;
            }
            bool unprintable = (cp >= 0x80 && cp <= 0xa0) || cp == 0xad || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
                               (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb);
            if (unprintable) {
                o += strlen(strcpy(o, kw_sprintf("\\u%04x", (unsigned)cp)));
            } else {
                memcpy(o, p, len), o += len;
            }
            p += len;
        }
    }
    *o++ = '"';
    *o = 0;
    return out;
}

/* The most recent run missed since the last one (*missed 0 and *has_missed false when none) and
 * the next run after now, in UTC; a schedule error when the schedule does not parse, has no next
 * run, or more than 100 runs were missed. */
static schedule_error next_schedule(const spec *s, const kw_value *cronjob, const utc_time *last_run, utc_time now, bool *has_missed, int64_t *missed,
                                    int64_t *next) {
    schedule_error unparseable = {"InvalidSchedule", kw_sprintf("unparseable schedule %s", go_quote(s->schedule))};
    cron_schedule schedule;
    if (!cron_parse(s->schedule, &schedule, NULL)) return unparseable;
    /* Since the last run, or since the CronJob was made; not before the starting deadline. */
    utc_time earliest = now, created;
    if (last_run) {
        earliest = *last_run;
    } else if (time_of(kw_path(cronjob, "metadata", "creationTimestamp", NULL), &created)) {
        earliest = created;
    }
    if (s->has_deadline) {
        utc_time deadline = add_seconds(now, s->starting_deadline_seconds == INT64_MIN ? INT64_MAX : -s->starting_deadline_seconds);
        if (utc_compare(deadline, earliest) > 0) earliest = deadline;
    }
    *has_missed = false;
    *missed = 0;
    if (utc_compare(earliest, now) > 0) return cron_next(&schedule, now.sec, next) ? (schedule_error){0} : unparseable;
    int starts = 0;
    int64_t t;
    if (!cron_next(&schedule, earliest.sec, &t)) return unparseable;
    while (utc_compare(at_second(t), now) <= 0) {
        *has_missed = true;
        *missed = t;
        if (++starts > MAX_MISSED_STARTS) {
            return (schedule_error){"TooManyMissedStartTimes",
                                    "too many missed start times (> 100): set or decrease .spec.startingDeadlineSeconds or check clock skew"};
        }
        if (!cron_next(&schedule, t, &t)) return unparseable;
    }
    return cron_next(&schedule, now.sec, next) ? (schedule_error){0} : unparseable;
}

/* ---- The status -------------------------------------------------------------------------------- */

/* A reference to a running Job in status.active (without its resourceVersion, which changes
 * with every status update of the Job). */
static kw_value *job_ref(const kw_value *job) {
    kw_value *ref = kw_object();
    kw_set(ref, "apiVersion", kw_string("batch/v1"));
    kw_set(ref, "kind", kw_string("Job"));
    kw_set(ref, "namespace", kw_string(kw_namespace(job)));
    kw_set(ref, "name", kw_string(kw_name(job)));
    kw_set(ref, "uid", kw_string(kw_uid(job)));
    return ref;
}

/* ---- Reconcile ------------------------------------------------------------------------------------ */

static kw_result reconcile(kw_value *cronjob) {
    struct timespec clock;
    timespec_get(&clock, TIME_UTC); /* C11's clock_gettime(CLOCK_REALTIME): the host's wall clock */
    utc_time now = {clock.tv_sec, (int32_t)clock.tv_nsec, 0};
    spec s;
    const kw_error *err = decode_spec(cronjob, &s);
    if (err) return kw_fail(err);

    /* 2: the child Jobs, active, successful and failed; the most recent scheduled run. */
    kw_value *children;
    if ((err = kw_cache_list_controlled(KW_JOB, kw_namespace(cronjob), kw_str_or(kw_get(kw_get(cronjob, "metadata"), "uid"), ""), &children))) return kw_fail(err);
    size_t count = kw_len(children);
    jobs active = {kw_alloc(sizeof(kw_value *) * (count + 1)), 0}, successful = {kw_alloc(sizeof(kw_value *) * (count + 1)), 0},
         failed = {kw_alloc(sizeof(kw_value *) * (count + 1)), 0};
    utc_time most_recent = {0};
    bool has_most_recent = false;
    for (size_t i = 0; i < count; i++) {
        kw_value *job = kw_at(children, i);
        const char *finished = finished_type(job);
        if (!finished) {
            jobs_push(&active, job);
        } else if (strcmp(finished, "Failed") == 0) {
            jobs_push(&failed, job);
        } else {
            jobs_push(&successful, job);
        }
        const char *raw = kw_annotation(job, SCHEDULED_TIME_ANNOTATION);
        if (!raw || !*raw) continue;
        utc_time scheduled;
        if (!utc_parse_rfc3339(raw, &scheduled)) {
            kw_log(KW_ERROR, "unable to parse schedule time for child job job=%s error=not an RFC 3339 time: \"%s\"", kw_str_or(kw_path(job, "metadata", "name", NULL), ""), raw);
            continue;
        }
        if (!has_most_recent || utc_compare(most_recent, scheduled) < 0) most_recent = scheduled, has_most_recent = true;
    }

    /* Where the schedule stands decides the condition the status reports. */
    bool has_missed = false;
    int64_t missed = 0, next = 0;
    schedule_error schedule_err = {0};
    const char *status = "False", *reason = "Suspended", *message = "suspended: no Job is started";
    if (!s.suspend) {
        schedule_err = next_schedule(&s, cronjob, has_most_recent ? &most_recent : NULL, now, &has_missed, &missed, &next);
        if (!schedule_err.reason) {
            status = "True", reason = "Scheduled", message = kw_sprintf("next run at %s", rfc3339(at_second(next)));
        } else {
            reason = schedule_err.reason, message = schedule_err.message;
        }
    }

    /* 2 (cont.): the status, written when it changed. */
    kw_value *before = kw_copy(kw_get(cronjob, "status"));
    kw_value *fields = kw_get(cronjob, "status");
    if (kw_type_of(fields) != KW_OBJECT) fields = kw_set(cronjob, "status", kw_object());
    if (has_most_recent) {
        kw_set(fields, "lastScheduleTime", kw_string(rfc3339(most_recent)));
    } else {
        kw_remove(fields, "lastScheduleTime");
    }
    if (active.len > 0) {
        kw_value *refs = kw_set(fields, "active", kw_array());
        for (size_t i = 0; i < active.len; i++) kw_push(refs, job_ref(active.items[i]));
    } else {
        kw_remove(fields, "active");
    }
    kw_set_condition(cronjob, "Available", status, reason, message);
    if (!kw_equal(kw_get(cronjob, "status"), before) && (err = kw_update_status(cronjob, NULL))) return kw_fail(err);

    /* 3: the oldest finished Jobs beyond the history limits. */
    prune(failed, s.has_failed_limit, s.failed_limit, "failed");
    prune(successful, s.has_successful_limit, s.successful_limit, "successful");

    /* 4: nothing more while suspended. */
    if (s.suspend) {
        kw_log(KW_DEBUG, "cronjob suspended, skipping");
        return KW_DONE;
    }
    if (schedule_err.reason) {
        /* Not requeued: only a change of the CronJob can fix it. */
        return kw_fail(kw_event(cronjob, KW_WARNING, schedule_err.reason, "Reconcile", "%s", schedule_err.message));
    }

    /* 5 and 6: the missed run, if it is still due and the concurrency policy lets it start. */
    struct timespec until = {(time_t)(next - now.sec), 0};
    if (now.nsec > 0) until.tv_sec--, until.tv_nsec = 1000000000 - now.nsec;
    kw_result scheduled = kw_requeue_after(until);
    if (!has_missed) {
        kw_log(KW_DEBUG, "no upcoming scheduled times, sleeping until next next=%s", rfc3339(at_second(next)));
        return scheduled;
    }
    if (s.has_deadline && utc_compare(add_seconds(at_second(missed), s.starting_deadline_seconds), now) < 0) {
        kw_log(KW_DEBUG, "missed starting deadline for last run, sleeping till next run=%s", rfc3339(at_second(missed)));
        return scheduled;
    }
    if (strcmp(s.concurrency_policy, "Forbid") == 0 && active.len > 0) {
        kw_log(KW_DEBUG, "concurrency policy blocks concurrent runs, skipping active=%zu", active.len);
        return scheduled;
    }
    if (strcmp(s.concurrency_policy, "Replace") == 0) {
        for (size_t i = 0; i < active.len; i++) {
            const kw_value *job = active.items[i];
            if ((err = kw_ignore_not_found(kw_delete(KW_JOB, kw_namespace(job), kw_str_or(kw_path(job, "metadata", "name", NULL), ""))))) return kw_fail(err);
        }
    }
    if ((err = kw_create(job_for(cronjob, &s, missed), NULL))) return kw_fail(err);
    kw_log(KW_DEBUG, "created Job for CronJob run run=%s", rfc3339(at_second(missed)));
    /* 7: back at the next run. */
    return scheduled;
}

KUBEWASM_PLUGIN(.describe = describe, .reconcile = reconcile);
