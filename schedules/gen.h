/* gen.h — private to schedules/: the generator entry points the registry lists, and helpers
 * every generator shares. */
#ifndef PP_SCHED_GEN_H
#define PP_SCHED_GEN_H

#include "pp_sched.h"

pp_status pp_gen_gpipe(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_1f1b(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_interleaved(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_chimera(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_bitpipe(const pp_sched_params *p, pp_sched **out);

#endif
