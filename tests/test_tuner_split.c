/* test_tuner_split.c — the tuner's side of split backward (the zero-bubble family, issue 19):
 * the time model's I / W costs (I + W = the fused B, collectives in I, W local), the memory
 * model's held-for-W bytes, the family in the search, the leaderboard, --explain and the
 * exports. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "pp_tune.h"

static pp_tune_model preset_model(const char *name)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset(name, &m), PP_OK, "%s", pp_err_msg());
    return m;
}

static void near(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-12 * fabs(want) + 1e-300, "%s: %.17g != %.17g", what, got,
              want);
}

/* I + W = B for the layer, the embedding and the head under every option that changes the
 * backward: tensor parallelism with and without sequence parallelism, full and selective
 * recompute, unfused attention, fp32. */
Test(tuner_split, input_and_weight_gradients_add_up_to_the_fused_backward)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-a100-80g", 4, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_model m = preset_model("gpt-13b");
    for (int variant = 0; variant < 6; variant++) {
        pp_tune_opts o;
        pp_tune_opts_default(&o);
        pp_tune_config c = {.kind = "1f1b", .p = 4, .v = 1, .b = 2, .d = 1, .t = 4, .N = 8};
        if (variant == 1)
            o.sequence_parallel = 1;
        if (variant == 2)
            o.recompute = PP_TUNE_RECOMPUTE_FULL;
        if (variant == 3)
            o.recompute = PP_TUNE_RECOMPUTE_SELECTIVE, o.flash_attention = 0;
        if (variant == 4)
            c.t = 1, o.precision = PP_PREC_FP32;
        if (variant == 5)
            o.without = (1u << PP_TUNE_FX_COUNT) - 1;
        pp_tune_op_times ot;
        pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
        cr_expect_gt(ot.layer_i, 0, "variant %d", variant);
        cr_expect_gt(ot.layer_w, 0, "variant %d", variant);
        near(ot.layer_i + ot.layer_w, ot.layer_b, "layer");
        near(ot.embed_i + ot.embed_w, ot.embed_b, "embedding");
        near(ot.head_i + ot.head_w, ot.head_b, "head");
        cr_expect_eq(ot.embed_i, 0.0, "token ids have no input gradient");
    }
}

/* W is the wgrad GEMMs only: the same in every option that adds work outside the GEMMs
 * (tensor-parallel collectives, recompute, sequence parallelism), which all lands in I. */
Test(tuner_split, collectives_and_recompute_land_in_the_input_gradient)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-a100-80g", 4, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_model m = preset_model("gpt-13b");
    pp_tune_config c = {.kind = "1f1b", .p = 4, .v = 1, .b = 1, .d = 1, .t = 8, .N = 8};
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_op_times base, full, sp;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &base);
    o.recompute = PP_TUNE_RECOMPUTE_FULL;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &full);
    o.recompute = PP_TUNE_RECOMPUTE_NONE;
    o.sequence_parallel = 1;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &sp);
    near(full.layer_w, base.layer_w, "recompute leaves W alone");
    near(sp.layer_w, base.layer_w, "sequence parallelism leaves W alone");
    /* full recompute: I gains the forward, its two all-reduces included */
    near(full.layer_i - base.layer_i, base.layer_f, "recompute in I");
    /* the conjugate all-reduces (2 per layer) are inside I: I exceeds the dgrad share by them */
    cr_expect_gt(base.layer_i - base.layer_w, 2.0 * base.tp_allreduce);
    /* the head's W is its one wgrad GEMM: half of the two GEMMs its fused backward has */
    cr_expect_lt(base.head_w, base.head_i);
}
