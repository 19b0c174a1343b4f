/* Cron schedules and UTC time for the CronJob example: see cron.h. The parser follows robfig/cron
 * v3.0.1's parser.go step by step (Parse, normalizeFields, getField, getRange, parseIntOrName,
 * mustParseInt, parseDescriptor; time.ParseDuration for `@every`), so that a schedule the Go
 * component takes is taken here and one it refuses is refused. */
#include "cron.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- The calendar (Howard Hinnant's days_from_civil / civil_from_days) ---------------------- */

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t utc_days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    unsigned yoe = (unsigned)(y - era * 400);                           /* [0, 399] */
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;     /* [0, 365] */
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;               /* [0, 146096] */
    return era * 146097 + (int64_t)doe - 719468;
}

void utc_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d) {
    days += 719468;
    int64_t era = floor_div(days, 146097);
    unsigned doe = (unsigned)(days - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned utc_days_in_month(int64_t y, unsigned m) {
    static const unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : days[m - 1];
}

/* ---- RFC 3339 --------------------------------------------------------------------------------- */

/* n digits at s, or -1. */
static int digits(const char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

bool utc_parse_rfc3339(const char *s, utc_time *out) {
    /* 2006-01-02T15:04:05[.999999999](Z|+07:00) */
    if (!s || strlen(s) < 20) return false;
    int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
    int h = digits(s + 11, 2), mi = digits(s + 14, 2), se = digits(s + 17, 2);
    if (y < 0 || s[4] != '-' || mo < 0 || s[7] != '-' || d < 0 || s[10] != 'T' || h < 0 || s[13] != ':' || mi < 0 || s[16] != ':' || se < 0) {
        return false;
    }
    if (mo < 1 || mo > 12 || d < 1 || (unsigned)d > utc_days_in_month(y, (unsigned)mo) || h > 23 || mi > 59 || se > 59) return false;
    const char *p = s + 19;
    int32_t nsec = 0;
    if ((*p == '.' || *p == ',') && p[1] >= '0' && p[1] <= '9') {
        int n = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, n++) {
            if (n < 9) nsec = nsec * 10 + (*p - '0');
        }
        for (; n < 9; n++) nsec *= 10;
    }
    int32_t offset = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh = digits(p + 1, 2), om = oh < 0 ? -1 : digits(p + 4, 2);
        if (oh < 0 || p[3] != ':' || om < 0 || oh > 23 || om > 59) return false;
        offset = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p) return false;
    out->sec = utc_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se - offset;
    out->nsec = nsec;
    out->offset = offset;
    return true;
}

char *utc_format_rfc3339(utc_time t, char *buf) {
    int64_t local = t.sec + t.offset;
    int64_t days = floor_div(local, 86400), secs = local - days * 86400;
    int64_t y;
    unsigned m, d;
    utc_civil_from_days(days, &y, &m, &d);
    int n = snprintf(buf, 40, "%04lld-%02u-%02uT%02u:%02u:%02u", (long long)y, m, d, (unsigned)(secs / 3600), (unsigned)(secs / 60 % 60),
                     (unsigned)(secs % 60));
    if (t.offset == 0) {
        snprintf(buf + n, 40 - (size_t)n, "Z");
    } else {
        int32_t off = t.offset < 0 ? -t.offset : t.offset;
        snprintf(buf + n, 40 - (size_t)n, "%c%02d:%02d", t.offset < 0 ? '-' : '+', (int)(off / 3600), (int)(off / 60 % 60));
    }
    return buf;
}

int utc_compare(utc_time a, utc_time b) {
    if (a.sec != b.sec) return a.sec < b.sec ? -1 : 1;
    if (a.nsec != b.nsec) return a.nsec < b.nsec ? -1 : 1;
    return 0;
}

/* ---- Parsing (robfig/cron's parser.go) ------------------------------------------------------- */

typedef struct bounds {
    unsigned min, max;
    const char *const *names; /* names[i] is the value i, or NULL: no names */
} bounds;

static const char *const month_names[] = {"", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const dow_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};
static const bounds MINUTES = {0, 59, NULL}, HOURS = {0, 23, NULL}, DOM = {1, 31, NULL}, MONTHS = {1, 12, month_names}, DOW = {0, 6, dow_names};

/* A string slice: robfig splits the spec with strings.Fields, FieldsFunc and Split. */
typedef struct slice {
    const char *s;
    size_t n;
} slice;

/* The length of the white space character (unicode.IsSpace, as strings.Fields and TrimSpace
 * take it) at p, or 0. */
static size_t space_len(const char *p) {
    const unsigned char *u = (const unsigned char *)p;
    if (*u == ' ' || (*u >= '\t' && *u <= '\r')) return 1;
    if (u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0)) return 2;                       /* U+0085, U+00A0 */
    if (u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80) return 3;                         /* U+1680 */
    if (u[0] == 0xe2 && u[1] == 0x80 && (u[2] <= 0x8a || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf)) {
        return u[2] >= 0x80 ? 3 : 0;                                                    /* U+2000-200A, 2028, 2029, 202F */
    }
    if (u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) return 3;                         /* U+205F */
    if (u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80) return 3;                         /* U+3000 */
    return 0;
}

