/* test_runtime_exec.c — the executor against the unpipelined reference over the grid the
 * issue asks for: every generator (gpipe, 1f1b, interleaved with v = 2 and 3, chimera,
 * bitpipe), D in {2, 4}, N in {D, 2D}, even and uneven (Llama 3) layer splits, dp in {1, 2}.
 *
 * Layer counts (test_runtime_exec_equiv.c, layers_for): even splits use L = 12 (S = 2, 4, 6,
 * 12) or 16 (S = 8); uneven splits the smallest L >= 10 with (L + 2) % S == 0: L = 10 for
 * S = 4 and 6, L = 14 for S = 8, L = 22 for S = 12. An uneven split needs S >= 3, so the
 * D = 2, v = 1 schedules (gpipe, 1f1b, chimera with S = 2) run even splits only.
 * Chimera needs an even D and N a multiple of D; bitpipe N a multiple of D: the grid fits.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "test_runtime_exec_equiv.h"

static void grid(const char *kind, int v)
{
    int S1 = v ? v : (strcmp(kind, "bitpipe") == 0 ? 2 : 1);
    for (int D = 2; D <= 4; D += 2)
        for (int N = D; N <= 2 * D; N += D)
            for (int uneven = 0; uneven <= 1; uneven++)
                for (int dp = 1; dp <= 2; dp++) {
                    if (uneven && S1 * D < 3)
                        continue;
                    exec_case c = {kind, D, N, v, uneven, dp};
                    exec_check_case(&c);
                }
}

Test(runtime_exec, gpipe_equals_reference) { grid("gpipe", 0); }
Test(runtime_exec, one_f_one_b_equals_reference) { grid("1f1b", 0); }
Test(runtime_exec, interleaved_v2_equals_reference) { grid("interleaved", 2); }
Test(runtime_exec, interleaved_v3_equals_reference) { grid("interleaved", 3); }
Test(runtime_exec, chimera_equals_reference) { grid("chimera", 0); }
Test(runtime_exec, bitpipe_equals_reference) { grid("bitpipe", 0); }

Test(runtime_exec, one_rank_schedule_equals_reference)
{
    exec_case c = {"gpipe", 1, 3, 0, 0, 2};
    exec_check_case(&c);
}
