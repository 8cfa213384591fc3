/* test_probes.c — the topology probe on three recorded real machines (hwloc's own test
 * topologies, tests/fixtures/hwloc/). Expected facts checked with
 * `HWLOC_XMLFILE=FILE lstopo-no-graphics --whole-io -v` (hwloc 2.9). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_probe.h"

#define FIX(name) PP_FIXTURES_DIR "/hwloc/" name

static pp_topo *load(const char *path)
{
    pp_topo *t = NULL;
    pp_status st = pp_probe_topology(path, &t);
    cr_assert_eq(st, PP_OK, "%s: %s", path, pp_err_msg());
    return t;
}

Test(probes, power8_two_numa_nodes_of_64gb_four_gpus_two_per_node)
{
    pp_topo *t = load(FIX("power8gpudistances.xml"));
    cr_assert_eq(t->sockets, 2);
    cr_assert_eq(t->n_numa, 2);
    /* lstopo: NUMANode P#0 local=66950016KB, P#1 local=66846400KB (both "64GB") */
    cr_assert_eq(t->numa[0].mem_bytes, 66950016.0 * 1024);
    cr_assert_eq(t->numa[1].mem_bytes, 66846400.0 * 1024);
    cr_assert_str_eq(t->arch, "ppc64le");
    cr_assert_eq(t->n_gpus, 4, "cuda0..3 and nvml0..3 are 4 GPUs, got %d", t->n_gpus);
    const char *pci[] = {"0002:01:00.0", "0003:01:00.0", "000a:01:00.0", "000b:01:00.0"};
    for (int g = 0; g < 4; g++) {
        char name[8];
        snprintf(name, sizeof name, "cuda%d", g);
        cr_assert_str_eq(t->gpus[g].name, name);
        cr_assert_str_eq(t->gpus[g].pci, pci[g]);
        cr_assert_eq(t->gpus[g].numa, g / 2, "GPU %d on NUMA %d", g, t->gpus[g].numa);
        cr_assert_str_eq(t->gpus[g].model, "Tesla P100-SXM2-16GB");
        cr_assert_eq(t->gpus[g].mem_bytes, 16671616.0 * 1024);
        cr_assert_eq(t->gpus[g].nic, -1, "this machine has no NIC in its topology");
    }
    cr_assert_eq(t->n_nics, 0);
    pp_topo_destroy(t);
}

Test(probes, power8_nvlink_matrix_pairs_gpus_within_a_socket)
{
    pp_topo *t = load(FIX("power8gpudistances.xml"));
    cr_assert_not_null(t->nvlink_MBps, "the NVLinkBandwidth matrix was not read");
    double *m = t->nvlink_MBps;
    /* lstopo: nvml0-nvml1 and nvml2-nvml3 40000 MB/s, across sockets 0 */
    cr_assert_eq(m[0 * 4 + 1], 40000);
    cr_assert_eq(m[1 * 4 + 0], 40000);
    cr_assert_eq(m[2 * 4 + 3], 40000);
    cr_assert_eq(m[0 * 4 + 2], 0);
    cr_assert_eq(m[1 * 4 + 3], 0);
    cr_assert_eq(m[0 * 4 + 0], 1000000);
    pp_topo_destroy(t);
}

Test(probes, em64t_32_gpu_and_hca_share_a_pci_bridge_on_numa_node_1)
{
    pp_topo *t = load(FIX("32em64t-2n8c2t-pci-normalio.xml"));
    cr_assert_eq(t->sockets, 2);
    cr_assert_eq(t->cores, 16);
    cr_assert_eq(t->pus, 32);
    cr_assert_eq(t->n_gpus, 1, "one CUDA GPU (the other 3D devices have no CUDA/NVML OS device)");
    cr_assert_str_eq(t->gpus[0].name, "cuda0");
    cr_assert_str_eq(t->gpus[0].pci, "0000:84:00.0");
    cr_assert_eq(t->gpus[0].numa, 1);
    cr_assert_null(t->nvlink_MBps);
    int hca = t->gpus[0].nic;
    cr_assert_geq(hca, 0);
    cr_assert_str_eq(t->nics[hca].name, "mlx5_0");
    cr_assert_str_eq(t->nics[hca].netdevs, "ib0");
    cr_assert(t->nics[hca].rdma);
    cr_assert_eq(t->nics[hca].numa, 1);
    /* both hang off PCIBridge 80:03.0 directly: one switch, NCCL's PIX */
    cr_assert_eq(t->gpus[0].nic_path, PP_PATH_PIX, "got %s", pp_pci_path_name(t->gpus[0].nic_path));
    cr_assert_eq(t->n_nics, 3, "mlx5_0 plus the two I350 ports eth0/eth1");
    pp_topo_destroy(t);
}

