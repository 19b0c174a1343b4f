/* Native unit tests of json.c (the arena and JSON values). */
#include "../src/json.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kw_value *parse(const char *text) { return kw_parse(text, strlen(text), NULL); }

static const char *reprint(const char *text) {
    kw_value *v = parse(text);
    return v ? kw_print(v, NULL) : "(parse error)";
}

/* A Deployment as the API server would send it, compact, in the printer's own form. */
static const char deployment[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
    "\"namespace\":\"default\",\"uid\":\"6f1c2a9e-1d2b-4c3d-9e8f-0a1b2c3d4e5f\","
    "\"resourceVersion\":\"123456\",\"generation\":4,\"creationTimestamp\":\"2024-05-01T12:00:00Z\","
    "\"labels\":{\"app\":\"web\",\"app.kubernetes.io/name\":\"web\"},"
    "\"annotations\":{\"description\":\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80\","
    "\"note\":\"say \\\"hi\\\"\\n\\tthen C:\\\\temp\\u0001\\u001f\x7f\","
    "\"kubectl.kubernetes.io/last-applied-configuration\":\"{\\\"spec\\\":{}}\\n\"},"
    "\"ownerReferences\":[],\"finalizers\":[\"example.com/cleanup\"]},"
    "\"spec\":{\"replicas\":3,\"revisionHistoryLimit\":10,\"paused\":false,"
    "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
    "\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":\"25%\",\"maxUnavailable\":1}},"
    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"},\"annotations\":null},"
    "\"spec\":{\"containers\":[{\"name\":\"nginx\",\"image\":\"nginx:1.25\","
    "\"args\":[\"--port\",\"8080\",\"--ratio\",\"0.75\"],"
    "\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"},{\"containerPort\":9090,\"name\":\"metrics\"}],"
    "\"env\":[{\"name\":\"GREETING\",\"value\":\"Gr\xc3\xbc\xc3\x9f" "e\"},{\"name\":\"EMPTY\",\"value\":\"\"}],"
    "\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"128Mi\"},\"requests\":{}},"
    "\"readinessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080},\"periodSeconds\":5,"
    "\"successThreshold\":1,\"failureThreshold\":3}}],"
    "\"terminationGracePeriodSeconds\":30,\"weight\":0.5,\"ratio\":1.25e-07,\"big\":-9223372036854775808,"
    "\"nothing\":null,\"yes\":true}}},"
    "\"status\":{\"observedGeneration\":4,\"replicas\":3,\"readyReplicas\":3,"
    "\"conditions\":[{\"type\":\"Available\",\"status\":\"True\",\"reason\":\"MinimumReplicasAvailable\"},"
    "{\"type\":\"Progressing\",\"status\":\"True\",\"message\":\"ReplicaSet \\\"web-5d4f\\\" has "
    "successfully progressed.\"}]}}";

static void test_deployment_round_trip(void) {
    const char *error = "unset";
    kw_value *d = kw_parse(deployment, strlen(deployment), &error);
    CHECK(d != NULL);
    CHECK(error == NULL);
    size_t len = 0;
    CHECK_STR(kw_print(d, &len), deployment);
    CHECK(len == strlen(deployment));
    CHECK(kw_int_or(kw_path(d, "spec", "replicas", NULL), 0) == 3);
    kw_value *c = kw_at(kw_path(d, "spec", "template", "spec", "containers", NULL), 0);
    CHECK_STR(kw_str(kw_get(c, "image")), "nginx:1.25");
    CHECK(kw_int_or(kw_get(kw_at(kw_get(c, "ports"), 1), "containerPort"), 0) == 9090);
    CHECK_STR(kw_str(kw_path(d, "metadata", "annotations", "description", NULL)),
              "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80");
    CHECK_STR(kw_str(kw_path(d, "metadata", "annotations", "note", NULL)),
              "say \"hi\"\n\tthen C:\\temp\x01\x1f\x7f");
    CHECK(kw_type_of(kw_path(d, "spec", "template", "metadata", "annotations", NULL)) == KW_NULL);
    CHECK(kw_path(d, "spec", "template", "metadata", "annotations", "x", NULL) == NULL);
    CHECK(strcmp(kw_key_at(d, 3), "spec") == 0);
    /* A copy prints the same and compares equal; a changed copy does not. */
    kw_value *copy = kw_copy(d);
    CHECK_STR(kw_print(copy, NULL), deployment);
    CHECK(kw_equal(d, copy));
    kw_set_path(copy, kw_int(4), "spec", "replicas", NULL);
    CHECK(!kw_equal(d, copy));
}

static void test_pretty_input_prints_compact(void) {
    /* The same kind of object, spaced out and with escapes the printer does not use. */
    const char *pretty =
        " \r\n\t{ \"metadata\" : { \"name\" : \"caf\\u00e9\" , \"rocket\":\"\\ud83d\\ude80\",\n"
        "   \"slash\": \"a\\/b\", \"ctl\": \"\\b\\f\\u007f\\u0000end\" } ,\n"
        "  \"spec\" : { \"replicas\" : 3 , \"ports\" : [ 80 , 443 ] , \"empty\" : [ ] , \"o\" : { } } }  \n";
    CHECK_STR(reprint(pretty), "{\"metadata\":{\"name\":\"caf\xc3\xa9\",\"rocket\":\"\xf0\x9f\x9a\x80\","
                               "\"slash\":\"a/b\",\"ctl\":\"\\b\\f\x7f\\u0000end\"},"
                               "\"spec\":{\"replicas\":3,\"ports\":[80,443],\"empty\":[],\"o\":{}}}");
    size_t n = 0;
    const char *s = kw_strn(kw_path(parse(pretty), "metadata", "ctl", NULL), &n);
    CHECK(n == 7 && memcmp(s, "\b\f\x7f\0end", 7) == 0);
}

static void test_parse_errors(void) {
    static const struct { const char *text; size_t len; const char *error; } cases[] = {
#define C(text, error) {text, sizeof(text) - 1, error}
        C("", "invalid JSON at byte 0: unexpected end of input"),
        C("  \n", "invalid JSON at byte 3: unexpected end of input"),
        C("[1", "invalid JSON at byte 2: unexpected end of input"),
        C("{\"a\":", "invalid JSON at byte 5: unexpected end of input"),
        C("\"abc", "invalid JSON at byte 4: unexpected end of input"),
        C("\"abc\\", "invalid JSON at byte 5: unexpected end of input"),
        C("[1,]", "invalid JSON at byte 3: expected a value"),
        C("[,1]", "invalid JSON at byte 1: expected a value"),
        C("+1", "invalid JSON at byte 0: expected a value"),
        C(".5", "invalid JSON at byte 0: expected a value"),
        C("'a'", "invalid JSON at byte 0: expected a value"),
        C("{\"a\":1,}", "invalid JSON at byte 7: expected string key"),
        C("{1:2}", "invalid JSON at byte 1: expected string key"),
        C("{\"a\" 1}", "invalid JSON at byte 5: expected ':'"),
        C("{\"a\":1 \"b\":2}", "invalid JSON at byte 7: expected ',' or '}'"),
        C("[1 2]", "invalid JSON at byte 3: expected ',' or ']'"),
        C("[truex]", "invalid JSON at byte 5: expected ',' or ']'"),
        C("01", "invalid JSON at byte 0: leading zero in number"),
        C("[-012]", "invalid JSON at byte 2: leading zero in number"),
        C("-", "invalid JSON at byte 1: unexpected end of input"),
        C("-a", "invalid JSON at byte 1: expected digit"),
        C("[1.]", "invalid JSON at byte 3: expected digit"),
        C("[1e]", "invalid JSON at byte 3: expected digit"),
        C("[1E+]", "invalid JSON at byte 4: expected digit"),
        C("[1e400]", "invalid JSON at byte 1: number out of range"),
        C("-1e400", "invalid JSON at byte 0: number out of range"),
        C("tru", "invalid JSON at byte 0: invalid literal"),
        C("[nulL]", "invalid JSON at byte 1: invalid literal"),
        C("True", "invalid JSON at byte 0: expected a value"),
        C("\"a\x01\"", "invalid JSON at byte 2: control character in string"),
        C("\"a\tb\"", "invalid JSON at byte 2: control character in string"),
        C("\"a\nb\"", "invalid JSON at byte 2: control character in string"),
        C("\"\\x\"", "invalid JSON at byte 1: invalid escape"),
        C("\"\\U0041\"", "invalid JSON at byte 1: invalid escape"),
        C("\"\\u12G4\"", "invalid JSON at byte 1: invalid \\u escape"),
        C("\"\\u12\"", "invalid JSON at byte 1: invalid \\u escape"),
        C("\"ab\\ud800\"", "invalid JSON at byte 3: lone surrogate"),
        C("\"\\udc00\\ud800\"", "invalid JSON at byte 1: lone surrogate"),
        C("\"\\ud800\\u0041\"", "invalid JSON at byte 1: lone surrogate"),
        C("[\"ab\\ud83dx\"]", "invalid JSON at byte 4: lone surrogate"),
        C("\"\xff\"", "invalid JSON at byte 1: invalid UTF-8"),
        C("\"ok \xc0\xaf\"", "invalid JSON at byte 4: invalid UTF-8"),
        C("\"\xed\xa0\x80\"", "invalid JSON at byte 1: invalid UTF-8"),
        C("\"\xf4\x90\x80\x80\"", "invalid JSON at byte 1: invalid UTF-8"),
        C("\"\xe2\x82\"", "invalid JSON at byte 1: invalid UTF-8"),
        C("\"\x80\"", "invalid JSON at byte 1: invalid UTF-8"),
        C("1 2", "invalid JSON at byte 2: unexpected character after the value"),
        C("{}x", "invalid JSON at byte 2: unexpected character after the value"),
        C("nullx", "invalid JSON at byte 4: unexpected character after the value"),
        C("0\0", "invalid JSON at byte 1: unexpected character after the value"),
        C("\xef\xbb\xbf{}", "invalid JSON at byte 0: expected a value"),
#undef C
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *error = NULL;
        kw_value *v = kw_parse(cases[i].text, cases[i].len, &error);
        if (v) {
            snprintf(why, sizeof why, "case %zu parsed, want %s", i, cases[i].error);
            return;
        }
        CHECK_STR(error, cases[i].error);
    }
    CHECK(kw_parse("[", 1, NULL) == NULL); /* error may be NULL */
    CHECK(kw_parse(NULL, 0, NULL) == NULL);
}

static char *nested(const char *open, const char *close, int depth) {
    size_t o = strlen(open), c = strlen(close);
    char *s = kw_alloc((o + c) * (size_t)depth + 2), *p = s;
    for (int i = 0; i < depth; i++, p += o) memcpy(p, open, o);
    *p++ = '1';
    for (int i = 0; i < depth; i++, p += c) memcpy(p, close, c);
    *p = '\0';
    return s;
}

static void test_depth_limit(void) {
    const char *error = NULL;
    char *ok = nested("[", "]", 512);
    CHECK_STR(reprint(ok), ok);
    CHECK(kw_parse(ok, strlen(ok), &error) != NULL && error == NULL);
    char *deep = nested("[", "]", 513);
    CHECK(kw_parse(deep, strlen(deep), &error) == NULL);
    CHECK_STR(error, "invalid JSON at byte 512: nesting deeper than 512");
    char *objects = nested("{\"a\":", "}", 512);
    CHECK_STR(reprint(objects), objects);
    objects = nested("{\"a\":", "}", 513);
    CHECK(kw_parse(objects, strlen(objects), &error) == NULL);
    CHECK_STR(error, "invalid JSON at byte 2560: nesting deeper than 512");
    char *wide = nested("[[],", "]", 511); /* siblings do not add depth */
    CHECK(parse(wide) != NULL);
}

static void test_int64_edges(void) {
    int64_t i = 0;
    kw_value *v = parse("9223372036854775807");
    CHECK(kw_type_of(v) == KW_INT && kw_as_int(v, &i) && i == INT64_MAX);
    v = parse("-9223372036854775808");
    CHECK(kw_type_of(v) == KW_INT && kw_as_int(v, &i) && i == INT64_MIN);
    CHECK_STR(kw_print(v, NULL), "-9223372036854775808");
    v = parse("9223372036854775808");
    CHECK(kw_type_of(v) == KW_DOUBLE && !kw_as_int(v, &i));
    double d = 0;
    CHECK(kw_as_double(v, &d) && d == 9223372036854775808.0);
    CHECK_STR(kw_print(v, NULL), "9.223372036854776e+18");
    v = parse("-9223372036854775809");
    CHECK(kw_type_of(v) == KW_DOUBLE && kw_as_int(v, &i) && i == INT64_MIN); /* rounds to -2^63 */
    CHECK(kw_type_of(parse("123456789012345678901234567890")) == KW_DOUBLE);
    CHECK(kw_type_of(parse("1.0")) == KW_DOUBLE && kw_int_or(parse("1.0"), 0) == 1);
    CHECK(kw_type_of(parse("1e2")) == KW_DOUBLE && kw_int_or(parse("1e2"), 0) == 100);
    CHECK(kw_int_or(parse("1.5"), -1) == -1);
    CHECK(kw_int_or(parse("1e19"), -1) == -1);
    v = parse("-0");
    CHECK(kw_type_of(v) == KW_INT && kw_int_or(v, 7) == 0);
    CHECK(kw_type_of(parse("0")) == KW_INT && kw_type_of(parse("-0.0")) == KW_DOUBLE);
    CHECK_STR(reprint("[0,-1,1E3,2.50,1e-2,-0.0,5e-324,1.7976931348623157e308,0.1,100000000000000000000]"),
              "[0,-1,1000,2.5,0.01,-0,4.94065645841247e-324,1.7976931348623157e+308,0.1,1e+20]");
}

static void test_doubles_print_shortest(void) {
    const double values[] = {0.1, 1.0 / 3, 2.0 / 3, 1e300, -1e-300, 5e-324, 1.7976931348623157e308,
                             123456.789, 0.30000000000000004, 9007199254740993.0, 2.5e-7};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char *s = kw_print(kw_double(values[i]), NULL);
        double back = 0;
        CHECK(kw_as_double(parse(s), &back) && back == values[i]);
        char g17[40];
        snprintf(g17, sizeof g17, "%.17g", values[i]);
        CHECK(strlen(s) <= strlen(g17));
    }
    CHECK_STR(kw_print(kw_double(0.1), NULL), "0.1");
    CHECK_STR(kw_print(kw_double(1.0 / 3), NULL), "0.3333333333333333");
    CHECK_STR(kw_print(kw_double(0.30000000000000004), NULL), "0.30000000000000004");
    CHECK_STR(kw_print(kw_double(2.0), NULL), "2");
    CHECK_STR(kw_print(kw_double(NAN), NULL), "null");
    CHECK_STR(kw_print(kw_double(INFINITY), NULL), "null");
    CHECK_STR(kw_print(kw_double(-INFINITY), NULL), "null");
}

