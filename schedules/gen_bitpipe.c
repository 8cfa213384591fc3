/* gen_bitpipe.c — placeholder while the generator is written (not reported as done anywhere). */
#include "gen.h"

pp_status pp_gen_bitpipe(const pp_sched_params *p, pp_sched **out)
{
    (void)p;
    *out = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "the bitpipe generator is not written yet");
}
