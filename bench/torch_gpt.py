#!/usr/bin/env python3
"""torch_gpt.py -- the PyTorch peer of pprun's CPU step: the same GPT shapes (token + learned
position embedding, pre-LN blocks with causal multi-head attention and a tanh-GELU MLP, final
LayerNorm, LM head tied to the token embedding, mean cross-entropy), the same step (gradients
accumulated over N micro-batches of b sequences with loss scale 1/N, global-norm clipping at 1.0,
AdamW lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0), in fp32 on the CPU with T threads.

Prints one JSON line: {"model", "threads", "median_step_seconds", "steps", ...}. A benchmark,
not a test: scripts/bench-vs-torch.sh runs it beside pprun. Model shapes are pprun's presets
(runtime/plan/model.c); only those two are here.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # layers, hidden, heads, ffn, vocab, max seq (runtime/plan/model.c)
    "small": (6, 128, 4, 512, 256, 128),
    "gpt-125m": (12, 768, 12, 3072, 50257, 2048),
}


class Block(nn.Module):
    def __init__(self, c, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c, eps=1e-5)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c, eps=1e-5)
        self.fc = nn.Linear(c, ffn)
        self.out = nn.Linear(ffn, c)

    def forward(self, x):  # x: (B, T, C)
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, c, heads, ffn, vocab, max_seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(max_seq, c)
        self.blocks = nn.ModuleList(Block(c, heads, ffn) for _ in range(layers))
        self.lnf = nn.LayerNorm(c, eps=1e-5)
        for p in self.parameters():  # GPT-2's N(0, 0.02); zero biases
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
            else:
                nn.init.zeros_(p)
        for blk in self.blocks:
            blk.ln1.weight.data.fill_(1), blk.ln2.weight.data.fill_(1)
        self.lnf.weight.data.fill_(1)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="small", choices=sorted(PRESETS))
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--micro-batch-size", type=int, default=1)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    layers, c, heads, ffn, vocab, max_seq = PRESETS[a.model]
    model = GPT(layers, c, heads, ffn, vocab, max_seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0)
    times, losses = [], []
    for _ in range(a.steps):
        data = torch.randint(0, vocab, (a.microbatches, a.micro_batch_size, a.seq + 1))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(a.microbatches):
            loss = model(data[m, :, :-1], data[m, :, 1:]) / a.microbatches
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(total)
    warm = 1 if len(times) > 1 else 0  # the first step pays allocation and thread start-up
    print(json.dumps({"model": a.model, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "microbatches": a.microbatches,
                      "micro_batch_size": a.micro_batch_size, "seq": a.seq,
                      "steps": a.steps, "warmup_steps": warm,
                      "median_step_seconds": statistics.median(times[warm:]),
                      "min_step_seconds": min(times[warm:]),
                      "first_loss": losses[0], "expected_first_loss": math.log(vocab)}))


if __name__ == "__main__":
    main()