static void test_strings_and_escapes(void) {
    size_t n = 0;
    const char *s = kw_strn(parse("\"\\ud83d\\ude80\\uD83D\\uDE00\""), &n);
    CHECK(n == 8 && memcmp(s, "\xf0\x9f\x9a\x80\xf0\x9f\x98\x80", 8) == 0);
    s = kw_strn(parse("\"\\u0041\\u00e9\\u20ac\\uffff\\udbff\\udfff\""), &n);
    CHECK(n == 1 + 2 + 3 + 3 + 4 && memcmp(s, "A\xc3\xa9\xe2\x82\xac\xef\xbf\xbf\xf4\x8f\xbf\xbf", n) == 0);
    s = kw_strn(parse("\"a\\u0000b\""), &n);
    CHECK(n == 3 && memcmp(s, "a\0b", 3) == 0);
    CHECK_STR(kw_print(kw_stringn("a\0b", 3), NULL), "\"a\\u0000b\"");
    CHECK_STR(kw_print(kw_string("\"\\/\b\f\n\r\t\x01\x1f\x7f \xc3\xa9"), NULL),
              "\"\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f \xc3\xa9\"");
    CHECK_STR(reprint("\"\""), "\"\"");
    /* Keys too: escaped on print, may hold NUL, found by kw_get only up to their NUL. */
    kw_value *o = parse("{\"a\\u0000b\":1,\"q\\\"\":2}");
    CHECK_STR(kw_print(o, NULL), "{\"a\\u0000b\":1,\"q\\\"\":2}");
    CHECK(kw_get(o, "a") == NULL && kw_int_or(kw_get(o, "q\""), 0) == 2);
    /* A repeated key keeps its first place and takes the last value. */
    CHECK_STR(reprint("{\"a\":1,\"b\":2,\"a\":3}"), "{\"a\":3,\"b\":2}");
}

