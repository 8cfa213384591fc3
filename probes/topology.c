/* topology.c — the machine's (or a recorded machine's) topology through hwloc 2.x.
 *
 * Lifecycle as hwloc prescribes: init -> keep important I/O objects -> (set XML) -> load ->
 * walk -> destroy. A GPU is a PCI device carrying a CUDA ("cudaN") or NVML ("nvmlN") OS device;
 * the two names of one GPU are merged by their PCI parent. A NIC is a PCI device carrying an
 * OpenFabrics ("mlx5_0") or network ("ib0", "eth0") OS device. Locality comes from the PCI tree:
 * the closest common ancestor of two PCI devices gives NCCL's PIX/PXB/PHB/NODE/SYS.
 *
 * Deliberately not here: anything CUDA (hwloc/cudart.h would pull CUDA headers into C files),
 * measurements, printing beyond pp_topo_print.
 */
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#endif

#include "probe_impl.h"

#define MAX_DEPTH 64

typedef struct {
    hwloc_obj_t pci; /* the GPU's or NIC's PCI device */
} io_ref;

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

static void pci_name(hwloc_obj_t pci, char *buf, size_t n)
{
    if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE) {
        copy_str(buf, n, "");
        return;
    }
    snprintf(buf, n, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

/* OS index of the single NUMA node under the device's CPU-side ancestor, -1 if several/none. */
static int numa_of(hwloc_topology_t topo, hwloc_obj_t obj)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
    if (!anc || !anc->nodeset)
        return -1;
    int found = -1, count = 0;
    hwloc_obj_t n = NULL;
    while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != NULL) {
        if (n->nodeset && hwloc_bitmap_isincluded(n->nodeset, anc->nodeset)) {
            found = (int)n->os_index;
            count++;
        }
    }
    return count == 1 ? found : -1;
}

/* hwloc_get_common_ancestor_obj compares depths, which are negative for I/O objects; walk the
 * parent chains instead. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    hwloc_obj_t chain[MAX_DEPTH];
    int n = 0;
    for (hwloc_obj_t o = a; o && n < MAX_DEPTH; o = o->parent)
        chain[n++] = o;
    for (hwloc_obj_t o = b; o; o = o->parent)
        for (int i = 0; i < n; i++)
            if (chain[i] == o)
                return o;
    return NULL;
}

static int bridges_between(hwloc_obj_t from, hwloc_obj_t anc)
{
    int k = 0;
    for (hwloc_obj_t o = from->parent; o && o != anc; o = o->parent)
        if (o->type == HWLOC_OBJ_BRIDGE)
            k++;
    return k;
}

/* NCCL's path type between two PCI devices (its src/graph/topo.cc: PIX one switch, PXB several,
 * PHB through the CPU's host bridge, NODE within a NUMA node, SYS across sockets). */
static pp_pci_path pci_path(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b)
{
    hwloc_obj_t anc = common_ancestor(a, b);
    if (!anc)
        return PP_PATH_UNKNOWN;
    if (anc->type == HWLOC_OBJ_BRIDGE) {
        if (anc->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
            return PP_PATH_PHB;
        /* the shared bridge counts once: PIX when neither side crosses another bridge */
        return bridges_between(a, anc) + bridges_between(b, anc) == 0 ? PP_PATH_PIX : PP_PATH_PXB;
    }
    if (anc->type == HWLOC_OBJ_PCI_DEVICE)
        return PP_PATH_PIX;
    /* a CPU-side object: same NUMA node -> NODE, else SYS */
    int na = numa_of(topo, a), nb = numa_of(topo, b);
    return na >= 0 && na == nb ? PP_PATH_NODE : PP_PATH_SYS;
}

/* The index in "cuda3" / "nvml12"; -1 when name is not prefix + digits or the index is absurd
 * (over 65535: a hostile XML's "nvml99999999999" must not overflow the sort key). */
static int name_index(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] < '0' || name[n] > '9')
        return -1;
    char *end;
    long i = strtol(name + n, &end, 10);
    return i > 65535 ? -1 : (int)i;
}

