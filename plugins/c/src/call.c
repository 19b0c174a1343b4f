/* What the call in progress has chosen for itself: the cluster its cache and client calls go to
 * (kw_use_cluster). host.c sets and reads it, exports.c starts every call afresh: state of its
 * own, so that neither of those files calls the other.
 */
#include "boundary.h"

static const char *named_cluster;

void kw_call_begin(void) {
    named_cluster = NULL;
}

void kw_call_use_cluster(const char *cluster) {
    named_cluster = cluster;
}

const char *kw_call_cluster(void) {
    return named_cluster;
}