static bool slice_is(slice s, const char *text) { return s.n == strlen(text) && memcmp(s.s, text, s.n) == 0; }

/* mustParseInt: strconv.Atoi (an optional sign, decimal digits, within int64), not negative. */
static bool parse_uint(slice s, uint64_t *out) {
    size_t i = 0;
    bool neg = false;
    if (s.n > 0 && (s.s[0] == '+' || s.s[0] == '-')) neg = s.s[i++] == '-';
    if (i == s.n) return false;
    uint64_t v = 0;
    for (; i < s.n; i++) {
        if (s.s[i] < '0' || s.s[i] > '9') return false;
        unsigned digit = (unsigned)(s.s[i] - '0');
        if (v > (UINT64_C(1) << 63) / 10) return false;
        v = v * 10 + digit;
        if (v > (UINT64_C(1) << 63)) return false;
    }
    if (neg) return v == 0 ? (*out = 0, true) : false; /* negative numbers are not allowed */
    if (v > INT64_MAX) return false;
    *out = v;
    return true;
}

/* parseIntOrName: a name of the field (any case), else a number. */
static bool parse_int_or_name(slice s, const bounds *r, uint64_t *out) {
    for (unsigned i = 0; r->names && r->names[i]; i++) {
        const char *name = r->names[i];
        if (*name && s.n == strlen(name)) {
            size_t j = 0;
            while (j < s.n && (s.s[j] | 0x20) == name[j]) j++;
            if (j == s.n) return *out = i, true;
        }
    }
    return parse_uint(s, out);
}

static uint64_t bits_of(uint64_t start, uint64_t end, uint64_t step) {
    uint64_t bits = 0;
    for (uint64_t i = start; i <= end; i += step) bits |= UINT64_C(1) << i;
    return bits;
}

/* getRange: `*`, `?`, N, N-M, each optionally /STEP ("N/STEP" is "N-max/STEP"). */
static bool parse_range(slice expr, const bounds *r, uint64_t *out) {
    slice parts[3]; /* expr split on '/': more than 2 is an error */
    size_t nparts = 0;
    for (size_t i = 0, from = 0; i <= expr.n; i++) {
        if (i == expr.n || expr.s[i] == '/') {
            if (nparts == 2) return false; /* too many slashes */
            parts[nparts++] = (slice){expr.s + from, i - from};
            from = i + 1;
        }
    }
    slice lh[3]; /* the range split on '-' */
    size_t nlh = 0;
    for (size_t i = 0, from = 0; i <= parts[0].n; i++) {
        if (i == parts[0].n || parts[0].s[i] == '-') {
            if (nlh == 3) break; /* enough to know there are too many */
            lh[nlh++] = (slice){parts[0].s + from, i - from};
            from = i + 1;
        }
    }
    bool single = nlh == 1;
    uint64_t start, end, step = 1, extra = 0;
    if (slice_is(lh[0], "*") || slice_is(lh[0], "?")) {
        start = r->min, end = r->max, extra = CRON_STAR; /* what follows a '-' is ignored, as in robfig */
    } else {
        if (!parse_int_or_name(lh[0], r, &start)) return false;
        if (nlh == 1) {
            end = start;
        } else if (nlh == 2) {
            if (!parse_int_or_name(lh[1], r, &end)) return false;
        } else {
            return false; /* too many hyphens */
        }
    }
    if (nparts == 2) {
        if (!parse_uint(parts[1], &step)) return false;
        if (single) end = r->max;
        if (step > 1) extra = 0;
    }
    if (start < r->min || end > r->max || start > end || step == 0) return false;
    *out = bits_of(start, end, step) | extra;
    return true;
}

/* getField: a comma-separated list of ranges (empty items are skipped: strings.FieldsFunc). */
static bool parse_field(slice field, const bounds *r, uint64_t *out) {
    uint64_t bits = 0;
    for (size_t i = 0, from = 0; i <= field.n; i++) {
        if (i == field.n || field.s[i] == ',') {
            if (i > from) {
                uint64_t b;
                if (!parse_range((slice){field.s + from, i - from}, r, &b)) return false;
                bits |= b;
            }
            from = i + 1;
        }
    }
    *out = bits;
    return true;
}

static uint64_t all(const bounds *r) { return bits_of(r->min, r->max, 1) | CRON_STAR; }

