/* json.c owns the per-call arena (kw_alloc and friends) and the JSON values that live in it:
 * the strict RFC 8259 parser, the compact printer, and the readers and writers of json.h.
 *
 * Recursion: the parser, printer, copy and equality recurse once per nesting level. None of the
 * recursive functions takes the address of a local, so on wasm32 their frames stay in wasm locals
 * (the engine's stack) and not on the small shadow stack in linear memory; the parser stops at
 * 512 levels. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kw_member {
    char *key; /* NUL-terminated; keylen counts bytes (a key may hold NUL) */
    size_t keylen;
    kw_value *value;
} kw_member;

struct kw_value {
    kw_type type;
    union {
        bool b;
        int64_t i;
        double d;
        struct { char *s; size_t len; } str;
        struct { kw_value **items; size_t len, cap; } arr;
        struct { kw_member *members; size_t len, cap; } obj;
    } u;
};

/* ---- The arena ---------------------------------------------------------------------------- */

#define BLOCK_SIZE (64u * 1024u)
#define BIG_REQUEST (BLOCK_SIZE / 4) /* larger requests get a block of their own */

typedef struct block {
    struct block *next;
    size_t size, used; /* bytes of data after the header */
} block;

#define HEADER ((sizeof(block) + 15) & ~(size_t)15)
#define DATA(b) ((char *)(b) + HEADER)

static block *head;   /* the block being filled; older and dedicated blocks follow */
static size_t handed; /* bytes handed out since the last reset (kw_arena_bytes) */

static block *new_block(size_t size) {
    if (size > SIZE_MAX - HEADER) abort();
    block *b = malloc(HEADER + size);
    if (!b) abort();
    b->next = NULL;
    b->size = size;
    b->used = 0;
    return b;
}

void *kw_alloc(size_t size) {
    if (size > SIZE_MAX - 8) abort();
    size = (size + 7) & ~(size_t)7;
    if (size == 0) size = 8; /* distinct pointers, never NULL */
    handed += size;
    if (head && head->size - head->used >= size) {
        void *p = DATA(head) + head->used;
        head->used += size;
        return p;
    }
    if (size > BIG_REQUEST) {
        /* Behind the head, so the head's free space stays in use. */
        block *b = new_block(size);
        b->used = size;
        if (head) {
            b->next = head->next;
            head->next = b;
        } else {
            head = b;
        }
        return DATA(b);
    }
    block *b = new_block(BLOCK_SIZE);
    b->next = head;
    head = b;
    b->used = size;
    return DATA(b);
}

/* Grows an arena allocation of old bytes to size bytes: in place when it was the last one made
 * from the head block, else by copying (the old bytes stay in the arena until the reset). */
static void *arena_grow(void *p, size_t old, size_t size) {
    old = (old + 7) & ~(size_t)7;
    if (p && head && (char *)p + old == DATA(head) + head->used && size > old &&
        (size_t)((char *)p - DATA(head)) + size <= head->size) {
        size_t more = ((size + 7) & ~(size_t)7) - old;
        head->used += more;
        handed += more;
        return p;
    }
    void *q = kw_alloc(size);
    if (old) memcpy(q, p, old < size ? old : size);
    return q;
}

char *kw_strndup(const char *s, size_t n) {
    char *p = kw_alloc(n + 1);
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *kw_strdup(const char *s) { return kw_strndup(s, strlen(s)); }

char *kw_sprintf(const char *format, ...) {
    va_list ap, ap2;
    va_start(ap, format);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, format, ap);
    va_end(ap);
    if (n < 0) abort(); /* an encoding error: the format is the caller's bug */
    char *p = kw_alloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, format, ap2);
    va_end(ap2);
    return p;
}

void kw_arena_reset(void) {
    /* Keep one ordinary block, so a call's small allocations do not go back to malloc. */
    block *keep = NULL;
    while (head) {
        block *next = head->next;
        if (!keep && head->size == BLOCK_SIZE) {
            keep = head;
        } else {
            free(head);
        }
        head = next;
    }
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
    }
    head = keep;
    handed = 0;
}

