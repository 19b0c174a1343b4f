/* What the call in progress has chosen for itself: the cluster its cache and client calls go to
 * (kw_use_cluster), and a hook call's warnings (kw_warn). host.c sets and reads them, exports.c
 * starts every call afresh: state of its own, so that neither of those files calls the other.
 */
#include "boundary.h"

static const char *named_cluster;
/* In the call's arena, like everything of the call. */
static controller_list_string_t warnings;
static size_t warnings_cap;

void kw_call_begin(void) {
    named_cluster = NULL;
    warnings = (controller_list_string_t){0};
    warnings_cap = 0;
}

void kw_call_warn(const char *warning) {
    warnings.ptr = grow(warnings.ptr, warnings.len, &warnings_cap, sizeof *warnings.ptr);
    warnings.ptr[warnings.len++] = wit_str(warning);
}

controller_list_string_t kw_call_warnings(void) {
    return warnings;
}

void kw_call_use_cluster(const char *cluster) {
    named_cluster = cluster;
}

const char *kw_call_cluster(void) {
    return named_cluster;
}
