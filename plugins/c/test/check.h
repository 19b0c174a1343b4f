/* The native tests' runner: one line per test, then "test result: ok. N passed; M failed"; the
 * exit status is nonzero on failure. A test is a void function that returns at its first failed
 * CHECK, which says why. */
#ifndef KUBEWASM_TEST_CHECK_H
#define KUBEWASM_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

#include "../src/json.h"

static char why[512]; /* set by the first failed check of the running test */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(why, sizeof why, "line %d: %s", __LINE__, #cond);                             \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Checks that two C strings are equal, saying both when not. */
#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        const char *g_ = (got), *w_ = (want);                                                      \
        if (!g_ || strcmp(g_, w_) != 0) {                                                          \
            snprintf(why, sizeof why, "line %d: got %.200s, want %.200s", __LINE__,                \
                     g_ ? g_ : "(null)", w_);                                                      \
            return;                                                                                \
        }                                                                                          \
    } while (0)

typedef struct { const char *name; void (*run)(void); } test;

#define T(name) {#name, test_##name}

/* Runs the tests, the arena reset after each (as after every call into the plugin). */
static int run_tests(const test *tests, size_t count) {
    int passed = 0, failed = 0;
    for (size_t i = 0; i < count; i++) {
        why[0] = '\0';
        tests[i].run();
        kw_arena_reset();
        if (why[0]) {
            printf("FAIL %s: %s\n", tests[i].name, why);
            failed++;
        } else {
            printf("PASS %s\n", tests[i].name);
            passed++;
        }
    }
    printf("test result: %s. %d passed; %d failed\n", failed ? "FAILED" : "ok", passed, failed);
    return failed ? 1 : 0;
}

#endif
