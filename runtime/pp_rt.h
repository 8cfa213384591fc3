/* pp_rt.h — the bundled pipeline runtime: a GPT-style decoder split into stages, backends that
 * compute it, transports that move tensors between ranks, and the executor that walks a
 * pp_sched's per-rank action lists for one training step.
 *
 * Layering (each part usable on its own, tested on its own):
 *   pp_model_cfg      sizes of the model (layers, hidden, heads, ffn, vocab, seq)
 *   pp_backend        a table of functions (buffers with byte accounting, GEMM, layer kernels)
 *                     + a context; the CPU backend (OpenBLAS + C) is the numerical reference
 *   pp_rt_stage       the parameters, gradients and saved activations of one stage (a layer
 *                     range, plus the embedding on a pipe's first stage and final LN + head +
 *                     loss on its last); forward / backward of one micro-batch at a time
 *   pp_transport      a table of functions moving tensors between ranks (threads in-process,
 *                     processes over MPI; NCCL in runtime/cuda/)
 *   pp_rt_executor    runs every rank's actions for one step, then gradient syncs and AdamW
 *
 * Shapes: B micro-batch size, T sequence length, C hidden, V vocabulary. Activations passed
 * between stages are fp32 (B, T, C) row-major; tokens are int32 (B, T).
 * Ownership: *_create returns an object the caller frees with *_destroy (NULL is a no-op).
 *
 * This header is the umbrella: each part has its own header, which stands alone:
 *   pp_rt_model.h, pp_rt_mem.h, pp_rt_plan.h (runtime/plan/, library pp_rt_plan: sizes of the
 *   model, memory categories, the memory plan), pp_rt_backend.h, pp_rt_stage.h,
 *   pp_rt_transport.h, pp_rt_executor.h, pp_rt_checkpoint.h, pp_rt_trace.h, pp_rt_data.h,
 *   pp_rt_launch.h, pp_rt_safetensors.h (HuggingFace checkpoints). Include the one you use;
 *   existing callers of pp_rt.h keep compiling.
 */
#ifndef PP_RT_H
#define PP_RT_H

#include "pp_rt_backend.h"
#include "pp_rt_checkpoint.h"
#include "pp_rt_data.h"
#include "pp_rt_executor.h"
#include "pp_rt_launch.h"
#include "pp_rt_mem.h"
#include "pp_rt_model.h"
#include "pp_rt_plan.h"
#include "pp_rt_safetensors.h"
#include "pp_rt_stage.h"
#include "pp_rt_trace.h"
#include "pp_rt_transport.h"
#include "pp_rt_weights.h"

#endif