size_t kw_arena_bytes(void) { return handed; }

/* ---- Making values -------------------------------------------------------------------------- */

static kw_value *new_value(kw_value init) {
    kw_value *v = kw_alloc(sizeof *v);
    *v = init;
    return v;
}

kw_value *kw_null(void) { return new_value((kw_value){KW_NULL, {0}}); }
kw_value *kw_bool(bool b) { return new_value((kw_value){KW_BOOL, {.b = b}}); }
kw_value *kw_int(int64_t i) { return new_value((kw_value){KW_INT, {.i = i}}); }
kw_value *kw_double(double d) { return new_value((kw_value){KW_DOUBLE, {.d = d}}); }
kw_value *kw_array(void) { return new_value((kw_value){KW_ARRAY, {0}}); }
kw_value *kw_object(void) { return new_value((kw_value){KW_OBJECT, {0}}); }

static kw_value *string_value(char *s, size_t n) {
    return new_value((kw_value){KW_STRING, {.str = {s, n}}});
}

kw_value *kw_stringn(const char *s, size_t n) {
    return s ? string_value(kw_strndup(s, n), n) : kw_null();
}
kw_value *kw_string(const char *s) { return s ? kw_stringn(s, strlen(s)) : kw_null(); }

/* Appends a member without looking for the key (callers did). */
static void add_member(kw_value *o, char *key, size_t keylen, kw_value *value) {
    if (o->u.obj.len == o->u.obj.cap) {
        size_t cap = o->u.obj.cap ? o->u.obj.cap * 2 : 4;
        o->u.obj.members = arena_grow(o->u.obj.members, o->u.obj.cap * sizeof(kw_member),
                                      cap * sizeof(kw_member));
        o->u.obj.cap = cap;
    }
    o->u.obj.members[o->u.obj.len++] = (kw_member){key, keylen, value};
}

kw_value *kw_copy(const kw_value *v) {
    if (!v) return kw_null();
    switch (v->type) {
    case KW_STRING:
        return kw_stringn(v->u.str.s, v->u.str.len);
    case KW_ARRAY: {
        kw_value *a = kw_array();
        for (size_t i = 0; i < v->u.arr.len; i++) kw_push(a, kw_copy(v->u.arr.items[i]));
        return a;
    }
    case KW_OBJECT: {
        kw_value *o = kw_object();
        for (size_t i = 0; i < v->u.obj.len; i++) {
            const kw_member *m = &v->u.obj.members[i];
            add_member(o, kw_strndup(m->key, m->keylen), m->keylen, kw_copy(m->value));
        }
        return o;
    }
    default:
        return new_value(*v);
    }
}

/* ---- Reading --------------------------------------------------------------------------------- */

kw_type kw_type_of(const kw_value *v) { return v ? v->type : KW_NULL; }

static kw_member *find(const kw_value *o, const char *key, size_t keylen) {
    if (!o || o->type != KW_OBJECT || !key) return NULL;
    for (size_t i = 0; i < o->u.obj.len; i++) {
        kw_member *m = &o->u.obj.members[i];
        if (m->keylen == keylen && memcmp(m->key, key, keylen) == 0) return m;
    }
    return NULL;
}

kw_value *kw_get(const kw_value *object, const char *key) {
    kw_member *m = key ? find(object, key, strlen(key)) : NULL;
    return m ? m->value : NULL;
}

kw_value *kw_path(const kw_value *object, ...) {
    va_list ap;
    va_start(ap, object);
    kw_value *v = (kw_value *)object;
    for (const char *key; v && (key = va_arg(ap, const char *));) v = kw_get(v, key);
    va_end(ap);
    return v;
}

size_t kw_len(const kw_value *v) {
    if (!v) return 0;
    if (v->type == KW_ARRAY) return v->u.arr.len;
    if (v->type == KW_OBJECT) return v->u.obj.len;
    return 0;
}

kw_value *kw_at(const kw_value *v, size_t i) {
    if (i >= kw_len(v)) return NULL;
    return v->type == KW_ARRAY ? v->u.arr.items[i] : v->u.obj.members[i].value;
}

