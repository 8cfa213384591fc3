/* plugin.c — finding and loading the probe plugins (plugin.h), and the probes that go through
 * them: probe_impl.h's GPU, MPI and BLAS entry points, which load their plugin on first use and
 * say clearly, naming the file and where it was looked for, when it cannot be loaded.
 *
 * Not here: the measurements themselves (gpu_probe.cu, mpi_gather.c, cpu_gemm.c).
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"

#ifndef PP_PLUGIN_BUILD_DIR
#define PP_PLUGIN_BUILD_DIR ""
#endif
#ifndef PP_BUILT_GPU
#define PP_BUILT_GPU 0
#endif
#ifndef PP_BUILT_MPI
#define PP_BUILT_MPI 0
#endif

typedef struct {
    const char *name;      /* "gpu": file pptune-gpu.so, entry pp_probe_plugin_gpu */
    int built;             /* built by this configuration */
    const char *not_built; /* why not, for messages */
    const char *needs;     /* the libraries it loads, for "cannot load" messages */
    int tried;
    const pp_probe_plugin *table;
    char why[768];
} plugin_slot;

static plugin_slot slots[] = {
    {"gpu", PP_BUILT_GPU,
     "pptune was built without CUDA (configure with nvcc on the PATH, or -DPP_CUDA=ON)",
     "the CUDA runtime, cuBLAS and NCCL", 0, NULL, ""},
    {"mpi", PP_BUILT_MPI, "pptune was built without MPI (Debian: libopenmpi-dev)",
     "the MPI library", 0, NULL, ""},
    {"blas", 1, "", "OpenBLAS", 0, NULL, ""},
};
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* Loads dir/pptune-<name>.so: 1 loaded, 0 no such file there, -1 there but unusable (s->why). */
static int try_dir(plugin_slot *s, const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/pptune-%s.so", dir, s->name) >= (int)sizeof path ||
        access(path, F_OK) != 0)
        return 0;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(s->why, sizeof s->why, "cannot load %.300s: %.300s (it needs %s: put their folder on "
                 "LD_LIBRARY_PATH)", path, dlerror(), s->needs);
        return -1;
    }
    char sym[64];
    snprintf(sym, sizeof sym, "pp_probe_plugin_%s", s->name);
    void *addr = dlsym(h, sym);
    const pp_probe_plugin *(*entry)(void) = NULL;
    memcpy(&entry, &addr, sizeof entry < sizeof addr ? sizeof entry : sizeof addr);
    const pp_probe_plugin *t = entry ? entry() : NULL;
    if (!t || t->abi != PP_PROBE_PLUGIN_ABI || strcmp(t->name, s->name) != 0) {
        snprintf(s->why, sizeof s->why, "%.300s is not a plugin of this pptune (%s%s, ABI %d, "
                 "expected %d): reinstall pptune", path, entry ? "" : "no ", sym,
                 t ? t->abi : 0, PP_PROBE_PLUGIN_ABI);
        dlclose(h);
        return -1;
    }
    s->table = t;
    return 1;
}

/* Tries each folder of a colon-separated list; appends the ones without the file to *seen. */
static int try_list(plugin_slot *s, const char *list, char *seen, size_t seen_len)
{
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ":");
        char dir[PATH_MAX];
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            int r = try_dir(s, dir);
            if (r != 0)
                return r;
            size_t len = strlen(seen);
            snprintf(seen + len, seen_len - len, "%s%s", len ? ", " : "", dir);
        }
        p += n + (p[n] == ':');
    }
    return 0;
}

/* <folder of the executable>/../lib/pptune, "" when /proc/self/exe cannot be read. */
static void exe_plugin_dir(char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (len <= 0)
        return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, n, "%s/../lib/pptune", exe);
}

static void load(plugin_slot *s)
{
    if (!s->built) {
        snprintf(s->why, sizeof s->why, "%s", s->not_built);
        return;
    }
    char seen[512] = "";
    const char *env = getenv("PPTUNE_PLUGIN_DIR");
    int r;
    if (env && *env) {
        r = try_list(s, env, seen, sizeof seen);
    } else {
        char exe_dir[PATH_MAX + 32];
        exe_plugin_dir(exe_dir, sizeof exe_dir);
        r = try_list(s, exe_dir, seen, sizeof seen);
        if (r == 0 && PP_PLUGIN_BUILD_DIR[0])
            r = try_list(s, PP_PLUGIN_BUILD_DIR, seen, sizeof seen);
    }
    if (r == 0)
        snprintf(s->why, sizeof s->why, "plugin pptune-%s.so not found (looked in %s%s); set "
                 "PPTUNE_PLUGIN_DIR to the folder that holds it", s->name,
                 env && *env ? "$PPTUNE_PLUGIN_DIR: " : "", seen[0] ? seen : "no folder");
}