static int is_gpu_osdev(hwloc_obj_t o)
{
    return o->name &&
           ((o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && name_index(o->name, "cuda") >= 0) ||
            (o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU && name_index(o->name, "nvml") >= 0));
}

static int is_nic_osdev(hwloc_obj_t o)
{
    return o->name && (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ||
                       o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK);
}

static int find_pci(const io_ref *refs, int n, hwloc_obj_t pci)
{
    for (int i = 0; i < n; i++)
        if (refs[i].pci == pci)
            return i;
    return -1;
}

/* The GPU's sort key: its CUDA index, else NVML index (+ a large offset keeps CUDA first). */
static int gpu_key(const pp_topo_gpu *g)
{
    int i = name_index(g->name, "cuda");
    return i >= 0 ? i : 100000 + name_index(g->name, "nvml");
}

static void merge_gpu_osdev(pp_topo_gpu *g, hwloc_obj_t o)
{
    /* the CUDA name wins: it is the index cudaSetDevice takes */
    if (!g->name[0] || name_index(o->name, "cuda") >= 0)
        copy_str(g->name, sizeof g->name, o->name);
    const char *model = hwloc_obj_get_info_by_name(o, "GPUModel");
    if (model && !g->model[0])
        copy_str(g->model, sizeof g->model, model);
    const char *mem = hwloc_obj_get_info_by_name(o, "CUDAGlobalMemorySize"); /* KiB */
    if (mem)
        g->mem_bytes = atof(mem) * 1024.0;
}

static void merge_nic_osdev(pp_topo_nic *n, hwloc_obj_t o)
{
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
        copy_str(n->name, sizeof n->name, o->name);
        n->rdma = 1;
        return;
    }
    size_t len = strlen(n->netdevs);
    snprintf(n->netdevs + len, sizeof n->netdevs - len, "%s%s", len ? "," : "", o->name);
    /* without an HCA name, an InfiniBand netdev ("ib0") names the NIC better than "eth2" */
    if (!n->rdma && (!n->name[0] || (!strncmp(o->name, "ib", 2) && strncmp(n->name, "ib", 2))))
        copy_str(n->name, sizeof n->name, o->name);
}

static pp_status collect_io(hwloc_topology_t topo, pp_topo *t, io_ref **gpu_refs, io_ref **nic_refs)
{
    int cap = 0;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(topo, o)) != NULL;)
        cap++;
    t->gpus = pp_calloc((size_t)cap + 1, sizeof *t->gpus);
    t->nics = pp_calloc((size_t)cap + 1, sizeof *t->nics);
    *gpu_refs = pp_calloc((size_t)cap + 1, sizeof **gpu_refs);
    *nic_refs = pp_calloc((size_t)cap + 1, sizeof **nic_refs);
    if (!t->gpus || !t->nics || !*gpu_refs || !*nic_refs)
        return PP_ERR_NOMEM;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(topo, o)) != NULL;) {
        hwloc_obj_t pci = o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE ? o->parent : NULL;
        if (is_gpu_osdev(o)) {
            int i = pci ? find_pci(*gpu_refs, t->n_gpus, pci) : -1;
            if (i < 0) {
                i = t->n_gpus++;
                (*gpu_refs)[i].pci = pci;
                pci_name(pci, t->gpus[i].pci, sizeof t->gpus[i].pci);
                t->gpus[i].numa = numa_of(topo, o);
                t->gpus[i].nic = -1;
                t->gpus[i].nic_path = PP_PATH_UNKNOWN;
            }
            merge_gpu_osdev(&t->gpus[i], o);
        } else if (is_nic_osdev(o)) {
            int i = pci ? find_pci(*nic_refs, t->n_nics, pci) : -1;
            if (i < 0) {
                i = t->n_nics++;
                (*nic_refs)[i].pci = pci;
                pci_name(pci, t->nics[i].pci, sizeof t->nics[i].pci);
                t->nics[i].numa = numa_of(topo, o);
            }
            merge_nic_osdev(&t->nics[i], o);
        }
    }
    return PP_OK;
}