const char *kw_key_at(const kw_value *object, size_t i) {
    if (kw_type_of(object) != KW_OBJECT || i >= object->u.obj.len) return NULL;
    return object->u.obj.members[i].key;
}

const char *kw_strn(const kw_value *v, size_t *len) {
    if (!v || v->type != KW_STRING) return NULL;
    if (len) *len = v->u.str.len;
    return v->u.str.s;
}

const char *kw_str(const kw_value *v) { return kw_strn(v, NULL); }

const char *kw_str_or(const kw_value *v, const char *fallback) {
    const char *s = kw_str(v);
    return s ? s : fallback;
}

/* Whether d is integral and in int64's range (-2^63 <= d < 2^63). */
static bool integral(double d) {
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == floor(d);
}

bool kw_as_int(const kw_value *v, int64_t *out) {
    kw_type t = kw_type_of(v);
    if (t != KW_INT && !(t == KW_DOUBLE && integral(v->u.d))) return false;
    if (out) *out = t == KW_INT ? v->u.i : (int64_t)v->u.d;
    return true;
}

int64_t kw_int_or(const kw_value *v, int64_t fallback) {
    int64_t i;
    return kw_as_int(v, &i) ? i : fallback;
}

bool kw_as_double(const kw_value *v, double *out) {
    kw_type t = kw_type_of(v);
    if (t != KW_INT && t != KW_DOUBLE) return false;
    if (out) *out = t == KW_INT ? (double)v->u.i : v->u.d;
    return true;
}

bool kw_bool_or(const kw_value *v, bool fallback) {
    return kw_type_of(v) == KW_BOOL ? v->u.b : fallback;
}

/* NULL compares as JSON null, as kw_type_of says. */
bool kw_equal(const kw_value *a, const kw_value *b) {
    kw_type ta = kw_type_of(a), tb = kw_type_of(b);
    /* Exactly: comparing as doubles would make 2^53+1 equal 2^53. */
    if (ta == KW_INT && tb == KW_DOUBLE) return integral(b->u.d) && (int64_t)b->u.d == a->u.i;
    if (ta == KW_DOUBLE && tb == KW_INT) return kw_equal(b, a);
    if (ta != tb) return false;
    switch (ta) {
    case KW_NULL: return true;
    case KW_BOOL: return a->u.b == b->u.b;
    case KW_INT: return a->u.i == b->u.i;
    case KW_DOUBLE: return a->u.d == b->u.d;
    case KW_STRING:
        return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case KW_ARRAY:
        if (a->u.arr.len != b->u.arr.len) return false;
        for (size_t i = 0; i < a->u.arr.len; i++)
            if (!kw_equal(a->u.arr.items[i], b->u.arr.items[i])) return false;
        return true;
    case KW_OBJECT:
        /* Keys are unique (kw_set and the parser see to it), so same count + each found = equal. */
        if (a->u.obj.len != b->u.obj.len) return false;
        for (size_t i = 0; i < a->u.obj.len; i++) {
            const kw_member *m = &a->u.obj.members[i];
            const kw_member *n = find(b, m->key, m->keylen);
            if (!n || !kw_equal(m->value, n->value)) return false;
        }
        return true;
    }
    return false;
}

/* ---- Changing values ----------------------------------------------------------------------- */

kw_value *kw_set(kw_value *object, const char *key, kw_value *value) {
    if (kw_type_of(object) != KW_OBJECT || !key) return NULL;
    if (!value) value = kw_null();
    size_t keylen = strlen(key);
    kw_member *m = find(object, key, keylen);
    if (m) {
        m->value = value;
    } else {
        add_member(object, kw_strndup(key, keylen), keylen, value);
    }
    return value;
}

kw_value *kw_set_path(kw_value *object, kw_value *value, ...) {
    if (kw_type_of(object) != KW_OBJECT) return NULL;
    va_list ap;
    va_start(ap, value);
    const char *key = va_arg(ap, const char *);
    if (!key) {
        va_end(ap);
        return NULL;
    }
    for (const char *next; (next = va_arg(ap, const char *)); key = next) {
        kw_value *child = kw_get(object, key);
        object = kw_type_of(child) == KW_OBJECT ? child : kw_set(object, key, kw_object());
    }
    va_end(ap);
    return kw_set(object, key, value);
}