const pp_probe_plugin *pp_probe_plugin_get(const char *name, char *why, size_t why_len)
{
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        plugin_slot *s = &slots[i];
        if (strcmp(s->name, name) != 0)
            continue;
        pthread_mutex_lock(&slots_lock);
        if (!s->tried) {
            load(s);
            s->tried = 1;
        }
        pthread_mutex_unlock(&slots_lock);
        if (!s->table && why)
            snprintf(why, why_len, "%s", s->why);
        return s->table;
    }
    if (why)
        snprintf(why, why_len, "no probe plugin is called \"%s\"", name);
    return NULL;
}

/* A plugin's failure, its message moved into this copy of common/. */
static pp_status imported(const pp_probe_plugin *p, pp_status st, const char *file, int line)
{
    if (st == PP_OK)
        return PP_OK;
    pp_err_restore(st, p->err_msg(), strlen(p->err_text()));
    return pp_err_trace(st, file, line);
}
#define IMPORTED(p, call) imported((p), (call), __FILE__, __LINE__)

/* ---- GPU ---- */

int pp_probe_gpu_available(char *why, size_t why_len)
{
    char reason[768];
    const pp_probe_plugin *p = pp_probe_plugin_get("gpu", reason, sizeof reason);
    if (!p) {
        snprintf(why, why_len, "no CUDA device: %s", reason);
        return 0;
    }
    return p->gpu_available(why, why_len);
}

pp_status pp_gpu_probe_node(const pp_probe_opts *o, pp_cluster *c, int node)
{
    char why[768];
    const pp_probe_plugin *p = pp_probe_plugin_get("gpu", why, sizeof why);
    if (!p)
        return PP_ERR(PP_ERR_UNSUPPORTED, "no CUDA device: %s", why);
    return IMPORTED(p, p->gpu_probe_node(o, c, node));
}

void pp_gpu_versions(pp_software *sw)
{
    const pp_probe_plugin *p = pp_probe_plugin_get("gpu", NULL, 0);
    if (p)
        p->gpu_versions(sw);
}

/* ---- MPI ---- */

/* The host's node probe, called back by the MPI plugin: its failure message goes into the
 * plugin's copy, which sends it to rank 0. */
static pp_status (*host_probe_node)(const pp_probe_opts *, pp_cluster **);
static const pp_probe_plugin *mpi_plugin;

static pp_status probe_node_for_plugin(const pp_probe_opts *o, pp_cluster **out)
{
    pp_status st = host_probe_node(o, out);
    if (st != PP_OK)
        mpi_plugin->err_restore(st, pp_err_msg(), strlen(pp_err_text()));
    return st;
}

pp_status pp_mpi_probe(const pp_probe_opts *o,
                       pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                       pp_cluster **out)
{
    *out = NULL;
    char why[768];
    const pp_probe_plugin *p = pp_probe_plugin_get("mpi", why, sizeof why);
    if (!p) {
        pp_launch_info li;
        PP_TRY(pp_launch_detect(&li));
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "started by a launcher with %d ranks, but %s: run one `pptune probe` per "
                      "node without mpirun, or make MPI available",
                      li.size, why);
    }
    host_probe_node = probe_node;
    mpi_plugin = p;
    return IMPORTED(p, p->mpi_probe(o, probe_node_for_plugin, out));
}

pp_status pp_probe_allreduce(double bytes, int quick, pp_allreduce_timing *out)
{
    memset(out, 0, sizeof *out);
    char why[768];
    const pp_probe_plugin *p = pp_probe_plugin_get("mpi", why, sizeof why);
    if (!p)
        return PP_ERR(PP_ERR_UNSUPPORTED, "the all-reduce probe needs MPI: %s", why);
    return IMPORTED(p, p->allreduce(bytes, quick, out));
}

/* ---- BLAS ---- */

pp_status pp_cpu_gemm_sweep(const pp_probe_opts *o, pp_gemm_point **pts, int *n)
{
    *pts = NULL;
    *n = 0;
    char why[768];
    const pp_probe_plugin *p = pp_probe_plugin_get("blas", why, sizeof why);
    if (!p)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "the CPU GEMM probe measures the CPU backend's BLAS (OpenBLAS), but %s", why);
    return IMPORTED(p, p->gemm_sweep(o, pts, n));
}

const char *pp_cpu_blas_config(void)
{
    const pp_probe_plugin *p = pp_probe_plugin_get("blas", NULL, 0);
    return p ? p->blas_config() : "";
}
