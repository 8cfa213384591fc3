/* gpu_none.c — the GPU probes of a build without CUDA: they say so, cleanly, instead of failing.
 * gpu_probe.cu replaces this file where nvcc was found at configure time. */
#include "probe_impl.h"

int pp_probe_gpu_available(char *why, size_t why_len)
{
    snprintf(why, why_len, "no CUDA device: pptune was built without CUDA");
    return 0;
}

pp_status pp_gpu_probe_node(const pp_probe_opts *o, pp_cluster *c, int node)
{
    (void)o;
    (void)c;
    (void)node;
    return PP_ERR(PP_ERR_UNSUPPORTED, "no CUDA device: pptune was built without CUDA "
                                      "(configure with nvcc on the PATH, or -DPP_CUDA=ON)");
}

void pp_gpu_versions(pp_software *sw)
{
    (void)sw;
}