bool kw_remove(kw_value *object, const char *key) {
    kw_member *m = key ? find(object, key, strlen(key)) : NULL;
    if (!m) return false;
    kw_member *end = object->u.obj.members + object->u.obj.len;
    memmove(m, m + 1, (size_t)(end - m - 1) * sizeof *m);
    object->u.obj.len--;
    return true;
}

bool kw_remove_at(kw_value *array, size_t i) {
    if (kw_type_of(array) != KW_ARRAY || i >= array->u.arr.len) return false;
    kw_value **items = array->u.arr.items;
    memmove(items + i, items + i + 1, (array->u.arr.len - i - 1) * sizeof *items);
    array->u.arr.len--;
    return true;
}

kw_value *kw_push(kw_value *array, kw_value *value) {
    if (kw_type_of(array) != KW_ARRAY) return NULL;
    if (!value) value = kw_null();
    if (array->u.arr.len == array->u.arr.cap) {
        size_t cap = array->u.arr.cap ? array->u.arr.cap * 2 : 4;
        array->u.arr.items = arena_grow(array->u.arr.items, array->u.arr.cap * sizeof(kw_value *),
                                        cap * sizeof(kw_value *));
        array->u.arr.cap = cap;
    }
    array->u.arr.items[array->u.arr.len++] = value;
    return value;
}

/* ---- Parsing ----------------------------------------------------------------------------------
 * Strict RFC 8259. Bytes of strings must be valid UTF-8 (no overlongs, no UTF-8-encoded
 * surrogates, nothing past U+10FFFF) and are rejected otherwise, like lone \u surrogates: every
 * parsed string is then valid UTF-8, which the host and the API server expect. */

#define MAX_DEPTH 512

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    int depth;
    const char *what; /* the first error, at byte at */
    size_t at;
    char *str; /* the last string parse_string decoded (kept here so no local's address is taken) */
    size_t strlen;
} parser;

/* Records the first error; any at the end of the text is "unexpected end of input". */
static kw_value *fail(parser *p, size_t at, const char *what) {
    if (!p->what) {
        p->what = at >= p->len ? "unexpected end of input" : what;
        p->at = at;
    }
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static bool is_digit(parser *p, size_t i) { return i < p->len && p->s[i] >= '0' && p->s[i] <= '9'; }

static kw_value *parse_number(parser *p) {
    size_t start = p->pos, i = start;
    bool neg = p->s[i] == '-', integer = true;
    if (neg) i++;
    if (!is_digit(p, i)) return fail(p, i, "expected digit");
    if (p->s[i] == '0' && is_digit(p, i + 1)) return fail(p, i, "leading zero in number");
    while (is_digit(p, i)) i++;
    if (i < p->len && p->s[i] == '.') {
        integer = false;
        if (!is_digit(p, ++i)) return fail(p, i, "expected digit");
        while (is_digit(p, i)) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integer = false;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (!is_digit(p, i)) return fail(p, i, "expected digit");
        while (is_digit(p, i)) i++;
    }
    p->pos = i;
    if (integer) {
        /* Magnitude up to 2^63 for a negative number, 2^63-1 otherwise, else a double. */
        uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, m = 0;
        size_t j = start + neg;
        for (; j < i; j++) {
            unsigned d = p->s[j] - '0';
            if (m > (limit - d) / 10) break;
            m = m * 10 + d;
        }
        if (j == i) return kw_int(neg ? (int64_t)(0 - m) : (int64_t)m);
    }
    /* The grammar is checked, so strtod reads the whole token (no end pointer needed). strtod and
     * the printer's %g expect the C locale's '.', which plugins keep (nothing calls setlocale). */
    double d = strtod(kw_strndup((const char *)p->s + start, i - start), NULL);
    if (isinf(d)) return fail(p, start, "number out of range");
    return kw_double(d);
}

static int hex4(parser *p, size_t i) {
    if (i + 4 > p->len) return -1;
    int v = 0;
    for (size_t k = i; k < i + 4; k++) {
        unsigned char c = p->s[k];
        int h = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* The length of the valid UTF-8 sequence at s (n bytes available), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t k;
    uint32_t cp;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) k = 2, cp = s[0] & 0x1F;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) k = 3, cp = s[0] & 0x0F;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) k = 4, cp = s[0] & 0x07;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return k;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the string at p->pos (its opening quote) into p->str and p->strlen. */
