#!/usr/bin/env python3
"""torch_gpu_step.py: the PyTorch peer of build/bench/gpu_step, for scripts/gpu-check.sh.

The same training step, fused AdamW (lr 1e-4), in float32 with TF32 off, float16 autocast with
GradScaler, and bfloat16 autocast, for one of two models:
  --model mlp: 4 Linear layers 4096 wide with ReLU between, batch 2048, cross-entropy over 4096 classes;
  --model gpt: torch_gpt.py's transformer, 6 layers x 384 wide (6 heads), block 256, batch 64, 65
               tokens, on random tokens, its attention F.scaled_dot_product_attention (flash).
Each step is timed on the device by CUDA events recorded between steps (no host sync inside the
timed region). Leaves out: correctness, CPU timing.

    python3 bench/torch_gpu_step.py --model gpt --steps 50
    python3 bench/torch_gpu_step.py --profile   # and one step of each under torch.profiler, on stderr

Prints one line per precision, `torch <model> <precision> <median ms/step>`, as gpu_step does.
"""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_gpt import GPT


def make_bench(args):
    """The model in float32 on the GPU, and its loss on a fixed random batch."""
    torch.manual_seed(0)
    if args.model == "mlp":
        layers = []
        for i in range(args.layers):
            if i > 0:
                layers.append(nn.ReLU())
            layers.append(nn.Linear(args.width, args.width))
        model = nn.Sequential(*layers).cuda()
        torch.manual_seed(1)
        x = torch.randn(args.batch, args.width, device="cuda")
        y = torch.randint(0, args.width, (args.batch,), device="cuda")
        return model, lambda: F.cross_entropy(model(x), y)
    model = GPT(args.vocab, args.block, args.layers, 6, args.width, fused_attention=True).cuda()
    torch.manual_seed(1)
    idx, nxt = (torch.randint(0, args.vocab, (args.batch, args.block), device="cuda") for _ in range(2))
    return model, lambda: F.cross_entropy(model(idx).flatten(0, 1), nxt.flatten())


def median_ms_per_step(precision, args, model, loss_fn):
    use_amp = precision != "fp32"
    amp_dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(args.warmup):
        step()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    torch.cuda.synchronize()
    for i in range(args.steps):
        marks[i].record()
        step()
    marks[args.steps].record()
    torch.cuda.synchronize()
    ms = sorted(marks[i].elapsed_time(marks[i + 1]) for i in range(args.steps))
    if args.profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        print(f"--- {precision}: each kernel on the device", file=sys.stderr)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70), file=sys.stderr)
    return ms[args.steps // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--model", choices=["mlp", "gpt"], default="mlp")
    p.add_argument("--width", type=int, help="default: 4096 (mlp), 384 (gpt)")
    p.add_argument("--batch", type=int, help="default: 2048 (mlp), 64 (gpt)")
    p.add_argument("--layers", type=int, help="default: 4 (mlp), 6 (gpt)")
    p.add_argument("--block", type=int, default=256, help="gpt only")
    p.add_argument("--vocab", type=int, default=65, help="gpt only")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    mlp = args.model == "mlp"
    args.width = args.width or (4096 if mlp else 384)
    args.batch = args.batch or (2048 if mlp else 64)
    args.layers = args.layers or (4 if mlp else 6)
    torch.backends.cuda.matmul.allow_tf32 = False  # the default, stated: float32 means float32
    model, loss_fn = make_bench(args)
    for precision in ("fp32", "fp16", "bf16"):
        print(f"torch {args.model} {precision} {median_ms_per_step(precision, args, model, loss_fn):.3f}", flush=True)


if __name__ == "__main__":
    main()
