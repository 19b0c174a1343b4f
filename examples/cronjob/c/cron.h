/* Cron schedules and UTC time for the CronJob example, with no library beyond libc.
 *
 * The schedule is robfig/cron v3's `cron.ParseStandard` (what the tutorial, and the Go port,
 * use): five fields — minute, hour, day of month, month, day of week — of lists, ranges and steps
 * (`*`, `?`, `1-5`, `0-30/10`, `10/5`, `1,15`, a star with a step), month and day names (`jan`,
 * `MON-FRI`), or a descriptor (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
 * `@midnight`, `@hourly`, `@every 1h30m`), optionally after `TZ=` or `CRON_TZ=` with a zone the
 * plugin can load without a zone database (UTC, Local, the empty name): everything is UTC, as in
 * the Go component. The day of the month and the day of the week: both must match when either
 * is `*` or `?` (without a step above 1: robfig's star bit), else either does. Six- and
 * seven-field specs are refused, and so is a day of the week 7 (robfig's are 0 to 6).
 *
 * Time is seconds since the Unix epoch, UTC, with a hand-written proleptic Gregorian calendar
 * (proleptic: the same rules before 1582 and before 1970).
 */
#ifndef CRONJOB_CRON_H
#define CRONJOB_CRON_H

#include <stdbool.h>
#include <stdint.h>

/* A parsed schedule: bit i of a field is the value i; CRON_STAR is set on a day field that was
 * `*` or `?` (robfig's starBit). every > 0: an `@every` schedule of that many seconds. */
typedef struct cron_schedule {
    uint64_t minute, hour, dom, month, dow;
    int64_t every;
} cron_schedule;

#define CRON_STAR (UINT64_C(1) << 63)

/* Parses spec as cron.ParseStandard does; false when it does not parse (*error, when error is
 * not NULL, says why: a static string). */
bool cron_parse(const char *spec, cron_schedule *out, const char **error);

/* The first time the schedule matches after t (seconds; a whole second strictly after t, as
 * robfig's Next): false when there is none within 400 years (`0 0 30 2 *`: February 30th never
 * comes; robfig gives up after 5 years, returning the zero time). */
bool cron_next(const cron_schedule *s, int64_t t, int64_t *next);

/* ---- The UTC calendar ----------------------------------------------------------------------- */

/* Days since 1970-01-01 of the date y-m-d (m 1..12, d 1..31), and back. */
int64_t utc_days_from_civil(int64_t y, unsigned m, unsigned d);
void utc_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d);
unsigned utc_days_in_month(int64_t y, unsigned m);

/* An instant as RFC 3339 text gave it: seconds and nanoseconds since the epoch, and the offset
 * (seconds east of UTC) it was written with. */
typedef struct utc_time {
    int64_t sec;
    int32_t nsec;
    int32_t offset;
} utc_time;

/* Parses RFC 3339 text as Go's time.Parse(time.RFC3339, ...): `2026-12-03T10:00:00Z`, an
 * optional fraction of a second, `Z` or `+hh:mm`; false for anything else. */
bool utc_parse_rfc3339(const char *text, utc_time *out);
/* Formats t as Go's t.Format(time.RFC3339) (seconds, no fraction; `Z` for offset 0) into buf
 * (at least 40 bytes); returns buf. */
char *utc_format_rfc3339(utc_time t, char *buf);
/* -1, 0 or 1 as a is before, at or after b. */
int utc_compare(utc_time a, utc_time b);

#endif