static bool parse_string(parser *p) {
    const unsigned char *s = p->s;
    size_t i = p->pos + 1, end = i;
    /* Find the closing quote first: the decoded text is never longer than the raw one. */
    while (end < p->len && s[end] != '"') end += s[end] == '\\' ? 2 : 1;
    if (end > p->len) end = p->len;
    char *out = kw_alloc(end - i + 1);
    size_t n = 0;
    while (i < end) {
        unsigned char c = s[i];
        if (c == '\\') {
            if (i + 1 >= p->len) return fail(p, p->len, ""), false;
            char e = (char)s[i + 1];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *hit;
            if (e && (hit = strchr(from, e))) {
                out[n++] = to[hit - from];
                i += 2;
                continue;
            }
            if (e != 'u') return fail(p, i, "invalid escape"), false;
            int cp = hex4(p, i + 2);
            if (cp < 0) return fail(p, i, "invalid \\u escape"), false;
            size_t width = 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                bool pair = i + 8 <= p->len && s[i + 6] == '\\' && s[i + 7] == 'u';
                int lo = pair ? hex4(p, i + 8) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, i, "lone surrogate"), false;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                width = 12;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(p, i, "lone surrogate"), false;
            }
            n += put_utf8(out + n, (uint32_t)cp);
            i += width;
        } else if (c < 0x20) {
            return fail(p, i, "control character in string"), false;
        } else if (c < 0x80) {
            out[n++] = (char)c;
            i++;
        } else {
            size_t k = utf8_len(s + i, p->len - i);
            if (!k) return fail(p, i, "invalid UTF-8"), false;
            memcpy(out + n, s + i, k);
            n += k;
            i += k;
        }
    }
    if (end >= p->len) return fail(p, p->len, ""), false;
    out[n] = '\0';
    p->str = out;
    p->strlen = n;
    p->pos = end + 1;
    return true;
}

static kw_value *parse_value(parser *p);

static kw_value *parse_array(parser *p) {
    kw_value *a = kw_array();
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        return a;
    }
    for (;;) {
        kw_value *v = parse_value(p);
        if (!v) return NULL;
        kw_push(a, v);
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
        } else if (p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
            return a;
        } else {
            return fail(p, p->pos, "expected ',' or ']'");
        }
    }
}

static kw_value *parse_object(parser *p) {
    kw_value *o = kw_object();
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        return o;
    }
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, p->pos, "expected string key");
        if (!parse_string(p)) return NULL;
        char *key = p->str;
        size_t keylen = p->strlen;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':') return fail(p, p->pos, "expected ':'");
        p->pos++;
        kw_value *v = parse_value(p);
        if (!v) return NULL;
        /* A repeated key keeps its first place and takes the last value, as kw_set does. */
        kw_member *m = find(o, key, keylen);
        if (m) {
            m->value = v;
        } else {
            add_member(o, key, keylen, v);
        }
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
        } else if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            return o;
        } else {
            return fail(p, p->pos, "expected ',' or '}'");
        }
    }
}

static kw_value *parse_literal(parser *p, const char *word, kw_value *v) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, p->pos, "invalid literal");
    p->pos += n;
    return v;
}

