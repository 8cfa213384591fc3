/* hash.c — FNV-1a, 64 bit (Fowler, Noll, Vo), the one copy every module uses: checkpoint and
 * parameter checksums, the runtime's per-tensor random streams. (The cluster fingerprint is
 * SHA-256, common/sha256.c via probes/cluster.c; "fnv1a64:" keys of older files are still read.)
 * Stable across platforms and byte-order independent for byte input; not cryptographic (the
 * profile store keys files by the fingerprint, it does not authenticate them). */
#include "pp_common.h"

uint64_t pp_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * PP_FNV1A_PRIME;
    return h;
}

uint64_t pp_fnv1a_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * PP_FNV1A_PRIME;
    return h;
}