static void test_build_and_change(void) {
    kw_value *o = kw_object();
    CHECK(kw_set(o, "b", kw_int(1)) != NULL);
    kw_set(o, "a", kw_string("x"));
    kw_value *n = kw_set(o, "c", NULL);
    CHECK(kw_type_of(n) == KW_NULL);
    kw_set(o, "b", kw_bool(true)); /* keeps its place */
    CHECK_STR(kw_print(o, NULL), "{\"b\":true,\"a\":\"x\",\"c\":null}");
    CHECK(kw_remove(o, "a") && !kw_remove(o, "a") && !kw_remove(o, "zz"));
    CHECK_STR(kw_print(o, NULL), "{\"b\":true,\"c\":null}");
    CHECK(kw_remove(o, "c") && kw_remove(o, "b") && kw_len(o) == 0);
    CHECK_STR(kw_print(o, NULL), "{}");

    kw_value *obj = parse("{\"spec\":5,\"metadata\":{\"name\":\"n\"}}");
    kw_value *two = kw_int(2);
    CHECK(kw_set_path(obj, two, "spec", "template", "replicas", NULL) == two);
    CHECK(kw_set_path(obj, kw_string("v"), "metadata", "labels", "app", NULL) != NULL);
    CHECK(kw_set_path(obj, kw_null(), "top", NULL) != NULL);
    CHECK_STR(kw_print(obj, NULL),
              "{\"spec\":{\"template\":{\"replicas\":2}},\"metadata\":{\"name\":\"n\",\"labels\":{\"app\":\"v\"}},\"top\":null}");
    CHECK(kw_path(obj, "spec", "template", "replicas", NULL) == two);
    CHECK(kw_path(obj, NULL) == obj);
    CHECK(kw_path(obj, "spec", "template", "replicas", "deeper", NULL) == NULL);
    CHECK(kw_set_path(obj, kw_int(1), NULL) == NULL);
    CHECK(kw_set_path(kw_array(), kw_int(1), "a", NULL) == NULL);
    CHECK(kw_set_path(NULL, kw_int(1), "a", NULL) == NULL);

    kw_value *a = kw_array();
    for (int i = 0; i < 100; i++) CHECK(kw_push(a, kw_int(i)) != NULL);
    CHECK(kw_type_of(kw_push(a, NULL)) == KW_NULL);
    CHECK(kw_len(a) == 101 && kw_int_or(kw_at(a, 99), 0) == 99 && kw_at(a, 101) == NULL);
    CHECK(kw_push(o, kw_int(1)) == NULL && kw_push(NULL, kw_int(1)) == NULL);
    kw_value *finalizers = parse("[\"a.example/x\",\"b.example/y\",\"c.example/z\"]");
    CHECK(kw_remove_at(finalizers, 1) && !kw_remove_at(finalizers, 2) && !kw_remove_at(o, 0) && !kw_remove_at(NULL, 0));
    CHECK_STR(kw_print(finalizers, NULL), "[\"a.example/x\",\"c.example/z\"]");
    CHECK(kw_remove_at(finalizers, 1) && kw_remove_at(finalizers, 0) && kw_len(finalizers) == 0);
    CHECK(kw_set(a, "k", kw_int(1)) == NULL && kw_set(NULL, "k", kw_int(1)) == NULL);
    kw_value *small = kw_array();
    kw_push(small, kw_double(1.5));
    kw_push(small, kw_stringn("ab", 1));
    kw_push(small, kw_string(NULL));
    kw_push(small, kw_bool(false));
    kw_push(small, kw_object());
    CHECK_STR(kw_print(small, NULL), "[1.5,\"a\",null,false,{}]");
    size_t len = 0;
    CHECK_STR(kw_print(NULL, &len), "null");
    CHECK(len == 4);
}