static kw_value *parse_value(parser *p) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, p->pos, "");
    kw_value *v;
    switch (p->s[p->pos]) {
    case '{':
    case '[':
        if (p->depth == MAX_DEPTH) return fail(p, p->pos, "nesting deeper than 512");
        p->depth++;
        v = p->s[p->pos] == '{' ? parse_object(p) : parse_array(p);
        p->depth--;
        return v;
    case '"':
        return parse_string(p) ? string_value(p->str, p->strlen) : NULL;
    case 't': return parse_literal(p, "true", kw_bool(true));
    case 'f': return parse_literal(p, "false", kw_bool(false));
    case 'n': return parse_literal(p, "null", kw_null());
    default:
        if (p->s[p->pos] == '-' || is_digit(p, p->pos)) return parse_number(p);
        return fail(p, p->pos, "expected a value");
    }
}

kw_value *kw_parse(const char *text, size_t len, const char **error) {
    parser p = {.s = (const unsigned char *)(text ? text : ""), .len = text ? len : 0};
    kw_value *v = parse_value(&p);
    if (v) {
        skip_ws(&p);
        if (p.pos < p.len) v = fail(&p, p.pos, "unexpected character after the value");
    }
    if (error) *error = v ? NULL : kw_sprintf("invalid JSON at byte %zu: %s", p.at, p.what);
    return v;
}

/* ---- Printing -------------------------------------------------------------------------------
 * Into a malloc'd buffer that realloc can grow in place, copied into the arena once at the end. */

typedef struct out {
    char *buf;
    size_t len, cap;
} out;

static void put(out *o, const char *s, size_t n) {
    if (o->cap - o->len < n + 1) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap - o->len < n + 1) {
            if (cap > SIZE_MAX / 2) abort();
            cap *= 2;
        }
        o->buf = realloc(o->buf, cap);
        if (!o->buf) abort();
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

__attribute__((noinline)) static void put_string(out *o, const char *s, size_t n) {
    put(o, "\"", 1);
    size_t run = 0; /* bytes before s[i] that print as they are */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                        : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : NULL;
        if (!esc && c >= 0x20) continue;
        put(o, s + run, i - run);
        run = i + 1;
        if (esc) {
            put(o, esc, 2);
        } else {
            char u[7];
            snprintf(u, sizeof u, "\\u%04x", c);
            put(o, u, 6);
        }
    }
    put(o, s + run, n - run);
    put(o, "\"", 1);
}

/* noinline: keeps b[] out of the recursive print_value's frame (see the top). */
__attribute__((noinline)) static void put_double(out *o, double d) {
    if (isnan(d) || isinf(d)) {
        put(o, "null", 4);
        return;
    }
    char b[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(b, sizeof b, "%.*g", digits, d);
        if (strtod(b, NULL) == d) break;
    }
    put(o, b, strlen(b));
}

__attribute__((noinline)) static void put_int(out *o, int64_t i) {
    char b[24];
    put(o, b, (size_t)snprintf(b, sizeof b, "%lld", (long long)i));
}

static void print_value(out *o, const kw_value *v) {
    switch (kw_type_of(v)) {
    case KW_NULL: put(o, "null", 4); break;
    case KW_BOOL: v->u.b ? put(o, "true", 4) : put(o, "false", 5); break;
    case KW_INT: put_int(o, v->u.i); break;
    case KW_DOUBLE: put_double(o, v->u.d); break;
    case KW_STRING: put_string(o, v->u.str.s, v->u.str.len); break;
    case KW_ARRAY:
        put(o, "[", 1);
        for (size_t i = 0; i < v->u.arr.len; i++) {
            if (i) put(o, ",", 1);
            print_value(o, v->u.arr.items[i]);
        }
        put(o, "]", 1);
        break;
    case KW_OBJECT:
        put(o, "{", 1);
        for (size_t i = 0; i < v->u.obj.len; i++) {
            if (i) put(o, ",", 1);
            put_string(o, v->u.obj.members[i].key, v->u.obj.members[i].keylen);
            put(o, ":", 1);
            print_value(o, v->u.obj.members[i].value);
        }
        put(o, "}", 1);
        break;
    }
}

char *kw_print(const kw_value *v, size_t *len) {
    out o = {0};
    print_value(&o, v);
    char *s = kw_strndup(o.buf, o.len);
    free(o.buf);
    if (len) *len = o.len;
    return s;
}
