/* nccl_none.c — the NCCL transport's entry point in a build without CUDA (compiled only when
 * PP_HAVE_CUDA is off): it says so and returns PP_ERR_UNSUPPORTED, so code above the transport
 * needs no #ifdef. It deliberately does nothing else.
 */
#include "pp_rt.h"

pp_status pp_transport_nccl_create(pp_transport *boot, int device, pp_transport **out)
{
    (void)boot, (void)device;
    *out = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "the NCCL transport: this pptune was built without CUDA "
                                      "(configure with -DPP_CUDA=ON where nvcc and NCCL exist)");
}