static void test_equal(void) {
    CHECK(kw_equal(parse("{\"a\":1,\"b\":[1,2,{\"c\":null}]}"), parse("{\"b\":[1,2.0,{\"c\":null}],\"a\":1.0}")));
    CHECK(!kw_equal(parse("{\"a\":1,\"b\":2}"), parse("{\"a\":1}")));
    CHECK(!kw_equal(parse("{\"a\":1}"), parse("{\"a\":1,\"b\":2}")));
    CHECK(!kw_equal(parse("{\"a\":1}"), parse("{\"b\":1}")));
    CHECK(!kw_equal(parse("[1,2]"), parse("[2,1]")));
    CHECK(!kw_equal(parse("[1]"), parse("[1,1]")));
    CHECK(kw_equal(kw_int(1), kw_double(1.0)) && kw_equal(kw_double(1.0), kw_int(1)));
    CHECK(!kw_equal(kw_int(1), kw_double(1.5)));
    CHECK(!kw_equal(kw_int(9007199254740993), kw_double(9007199254740992.0))); /* exact, not via double */
    CHECK(!kw_equal(kw_int(INT64_MAX), kw_double(9223372036854775808.0)));
    CHECK(kw_equal(kw_int(INT64_MIN), kw_double(-9223372036854775808.0)));
    CHECK(!kw_equal(kw_double(NAN), kw_double(NAN)));
    CHECK(kw_equal(kw_string("a\0b"), kw_string("a")) && !kw_equal(kw_stringn("a\0b", 3), kw_string("a")));
    CHECK(!kw_equal(kw_string("1"), kw_int(1)) && !kw_equal(kw_bool(true), kw_int(1)));
    CHECK(!kw_equal(kw_bool(true), kw_bool(false)) && kw_equal(kw_bool(false), kw_bool(false)));
    CHECK(kw_equal(NULL, kw_null()) && kw_equal(NULL, NULL) && !kw_equal(NULL, kw_int(0)));
    CHECK(kw_equal(kw_array(), parse("[]")) && !kw_equal(kw_array(), kw_object()));
}

