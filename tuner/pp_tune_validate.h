/* pp_tune_validate.h — the time model against published end-to-end runs (validate.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_VALIDATE_H
#define PP_TUNE_VALIDATE_H

#include "pp_tune_predict.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Validation against published measurements (validate.c) ----------------------------- */
typedef struct {
    const char *name;    /* "1.7B" */
    const char *cluster; /* the cluster preset that describes the machine */
    int hidden, heads, layers;
    int model_parallel;  /* t.p */
    int gpus, global_batch, seq, vocab;
    double tflops_per_gpu; /* published, the paper's FLOP count (recompute included) */
    const char *source;
    int micro_batch;       /* the run's micro-batch size; 0: not published (chosen) */
    int chunks;            /* the run's model chunks per rank (v); 0: not published (chosen) */
} pp_tune_published;

/* The bundled table (static storage); *n receives the count. */
const pp_tune_published *pp_tune_published_rows(int *n);
/* The row's published step time, s: its FLOP count over the measured rate. */
double pp_tune_published_step(const pp_tune_published *r);

#define PP_TUNE_VALIDATE_MAX 32
typedef struct {
    const pp_tune_published *row;
    pp_config cfg;    /* the layout predicted (the published (b, v), else the fastest) */
    double published_step; /* s */
    double predicted_step; /* s */
    double error;          /* predicted / published - 1 */
} pp_tune_check;

typedef struct {
    int n;
    pp_tune_check rows[PP_TUNE_VALIDATE_MAX];
    double median_abs, max_abs; /* of |error| */
    char hw_note[400];          /* where the first row's hardware figures came from */
} pp_tune_validation;

/* The row's model, by the name validate gives it ("megatron-1.7B"): pp_tune_model_preset
 * falls back to it, so simulate takes it as --model. PP_ERR_NOTFOUND: no such row. */
pp_status pp_tune_published_model(const char *name, pp_tune_model *m);
/* The `pptune simulate ...` command that predicts c's row as validate did (every setting a
 * flag of simulate; the effects validate's --without switches off are not). Returns buf. */
char *pp_tune_check_simulate_line(const pp_tune_check *c, char *buf, size_t n);

/* Predicts every bundled row with the time model (effects in `without` off; 0 for the model
 * every command uses). PP_ERR_INVALID when a row has no layout that fits. */
pp_status pp_tune_validate(unsigned without, pp_tune_validation *out);

#ifdef __cplusplus
}
#endif
#endif
