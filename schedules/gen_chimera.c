/* gen_chimera.c — placeholder while the generator is written (not reported as done anywhere). */
#include "gen.h"

pp_status pp_gen_chimera(const pp_sched_params *p, pp_sched **out)
{
    (void)p;
    *out = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "the chimera generator is not written yet");
}