/* time.ParseDuration, in nanoseconds: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ */
static bool parse_duration(const char *s, int64_t *out) {
    static const struct {
        const char *unit;
        uint64_t ns;
    } units[] = {{"ns", 1}, {"us", 1000}, {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000}, {"ms", 1000000}, {"s", 1000000000}, {"m", UINT64_C(60000000000)}, {"h", UINT64_C(3600000000000)}};
    const uint64_t limit = UINT64_C(1) << 63;
    bool neg = false;
    if (*s == '-' || *s == '+') neg = *s++ == '-';
    if (strcmp(s, "0") == 0) return *out = 0, true;
    if (!*s) return false;
    uint64_t d = 0;
    while (*s) {
        if (!(*s == '.' || (*s >= '0' && *s <= '9'))) return false;
        uint64_t v = 0, f = 0;
        double scale = 1;
        const char *p = s;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (v > limit / 10) return false;
            v = v * 10 + (uint64_t)(*s - '0');
            if (v > limit) return false;
        }
        bool pre = s != p, post = false;
        if (*s == '.') {
            p = ++s;
            bool overflow = false;
            for (; *s >= '0' && *s <= '9'; s++) {
                if (overflow) continue;
                if (f > (limit - 1) / 10) {
                    overflow = true;
                    continue;
                }
                uint64_t y = f * 10 + (uint64_t)(*s - '0');
                if (y > limit) {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10;
            }
            post = s != p;
        }
        if (!pre && !post) return false;
        size_t n = 0;
        while (s[n] && s[n] != '.' && !(s[n] >= '0' && s[n] <= '9')) n++;
        if (n == 0) return false; /* missing unit */
        uint64_t unit = 0;
        for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
            if (strlen(units[i].unit) == n && memcmp(units[i].unit, s, n) == 0) unit = units[i].ns;
        }
        if (!unit) return false;
        s += n;
        if (v > limit / unit) return false;
        v *= unit;
        if (f > 0) {
            v += (uint64_t)((double)f * ((double)unit / scale));
            if (v > limit) return false;
        }
        d += v;
        if (d > limit) return false;
    }
    if (neg) return *out = (int64_t)(0 - d), true;
    if (d > limit - 1) return false;
    *out = (int64_t)d;
    return true;
}

/* parseDescriptor. */
static bool parse_descriptor(const char *spec, cron_schedule *out) {
    *out = (cron_schedule){.minute = 1, .hour = 1, .dom = all(&DOM), .month = all(&MONTHS), .dow = all(&DOW)};
    if (strcmp(spec, "@yearly") == 0 || strcmp(spec, "@annually") == 0) {
        out->dom = UINT64_C(1) << 1, out->month = UINT64_C(1) << 1;
    } else if (strcmp(spec, "@monthly") == 0) {
        out->dom = UINT64_C(1) << 1;
    } else if (strcmp(spec, "@weekly") == 0) {
        out->dow = 1;
    } else if (strcmp(spec, "@daily") == 0 || strcmp(spec, "@midnight") == 0) {
        /* the defaults */
    } else if (strcmp(spec, "@hourly") == 0) {
        out->hour = all(&HOURS);
    } else if (strncmp(spec, "@every ", 7) == 0) {
        int64_t ns;
        if (!parse_duration(spec + 7, &ns)) return false;
        /* cron.Every: at least a second, in whole seconds. */
        out->every = ns < 1000000000 ? 1 : ns / 1000000000;
    } else {
        return false;
    }
    return true;
}