static void test_readers_on_null_and_wrong_types(void) {
    kw_value *s = kw_string("x"), *i = kw_int(5), *o = parse("{\"k\":\"v\"}");
    CHECK(kw_type_of(NULL) == KW_NULL);
    CHECK(kw_get(NULL, "k") == NULL && kw_get(s, "k") == NULL && kw_get(o, NULL) == NULL);
    CHECK(kw_path(NULL, "a", "b", NULL) == NULL && kw_path(s, "a", NULL) == NULL);
    CHECK(kw_len(NULL) == 0 && kw_len(s) == 0 && kw_len(i) == 0 && kw_len(o) == 1);
    CHECK(kw_at(NULL, 0) == NULL && kw_at(s, 0) == NULL && kw_at(o, 1) == NULL);
    CHECK_STR(kw_str(kw_at(o, 0)), "v");
    CHECK(kw_key_at(NULL, 0) == NULL && kw_key_at(kw_array(), 0) == NULL && kw_key_at(o, 1) == NULL);
    size_t n = 99;
    CHECK(kw_str(NULL) == NULL && kw_str(i) == NULL && kw_strn(o, &n) == NULL && n == 99);
    CHECK_STR(kw_str_or(NULL, "fb"), "fb");
    CHECK_STR(kw_str_or(i, "fb"), "fb");
    CHECK_STR(kw_str_or(s, "fb"), "x");
    int64_t out = 42;
    CHECK(!kw_as_int(NULL, &out) && !kw_as_int(s, &out) && !kw_as_int(kw_double(NAN), &out) && out == 42);
    CHECK(kw_as_int(i, NULL) && kw_int_or(NULL, -1) == -1 && kw_int_or(kw_bool(true), -1) == -1);
    CHECK(kw_int_or(kw_double(INFINITY), -1) == -1 && kw_int_or(kw_double(-3.0), 0) == -3);
    double d = 4.5;
    CHECK(!kw_as_double(NULL, &d) && !kw_as_double(s, &d) && d == 4.5);
    CHECK(kw_as_double(i, &d) && d == 5.0);
    CHECK(kw_bool_or(NULL, true) && !kw_bool_or(i, false) && kw_bool_or(kw_bool(true), false));
    CHECK(!kw_bool_or(kw_bool(false), true));
    CHECK(kw_type_of(kw_copy(NULL)) == KW_NULL && kw_remove(NULL, "k") == false && !kw_remove(s, "k"));
}

