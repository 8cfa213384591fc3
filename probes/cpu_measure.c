/* cpu_measure.c — what a CPU-backend rank gets: memory and memcpy bandwidth. (Its
 * single-thread BLAS GEMM rate: cpu_gemm.c, the BLAS plugin; transfers between threads:
 * cpu_transfer.c.)
 *
 * Every figure is the median of repeated timed samples after a warm-up, with min/max kept;
 * each sample repeats the operation until it lasts long enough for the clock to resolve it.
 * Not here: deciding how many CPU devices a node has (probe.c), printing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_impl.h"

/* ---- memory ---- */

static double read_number_file(const char *path)
{
    FILE *fp = fopen(path, "r");
    double v = -1;
    if (fp) {
        char buf[64];
        if (fgets(buf, sizeof buf, fp) && strncmp(buf, "max", 3) != 0)
            v = atof(buf);
        fclose(fp);
    }
    return v;
}

pp_status pp_cpu_usable_memory(double *bytes)
{
    double avail = -1;
    FILE *fp = fopen("/proc/meminfo", "r");
    if (fp) {
        char line[128];
        while (fgets(line, sizeof line, fp))
            if (!strncmp(line, "MemAvailable:", 13))
                avail = atof(line + 13) * 1024.0; /* the file says kB, meaning KiB */
        fclose(fp);
    }
    if (avail < 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || page <= 0)
            return PP_ERR(PP_ERR_IO, "cannot tell available memory: /proc/meminfo has no "
                                     "MemAvailable and sysconf(_SC_AVPHYS_PAGES) failed");
        avail = (double)pages * (double)page;
    }
    /* a container's limit is what the kernel enforces (cgroup v2, then v1) */
    const char *limits[] = {"/sys/fs/cgroup/memory.max",
                            "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        double lim = read_number_file(limits[i]);
        if (lim > 0 && lim < avail)
            avail = lim;
    }
    *bytes = avail;
    return PP_OK;
}

/* ---- memcpy ---- */

pp_status pp_cpu_memcpy(const pp_probe_opts *o, pp_measure *bw)
{
    size_t bytes = (size_t)(o->quick ? 32 : 128) << 20;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return PP_ERR(PP_ERR_NOMEM, "memcpy probe: cannot allocate 2 x %zu MiB", bytes >> 20);
    }
    memset(src, 1, bytes);
    memcpy(dst, src, bytes); /* warm-up: faults the pages in */
    int samples = o->quick ? 5 : 9;
    double rate[16];
    for (int i = 0; i < samples; i++) {
        double t0 = pp_now();
        memcpy(dst, src, bytes);
        rate[i] = (double)bytes / (pp_now() - t0);
    }
    *bw = pp_measure_of(rate, samples);
    /* read dst so the copies cannot be optimised away */
    volatile char sink = dst[bytes / 2];
    (void)sink;
    free(src);
    free(dst);
    pp_probe_say(o, "cpu: memcpy %zu MiB  %.2f GB/s (%.2f..%.2f)", bytes >> 20, bw->median / 1e9,
                 bw->min / 1e9, bw->max / 1e9);
    return PP_OK;
}