bool cron_parse(const char *spec, cron_schedule *out, const char **error) {
    const char *unused;
    if (!error) error = &unused;
    if (!spec || !*spec) return *error = "empty spec string", false;
    /* The zone: the plugin has no zone database (the Go component embeds none either), so only
     * the names time.LoadLocation knows without one: "", "UTC", "Local" (UTC in the component). */
    char trimmed[4096];
    if (strncmp(spec, "TZ=", 3) == 0 || strncmp(spec, "CRON_TZ=", 8) == 0) {
        const char *space = strchr(spec, ' ');
        if (!space) return *error = "a time zone without a schedule", false; /* robfig panics */
        const char *zone = strchr(spec, '=') + 1;
        size_t zone_len = (size_t)(space - zone);
        if (!(zone_len == 0 || (zone_len == 3 && memcmp(zone, "UTC", 3) == 0) || (zone_len == 5 && memcmp(zone, "Local", 5) == 0))) {
            return *error = "provided bad location", false;
        }
        const char *rest = space, *end = rest + strlen(rest);
        for (size_t n; (n = space_len(rest)) > 0;) rest += n;
        for (;;) { /* a trailing space: 1 to 3 bytes that space_len takes */
            size_t n = end - rest >= 3 && space_len(end - 3) == 3 ? 3 : end - rest >= 2 && space_len(end - 2) == 2 ? 2 : end > rest && space_len(end - 1) == 1 ? 1 : 0;
            if (!n) break;
            end -= n;
        }
        size_t n = (size_t)(end - rest);
        if (n >= sizeof trimmed) return *error = "spec too long", false;
        memcpy(trimmed, rest, n);
        trimmed[n] = 0;
        spec = trimmed;
    }
    if (spec[0] == '@') {
        if (!parse_descriptor(spec, out)) return *error = "unrecognized descriptor", false;
        return true;
    }
    slice fields[6];
    size_t count = 0;
    for (const char *p = spec; *p;) {
        for (size_t n; (n = space_len(p)) > 0;) p += n;
        if (!*p) break;
        const char *from = p;
        while (*p && !space_len(p)) p++;
        if (count == 6) return *error = "expected exactly 5 fields", false;
        fields[count++] = (slice){from, (size_t)(p - from)};
    }
    if (count != 5) return *error = "expected exactly 5 fields", false;
    *out = (cron_schedule){0};
    if (!parse_field(fields[0], &MINUTES, &out->minute) || !parse_field(fields[1], &HOURS, &out->hour) || !parse_field(fields[2], &DOM, &out->dom) ||
        !parse_field(fields[3], &MONTHS, &out->month) || !parse_field(fields[4], &DOW, &out->dow)) {
        return *error = "a field does not parse", false;
    }
    return true;
}

/* ---- The next run (robfig's SpecSchedule.Next, in UTC) ------------------------------------------ */

static bool has(uint64_t bits, unsigned v) { return (bits >> v) & 1; }

/* The smallest value from `from` to `max` in bits, or -1. */
static int next_in(uint64_t bits, unsigned from, unsigned max) {
    for (unsigned v = from; v <= max; v++) {
        if (has(bits, v)) return (int)v;
    }
    return -1;
}

static bool day_matches(const cron_schedule *s, int64_t y, unsigned m, unsigned d) {
    int64_t z = utc_days_from_civil(y, m, d) + 4; /* 1970-01-01 was a Thursday (4) */
    unsigned weekday = (unsigned)(z - floor_div(z, 7) * 7);
    bool dom = has(s->dom, d), dow = has(s->dow, weekday);
    if ((s->dom & CRON_STAR) || (s->dow & CRON_STAR)) return dom && dow;
    return dom || dow;
}

bool cron_next(const cron_schedule *s, int64_t t, int64_t *next) {
    if (s->every > 0) {
        if (t > INT64_MAX - s->every) return false;
        return *next = t + s->every, true;
    }
    /* A field with no value at all (a list of nothing: ",") never matches. */
    if (next_in(s->minute, 0, 59) < 0 || next_in(s->hour, 0, 23) < 0 || next_in(s->month, 1, 12) < 0) return false;
    if (t > INT64_MAX - 120 || t < INT64_MIN / 2) return false;
    /* The first whole minute at or after the next second. */
    int64_t minutes = floor_div(t + 1 + 59, 60);
    int64_t days = floor_div(minutes, 1440);
    unsigned of_day = (unsigned)(minutes - days * 1440), hour = of_day / 60, minute = of_day % 60;
    int64_t year;
    unsigned month, day;
    utc_civil_from_days(days, &year, &month, &day);
    const int64_t year_limit = year + 400;
    /* Each step moves the first field that does not match to its next value (resetting the
     * smaller ones), or to the next value of the field above when it has no further one. */
    while (year <= year_limit) {
        int v;
        if (!has(s->month, month)) {
            day = 1, hour = 0, minute = 0;
            if ((v = next_in(s->month, month + 1, 12)) >= 0) {
                month = (unsigned)v;
            } else {
                month = 1, year++;
            }
        } else if (!day_matches(s, year, month, day)) {
            hour = 0, minute = 0;
            if (++day > utc_days_in_month(year, month)) goto next_month;
        } else if (!has(s->hour, hour)) {
            minute = 0;
            if ((v = next_in(s->hour, hour + 1, 23)) >= 0) {
                hour = (unsigned)v;
            } else {
                hour = 0;
                goto next_day;
            }
        } else if (!has(s->minute, minute)) {
            if ((v = next_in(s->minute, minute + 1, 59)) >= 0) {
                minute = (unsigned)v;
            } else {
                minute = 0;
                if (++hour < 24) continue;
                hour = 0;
                goto next_day;
            }
        } else {
            *next = utc_days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60;
            return true;
        }
        continue;
    next_day:
        if (++day <= utc_days_in_month(year, month)) continue;
    next_month:
        day = 1;
        if (++month > 12) month = 1, year++;
    }
    return false;
}
