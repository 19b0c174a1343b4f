/* Native tests of ../cron.c: robfig/cron's ParseStandard and Next, in UTC, and the calendar.
 * `make` (gcc or clang, with ASan and UBSan). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        checks++;                                                                             \
        if (!(cond)) {                                                                        \
            failures++;                                                                       \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

static int64_t at(const char *rfc3339) {
    utc_time t;
    if (!utc_parse_rfc3339(rfc3339, &t)) {
        fprintf(stderr, "bad time in a test: %s\n", rfc3339);
        exit(2);
    }
    return t.sec;
}

static const char *text(int64_t sec) {
    static char buf[4][40];
    static int i;
    return utc_format_rfc3339((utc_time){sec, 0, 0}, buf[i++ % 4]);
}

static void parses(const char *spec, bool ok) {
    cron_schedule s;
    const char *error = NULL;
    CHECK(cron_parse(spec, &s, &error) == ok, "cron_parse(\"%s\"): want %s (%s)", spec, ok ? "ok" : "an error", error ? error : "");
}

/* The next run of spec after from is want (NULL: none). */
static void next(const char *spec, const char *from, const char *want) {
    cron_schedule s;
    if (!cron_parse(spec, &s, NULL)) {
        CHECK(false, "cron_parse(\"%s\") failed", spec);
        return;
    }
    int64_t got;
    bool found = cron_next(&s, at(from), &got);
    if (!want) {
        CHECK(!found, "next(\"%s\", %s): want none, got %s", spec, from, text(got));
    } else {
        CHECK(found && got == at(want), "next(\"%s\", %s): want %s, got %s", spec, from, want, found ? text(got) : "none");
    }
}