Test(probes, em64t_24_has_an_hca_and_no_gpu)
{
    pp_topo *t = load(FIX("24em64t-2n6c2t-pci.xml"));
    cr_assert_eq(t->n_gpus, 0, "3D PCI devices without a CUDA/NVML OS device are not GPUs");
    cr_assert_eq(t->cores, 12);
    int hca = -1;
    for (int i = 0; i < t->n_nics; i++)
        if (t->nics[i].rdma)
            hca = i;
    cr_assert_geq(hca, 0);
    cr_assert_str_eq(t->nics[hca].name, "mlx4_0");
    cr_assert_str_eq(t->nics[hca].netdevs, "eth2,ib0");
    cr_assert_str_eq(t->nics[hca].pci, "0000:05:00.0");
    cr_assert_eq(t->nics[hca].numa, 0);
    cr_assert_eq(t->n_nics, 3);
    pp_topo_destroy(t);
}

Test(probes, hwloc_xmlfile_environment_is_honoured)
{
    setenv("HWLOC_XMLFILE", FIX("power8gpudistances.xml"), 1);
    pp_topo *t = load(NULL);
    cr_assert_eq(t->n_gpus, 4);
    pp_topo_destroy(t);
}

Test(probes, this_machine_loads)
{
    pp_topo *t = load(NULL);
    cr_assert_geq(t->cores, 1);
    cr_assert_geq(t->n_numa, 1);
    cr_assert_gt(t->mem_bytes, 0);
    pp_topo *c;
    cr_assert_eq(pp_topo_copy(t, &c), PP_OK);
    cr_assert_eq(c->cores, t->cores);
    pp_topo_destroy(c);
    pp_topo_destroy(t);
}

Test(probes, missing_topology_file_names_it)
{
    pp_topo *t = NULL;
    cr_assert_eq(pp_probe_topology("/nonexistent/machine.xml", &t), PP_ERR_NOTFOUND);
    cr_assert_null(t);
    cr_assert(strstr(pp_err_text(), "/nonexistent/machine.xml") != NULL, "%s", pp_err_text());
}

/* Issue 30: hwloc (and the child that loads the XML first) waited on a FIFO for good. */
Test(probes, a_topology_fifo_is_refused_at_once, .timeout = 20)
{
    char path[] = "/tmp/pp_topo_fifo_XXXXXX";
    close(mkstemp(path));
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0);
    pp_topo *t = NULL;
    cr_assert_eq(pp_probe_topology(path, &t), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "a FIFO"), "%s", pp_err_text());
    cr_assert_null(t);
    unlink(path);
}

/* hwloc 2.9 crashes loading an XML object without complete_cpuset (issue 18, finding 10): the
 * probe reports the file instead of dying with it. The file is a recorded machine with one
 * attribute removed. */
Test(probes, xml_that_crashes_hwloc_is_reported_not_followed_into_the_crash)
{
    char *xml;
    size_t n;
    cr_assert_eq(pp_file_read(FIX("24em64t-2n6c2t-pci.xml"), &xml, &n), PP_OK);
    char *pkg = strstr(xml, "type=\"Package\"");
    cr_assert(pkg);
    char *attr = strstr(pkg, " complete_cpuset=\"");
    cr_assert(attr);
    char *end = strchr(attr + strlen(" complete_cpuset=\""), '"');
    memmove(attr, end + 1, strlen(end + 1) + 1);
    char path[] = "/tmp/pp_bad_topology_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
    close(fd);
    free(xml);
    pp_topo *t = NULL;
    cr_assert_eq(pp_probe_topology(path, &t), PP_ERR_PARSE);
    cr_assert_null(t);
    cr_assert(strstr(pp_err_text(), "hwloc could not read"), "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), path), "%s", pp_err_text());
    unlink(path);
}

Test(probes, summary_prints_gpus_under_their_numa_node)
{
    pp_topo *t = load(FIX("power8gpudistances.xml"));
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    pp_topo_print(t, fp);
    fclose(fp);
    char *n1 = strstr(buf, "NUMA 1"), *g2 = strstr(buf, "GPU cuda2");
    cr_assert(n1 && g2 && g2 > n1, "cuda2 should be listed under NUMA 1:\n%s", buf);
    cr_assert(strstr(buf, "NVLink bandwidth") != NULL, "%s", buf);
    free(buf);
    pp_topo_destroy(t);
}