/* Sorts GPUs by CUDA index, keeping refs in step (few GPUs: insertion sort). */
static void sort_gpus(pp_topo *t, io_ref *refs)
{
    for (int i = 1; i < t->n_gpus; i++)
        for (int j = i; j > 0 && gpu_key(&t->gpus[j]) < gpu_key(&t->gpus[j - 1]); j--) {
            pp_topo_gpu g = t->gpus[j];
            t->gpus[j] = t->gpus[j - 1];
            t->gpus[j - 1] = g;
            io_ref r = refs[j];
            refs[j] = refs[j - 1];
            refs[j - 1] = r;
        }
}

/* Nearest NIC of each GPU: RDMA HCAs first (what NCCL uses across nodes), then closest path. */
static void nearest_nics(hwloc_topology_t topo, pp_topo *t, const io_ref *gr, const io_ref *nr)
{
    for (int g = 0; g < t->n_gpus; g++) {
        int best = -1, best_score = 1 << 30;
        for (int n = 0; n < t->n_nics; n++) {
            pp_pci_path p =
                gr[g].pci && nr[n].pci ? pci_path(topo, gr[g].pci, nr[n].pci) : PP_PATH_UNKNOWN;
            int score = (t->nics[n].rdma ? 0 : 100) + (int)p;
            if (score < best_score) {
                best = n;
                best_score = score;
                t->gpus[g].nic_path = p;
            }
        }
        t->gpus[g].nic = best;
    }
}

static void load_nvlink(hwloc_topology_t topo, pp_topo *t, const io_ref *gr)
{
    unsigned nr = 1;
    struct hwloc_distances_s *d = NULL;
    if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr < 1 || !d)
        return;
    int *map = pp_calloc((size_t)t->n_gpus + 1, sizeof *map);
    double *m = pp_calloc((size_t)t->n_gpus * (size_t)t->n_gpus + 1, sizeof *m);
    int ok = map && m && t->n_gpus > 0;
    for (int g = 0; ok && g < t->n_gpus; g++) {
        map[g] = -1;
        for (unsigned i = 0; i < d->nbobjs; i++)
            if (d->objs[i]->parent == gr[g].pci && gr[g].pci)
                map[g] = (int)i;
        ok = map[g] >= 0;
    }
    for (int a = 0; ok && a < t->n_gpus; a++)
        for (int b = 0; b < t->n_gpus; b++)
            m[a * t->n_gpus + b] =
                (double)d->values[(unsigned)map[a] * d->nbobjs + (unsigned)map[b]];
    if (ok) {
        t->nvlink_MBps = m;
        m = NULL;
    }
    free(m);
    free(map);
    hwloc_distances_release(topo, d);
}

static void summarise_cpu(hwloc_topology_t topo, pp_topo *t)
{
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    copy_str(t->hostname, sizeof t->hostname, hwloc_obj_get_info_by_name(root, "HostName"));
    copy_str(t->arch, sizeof t->arch, hwloc_obj_get_info_by_name(root, "Architecture"));
    t->sockets = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    t->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    t->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg)
        copy_str(t->cpu_model, sizeof t->cpu_model, hwloc_obj_get_info_by_name(pkg, "CPUModel"));
}

static pp_status summarise_numa(hwloc_topology_t topo, pp_topo *t)
{
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    t->numa = pp_calloc((size_t)n + 1, sizeof *t->numa);
    if (!t->numa)
        return PP_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        t->numa[i].os_index = (int)o->os_index;
        t->numa[i].mem_bytes = (double)o->attr->numanode.local_memory;
        t->mem_bytes += t->numa[i].mem_bytes;
    }
    t->n_numa = n;
    return PP_OK;
}

static pp_status walk(hwloc_topology_t topo, pp_topo *t)
{
    io_ref *gr = NULL, *nr = NULL;
    summarise_cpu(topo, t);
    pp_status st = summarise_numa(topo, t);
    if (st == PP_OK)
        st = collect_io(topo, t, &gr, &nr);
    if (st == PP_OK) {
        sort_gpus(t, gr);
        nearest_nics(topo, t, gr, nr);
        load_nvlink(topo, t, gr);
    }
    free(gr);
    free(nr);
    return st;
}

