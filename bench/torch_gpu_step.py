#!/usr/bin/env python3
"""torch_gpu_step.py: the PyTorch peer of build/bench/gpu_step, for scripts/gpu-check.sh.

The same training step: 4 Linear layers 4096 wide with ReLU between, batch 2048, cross-entropy
over 4096 classes, fused AdamW (lr 1e-4), in float32 with TF32 off, float16 autocast with
GradScaler, and bfloat16 autocast. Each step is timed on the device by CUDA events recorded
between steps (no host sync inside the timed region). Leaves out: correctness, CPU timing.

    python3 bench/torch_gpu_step.py --steps 50
    python3 bench/torch_gpu_step.py --profile   # and one step of each under torch.profiler, on stderr

Prints one line per precision, `torch <precision> <median ms/step>`, as gpu_step does.
"""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def median_ms_per_step(precision, args, model):
    use_amp = precision != "fp32"
    amp_dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    torch.manual_seed(1)
    x = torch.randn(args.batch, args.width, device="cuda")
    y = torch.randint(0, args.width, (args.batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
            loss = F.cross_entropy(model(x), y)
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
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # the default, stated: float32 means float32
    torch.manual_seed(0)
    layers = []
    for i in range(args.layers):
        if i > 0:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(args.width, args.width))
    model = nn.Sequential(*layers).cuda()
    for precision in ("fp32", "fp16", "bf16"):
        print(f"torch {precision} {median_ms_per_step(precision, args, model):.3f}", flush=True)


if __name__ == "__main__":
    main()