int main(void) {
    /* ---- What parses: five fields or a descriptor, as cron.ParseStandard. */
    const char *good[] = {"*/1 * * * *", "* * * * *", "? * * * ?", "0 0 1 1 *", "59 23 31 12 6", "0-59/15 */2 1-31/10 * 0-6", "5/15 * * * *",
                          "1,15,30 1,,2 * * *", "0 9 * JAN-mar mon-FRI", "0 0 * * sun,Sat", "+5 * * * *", "05 07 * * *", "*-5 * * * *",
                          "  0   0  *  *  *  ", "0\t0 * * *", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
                          "@every 1h", "@every 1h30m", "@every 1.5h", "@every 500ms", "@every -1s", "TZ=UTC 0 * * * *", "CRON_TZ=UTC @hourly",
                          "CRON_TZ=Local */5 * * * *", "TZ= 0 0 * * *", "0 0 30 2 *" /* parses; never comes */, ", * * * *"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) parses(good[i], true);
    const char *bad[] = {"", "every minute", "* * * *", "* * * * * *" /* seconds */, "* * * * * * *" /* and years */, "61 * * * *",
                         "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 0 *", "* * * 13 *", "* * * * 7" /* robfig's days of the week are 0-6 */,
                         "*/0 * * * *", "1-5-7 * * * *", "5-1 * * * *", "*/ * * * *", "1/2/3 * * * *", "-1 * * * *", "*/-1 * * * *", "a * * * *",
                         "* * * janu *", "* * * * monday", "1.5 * * * *", "@every", "@every 1", "@every 1h ", "@every x", "@reboot", "@HOURLY",
                         " @hourly", "@hourly ", "TZ=Europe/Paris 0 * * * *", "TZ=UTC", "99999999999999999999 * * * *"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) parses(bad[i], false);

    /* ---- The next run: strictly after, at a whole minute. */
    next("*/1 * * * *", "2026-12-03T10:00:30Z", "2026-12-03T10:01:00Z");
    next("*/1 * * * *", "2026-12-03T10:00:00Z", "2026-12-03T10:01:00Z");
    next("*/1 * * * *", "2026-12-03T10:00:59Z", "2026-12-03T10:01:00Z");
    next("*/1 * * * *", "2026-12-31T23:59:00Z", "2027-01-01T00:00:00Z");
    next("*/15 * * * *", "2026-12-03T10:00:00Z", "2026-12-03T10:15:00Z");
    next("5/15 * * * *", "2026-12-03T10:51:00Z", "2026-12-03T11:05:00Z");
    next("30 2 * * *", "2026-12-03T10:00:00Z", "2026-12-04T02:30:00Z");
    next("@hourly", "2026-12-03T10:00:30Z", "2026-12-03T11:00:00Z");
    next("@daily", "2026-12-03T10:00:30Z", "2026-12-04T00:00:00Z");
    next("@weekly", "2026-12-03T10:00:30Z", "2026-12-06T00:00:00Z"); /* a Thursday; Sunday */
    next("@monthly", "2026-12-03T10:00:30Z", "2027-01-01T00:00:00Z");
    next("@yearly", "2026-12-03T10:00:30Z", "2027-01-01T00:00:00Z");
    next("CRON_TZ=UTC 0 12 * * *", "2026-12-03T10:00:30Z", "2026-12-03T12:00:00Z");
    /* Names. */
    next("0 0 1 jan,JUL *", "2026-12-03T10:00:00Z", "2027-01-01T00:00:00Z");
    next("0 9 * * mon-fri", "2026-12-04T09:00:00Z", "2026-12-07T09:00:00Z"); /* Friday to Monday */
    /* Day of month and day of week: either, unless one is a star (then both); a star with a step
     * above 1 is not a star (robfig's starBit). */
    next("0 0 1-31 * 1", "2026-12-03T10:00:00Z", "2026-12-04T00:00:00Z");  /* OR: every day */
    next("0 0 * * 1", "2026-12-03T10:00:00Z", "2026-12-07T00:00:00Z");     /* AND: Mondays */
    next("0 0 ? * 1", "2026-12-03T10:00:00Z", "2026-12-07T00:00:00Z");     /* ? is a star */
    next("0 0 */1 * 1", "2026-12-03T10:00:00Z", "2026-12-07T00:00:00Z");   /* a step of 1 keeps the star */
    next("0 0 */2 * 1", "2026-12-03T10:00:00Z", "2026-12-05T00:00:00Z");   /* OR: odd days or Mondays */
    next("0 0 13 * 5", "2026-12-03T10:00:00Z", "2026-12-04T00:00:00Z");    /* OR: the 13th or Fridays */
    next("0 0 13 * *", "2026-12-03T10:00:00Z", "2026-12-13T00:00:00Z");
    next("0 0 13 * */1", "2026-12-03T10:00:00Z", "2026-12-13T00:00:00Z");  /* AND, any day of the week */
    next("0 0 13 * 5", "2026-12-05T00:00:00Z", "2026-12-11T00:00:00Z");
    next("0 0 * 2 1", "2026-12-03T10:00:00Z", "2027-02-01T00:00:00Z");     /* AND: Mondays of February */
    /* February 29th, and dates that never come. */
    next("0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z");
    next("0 0 29 2 *", "2097-03-01T00:00:00Z", "2104-02-29T00:00:00Z");   /* 2100 is not a leap year */
    next("0 0 29 2 0", "2026-03-01T00:00:00Z", "2027-02-07T00:00:00Z");   /* OR: any Sunday of February */
    next("0 0 29 2 */1", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"); /* AND: the 29th, any day */
    next("0 0 30 2 *", "2026-12-03T10:00:00Z", NULL);
    next("0 0 31 4,6,9,11 *", "2026-12-03T10:00:00Z", NULL);
    next(", * * * *", "2026-12-03T10:00:00Z", NULL);
    next("0 0 31 * *", "2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z");
    next("0 0 31 * *", "2027-01-31T00:00:00Z", "2027-03-31T00:00:00Z");
    /* @every: from the second, in whole seconds, at least one. */
    next("@every 90s", "2026-12-03T10:00:30Z", "2026-12-03T10:02:00Z");
    next("@every 1.5h", "2026-12-03T10:00:30Z", "2026-12-03T11:30:30Z");
    next("@every 500ms", "2026-12-03T10:00:30Z", "2026-12-03T10:00:31Z");
    next("@every 1m30.9s", "2026-12-03T10:00:30Z", "2026-12-03T10:02:00Z");
    /* Before 1970. */
    next("0 0 1 1 *", "1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z");
    next("*/1 * * * *", "1969-12-31T23:58:30Z", "1969-12-31T23:59:00Z");

    /* ---- The calendar, against gmtime_r. */
    CHECK(utc_days_from_civil(1970, 1, 1) == 0, "1970-01-01");
    CHECK(utc_days_from_civil(2000, 3, 1) == 11017, "2000-03-01");
    CHECK(at("2026-12-03T10:00:00Z") == 1796292000, "2026-12-03T10:00:00Z");
    for (int64_t t = -5000000000LL; t < 9000000000LL; t += 86399 * 37 + 13) {
        time_t tt = (time_t)t;
        struct tm tm;
        gmtime_r(&tt, &tm);
        char want[40];
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%SZ", &tm);
        CHECK(strcmp(text(t), want) == 0, "format %lld: %s, want %s", (long long)t, text(t), want);
        CHECK(at(want) == t, "parse %s", want);
    }
    for (int64_t y = -1000; y <= 3000; y++) {
        for (unsigned m = 1; m <= 12; m++) {
            int64_t yy;
            unsigned mm, dd;
            utc_civil_from_days(utc_days_from_civil(y, m, utc_days_in_month(y, m)), &yy, &mm, &dd);
            CHECK(yy == y && mm == m && dd == utc_days_in_month(y, m), "round trip %lld-%u", (long long)y, m);
            CHECK(utc_days_from_civil(y, m, 1) + (int64_t)utc_days_in_month(y, m) == (m == 12 ? utc_days_from_civil(y + 1, 1, 1) : utc_days_from_civil(y, m + 1, 1)),
                  "month length %lld-%u", (long long)y, m);
        }
    }

    /* ---- RFC 3339, as Go's time.Parse(time.RFC3339, ...) and Format. */
    utc_time t;
    CHECK(utc_parse_rfc3339("2026-12-03T11:00:00+01:00", &t) && t.sec == 1796292000 && t.offset == 3600, "an offset");
    char buf[40];
    CHECK(strcmp(utc_format_rfc3339(t, buf), "2026-12-03T11:00:00+01:00") == 0, "formats with its offset: %s", buf);
    CHECK(utc_parse_rfc3339("2026-12-03T09:30:00-00:30", &t) && t.sec == 1796292000 && strcmp(utc_format_rfc3339(t, buf), "2026-12-03T09:30:00-00:30") == 0,
          "a negative offset: %s", buf);
    CHECK(utc_parse_rfc3339("2026-12-03T10:00:00+00:00", &t) && strcmp(utc_format_rfc3339(t, buf), "2026-12-03T10:00:00Z") == 0, "+00:00 is Z");
    CHECK(utc_parse_rfc3339("2026-12-03T10:00:00.5Z", &t) && t.sec == 1796292000 && t.nsec == 500000000, "a fraction");
    CHECK(utc_parse_rfc3339("2026-12-03T10:00:00.1234567891Z", &t) && t.nsec == 123456789, "a long fraction");
    CHECK(strcmp(utc_format_rfc3339(t, buf), "2026-12-03T10:00:00Z") == 0, "no fraction in the text");
    CHECK(utc_parse_rfc3339("2028-02-29T00:00:00Z", &t), "a leap day");
    const char *not_rfc3339[] = {"", "2026-12-03", "2026-12-03T10:00:00", "2026-12-03 10:00:00Z", "2026-12-03t10:00:00Z", "2026-12-03T10:00:00z",
                                 "2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-03T24:00:00Z", "2026-12-03T10:60:00Z", "2026-12-03T10:00:60Z",
                                 "2026-12-03T10:00:00.Z", "2026-12-03T10:00:00+0100", "2026-12-03T10:00:00+24:00", "2026-12-03T10:00:00Z ", "26-12-03T10:00:00Z"};
    for (size_t i = 0; i < sizeof not_rfc3339 / sizeof *not_rfc3339; i++) {
        CHECK(!utc_parse_rfc3339(not_rfc3339[i], &t), "not RFC 3339: \"%s\"", not_rfc3339[i]);
    }

    /* One test in the suite's count, in cargo's form; its checks are counted here. */
    printf("%d checks, %d failed\n", checks, failures);
    printf("test result: %s. %d passed; %d failed\n", failures ? "FAILED" : "ok", failures ? 0 : 1, failures ? 1 : 0);
    return failures != 0;
}