/* hwloc's PCI plugin uses libpciaccess, which keeps ~1 KB of global state; hwloc unloads the
 * plugin after each load and LeakSanitizer then reports that state as leaked from an unknown
 * module. Keeping libpciaccess resident (RTLD_NODELETE) keeps it reachable. Sanitizer builds
 * only; a failure to open it changes nothing. */
static void keep_pciaccess_loaded(void)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)dlopen("libpciaccess.so.0", RTLD_LAZY | RTLD_NODELETE);
#endif
}

/* hwloc 2.9 dereferences NULL inside hwloc_topology_load for an XML object without its
 * complete_cpuset or complete_nodeset (fixed upstream later). A file is bad input, not a reason
 * to crash: it is loaded once in a child first, and a child that dies says so. 1: the child
 * loaded it (or failed cleanly: the real load reports why); 0: it crashed hwloc. */
static int xml_survives_hwloc(const char *xml_path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 1; /* cannot check: load it here as before */
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDERR_FILENO); /* a sanitizer's report of the crash is for the parent */
        hwloc_topology_t topo;
        if (hwloc_topology_init(&topo) != 0)
            _exit(3);
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        int ok = hwloc_topology_set_xml(topo, xml_path) == 0 && hwloc_topology_load(topo) == 0;
        _exit(ok ? 0 : 3);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 1;
    return WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3);
}

pp_status pp_probe_topology(const char *xml_path, pp_topo **out)
{
    *out = NULL;
    keep_pciaccess_loaded();
    if (xml_path) { /* a regular file only: hwloc (and its child) would wait on a FIFO */
        int fd;
        uint64_t size;
        PP_TRY(pp_file_open_regular(xml_path, &fd, &size));
        close(fd);
    }
    if (xml_path && !xml_survives_hwloc(xml_path))
        return PP_ERR(PP_ERR_PARSE,
                      "hwloc could not read %s: it crashed loading this XML (an object without "
                      "complete_cpuset or complete_nodeset?); write the file again with "
                      "`lstopo FILE.xml`",
                      xml_path);
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return PP_ERR(PP_ERR_DEVICE, "hwloc_topology_init failed");
    /* I/O objects (PCI, GPUs, NICs) are dropped by default in hwloc 2.x */
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (xml_path && hwloc_topology_set_xml(topo, xml_path) != 0) {
        hwloc_topology_destroy(topo);
        return PP_ERR(PP_ERR_PARSE,
                      "%s: not a readable hwloc XML topology (write one with "
                      "`lstopo FILE.xml`)",
                      xml_path);
    }
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return PP_ERR(xml_path ? PP_ERR_PARSE : PP_ERR_DEVICE,
                      "%s: hwloc could not load the topology", xml_path ? xml_path : "this machine");
    }
    pp_topo *t = pp_calloc(1, sizeof *t);
    pp_status st = t ? walk(topo, t) : PP_ERR_NOMEM;
    hwloc_topology_destroy(topo);
    if (st != PP_OK) {
        pp_topo_destroy(t);
        return st == PP_ERR_NOMEM ? st : pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = t;
    return PP_OK;
}

pp_status pp_topo_local_cpus(int **cpus, int *n)
{
    hwloc_topology_t topo;
    *cpus = NULL;
    *n = 0;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0)
        return PP_ERR(PP_ERR_DEVICE, "hwloc could not load this machine's topology");
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int *v = pp_calloc((size_t)cores + 1, sizeof *v);
    if (!v) {
        hwloc_topology_destroy(topo);
        return PP_ERR_NOMEM;
    }
    for (int i = 0; i < cores; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
        hwloc_bitmap_t mine = hwloc_bitmap_alloc();
        int pu = -1;
        if (mine && hwloc_bitmap_and(mine, core->cpuset, allowed) == 0)
            pu = hwloc_bitmap_first(mine);
        hwloc_bitmap_free(mine);
        if (pu >= 0)
            v[(*n)++] = pu;
    }
    hwloc_topology_destroy(topo);
    *cpus = v;
    return PP_OK;
}