static void test_arena(void) {
    kw_arena_reset();
    CHECK(kw_arena_bytes() == 0);
    char *a = kw_alloc(3), *b = kw_alloc(0), *c = kw_alloc(1);
    CHECK(a && b && c && a != b && b != c);
    CHECK((uintptr_t)a % 8 == 0 && (uintptr_t)b % 8 == 0 && (uintptr_t)c % 8 == 0);
    CHECK_STR(kw_strdup("hello"), "hello");
    CHECK_STR(kw_strndup("hello", 2), "he");
    CHECK_STR(kw_sprintf("%s-%d-%zu", "x", -3, (size_t)7), "x--3-7");
    char *big = kw_sprintf("%0300d", 1); /* longer than any first guess */
    CHECK(strlen(big) == 300 && big[299] == '1');
    char *huge = kw_alloc(3 << 20); /* bigger than a block */
    memset(huge, 0xab, 3 << 20);
    for (int i = 0; i < 5000; i++) memset(kw_alloc(100), i, 100); /* spans several blocks */
    size_t before = kw_arena_bytes();
    CHECK(before > (3u << 20) + 5000 * 100);
    CHECK(huge[(3 << 20) - 1] == (char)0xab);
    kw_arena_reset();
    CHECK(kw_arena_bytes() == 0);
    kw_value *v = parse("{\"a\":[1,2,3]}");
    CHECK(kw_arena_bytes() > 0 && kw_arena_bytes() < before);
    CHECK_STR(kw_print(v, NULL), "{\"a\":[1,2,3]}");
    kw_arena_reset();
    kw_arena_reset();
    CHECK(kw_arena_bytes() == 0);
}

