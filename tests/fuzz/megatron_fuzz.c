/* megatron_fuzz.c — libFuzzer entry point: megatron-idx, megatron-bin (fuzz_targets.c).
 * Built by scripts/fuzz-libfuzzer.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return pp_fuzz_one("megatron-idx,megatron-bin", data, size);
}
