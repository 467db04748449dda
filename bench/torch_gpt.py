#!/usr/bin/env python3
"""torch_gpt.py: the PyTorch peer of `build/examples/gpt`, for scripts/bench.sh.

The same character-level GPT (GPT-2's layout and initialisation, attention written out as
PyTorch's math path: q and k scaled by sqrt(scale) each, causal mask, softmax, times v), on the
same text with the same recipe (AdamW with weight decay on the matrices only, a linear warmup then
a cosine to lr/10, gradient clipping, batches of random
windows; scripts/bench.sh passes both programs every setting) and the same report: per
evaluation, the loss on fixed random batches of each split and the training steps' mean time.
With the same initial weights and batches, the two libraries' losses agree to 1e-6 for 500
steps; here each draws its own. Leaves out: sampling, dropout, anything but speed and loss.
PyTorch's CPU autocast takes bf16 only, so there is no fp16 run here.

    OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_gpt.py --steps 500 --amp bf16

The last line is `torch_gpt amp=... ms_per_step=M val_loss=L` (M: the median of the intervals').
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H, fused_attention=False):
        super().__init__()
        self.H, self.fused_attention = H, fused_attention
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def attention(self, x):  # (B, T, C)
        B, T, C = x.shape
        q, k, v = (t.reshape(B, T, self.H, C // self.H).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        if self.fused_attention:  # PyTorch at its best on a GPU (flash attention); needs PyTorch >= 2.0
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        s = math.sqrt(1 / math.sqrt(C // self.H))
        scores = (q * s) @ (k * s).transpose(-2, -1)  # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        y = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        return self.attn_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, V, block, layers, heads, C, fused_attention=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(block, C)
        self.h = nn.Sequential(*[Block(C, heads, fused_attention) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        for name, p in self.named_parameters():  # GPT-2's initialisation, as examples/gpt/model.cpp
            if "ln_" in name:
                continue
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if name.endswith("_proj.weight") else 0.02)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return self.lm_head(self.ln_f(self.h(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default="/usr/share/games/fortunes/songs-poems")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip-grad", type=float, default=1.0)
    ap.add_argument("--amp", choices=["off", "bf16"], default="off")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    B, T, layers, heads, C, lr = a.batch_size, a.block_size, a.layers, a.heads, a.embd, a.lr

    raw = open(a.text, "rb").read()
    vocab = sorted(set(raw))
    lut = {b: i for i, b in enumerate(vocab)}
    ids = torch.tensor([lut[b] for b in raw], dtype=torch.long)
    n = len(raw) * 9 // 10
    train, val = ids[:n], ids[n:]

    def batch(tokens, gen):
        starts = torch.randint(0, len(tokens) - T, (B,), generator=gen)
        return torch.stack([tokens[s:s + T] for s in starts]), torch.stack([tokens[s + 1:s + T + 1] for s in starts])

    model = GPT(len(vocab), T, layers, heads, C)
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": a.weight_decay},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr=lr)
    W = a.warmup_steps

    def factor(done):
        if done < W:
            return (done + 1) / W
        return 0.1 + 0.9 * (1 + math.cos(math.pi * (done - W) / max(a.steps - W, 1))) / 2
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    amp = dict(device_type="cpu", dtype=torch.bfloat16, enabled=a.amp == "bf16")

    def evaluate(tokens):
        gen = torch.Generator().manual_seed(a.seed + 1)
        model.eval()
        with torch.no_grad(), torch.autocast(**amp):
            loss = sum(F.cross_entropy(model(x).float().flatten(0, 1), y.flatten()).item()
                       for x, y in (batch(tokens, gen) for _ in range(a.eval_batches)))
        model.train()
        return loss / a.eval_batches

    gen = torch.Generator().manual_seed(a.seed)
    intervals, t_sum, val_loss = [], 0.0, float("nan")
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()  # from the batch on, as the ampgrad trainer times a step
        x, y = batch(train, gen)
        with torch.autocast(**amp):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad)
        opt.step()
        sched.step()
        t_sum += time.perf_counter() - t0
        if step % a.eval_every == 0 or step == a.steps:
            intervals.append(1000 * t_sum / (step - (len(intervals) * a.eval_every)))
            t_sum = 0.0
            val_loss = evaluate(val)
            print(f"step {step:5d}  train_loss {evaluate(train):.4f}  val_loss {val_loss:.4f}  {intervals[-1]:.1f} ms/step", flush=True)
    print(f"torch_gpt amp={a.amp} ms_per_step={statistics.median(intervals):.2f} val_loss={val_loss:.4f}")


if __name__ == "__main__":
    main()