static void test_large_input(void) {
    size_t cap = (1u << 20) + 4096, len = 0;
    char *text = malloc(cap);
    CHECK(text != NULL);
    text[len++] = '[';
    for (int i = 0; len < (1u << 20); i++) {
        len += (size_t)snprintf(text + len, cap - len,
                                "%s{\"i\":%d,\"s\":\"item-%d \\\"q\\\" \xc3\xa9\",\"d\":%d.25,\"b\":true,"
                                "\"n\":null,\"a\":[%d,-%d,[]]}",
                                i ? "," : "", i, i, i, i, i + 1);
    }
    text[len++] = ']';
    text[len] = '\0';
    const char *error = NULL;
    kw_value *v = kw_parse(text, len, &error);
    size_t out_len = 0;
    char *out = v ? kw_print(v, &out_len) : NULL;
    int same = out && out_len == len && memcmp(out, text, len) == 0;
    size_t count = kw_len(v);
    free(text);
    CHECK(v != NULL && error == NULL);
    CHECK(count > 10000);
    CHECK(same);
    CHECK(kw_int_or(kw_get(kw_at(v, count - 1), "i"), -1) == (int64_t)count - 1);
}

static const test tests[] = {
    T(deployment_round_trip), T(pretty_input_prints_compact), T(parse_errors), T(depth_limit),
    T(int64_edges), T(doubles_print_shortest), T(strings_and_escapes), T(build_and_change),
    T(equal), T(readers_on_null_and_wrong_types), T(arena), T(large_input),
};

int main(void) {
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
