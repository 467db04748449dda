#!/usr/bin/env python3
"""torch_epoch.py: the PyTorch peer of `build/examples/mnist --epochs 1`, for scripts/bench.sh.

Trains one epoch of the same model on the same IDX files with the same recipe (batch 128,
SGD lr 0.05 momentum 0.9, shuffled, images in [0, 1] without normalisation) and prints the
training loop's seconds, timed as the ampgrad trainer times them (data loading and the
evaluation pass are not counted). Leaves out: evaluation, saved states, anything but speed.

    OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_epoch.py --model mlp
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_epoch.py --model cnn --amp bf16

The last line is `torch_epoch model=... amp=... seconds=S train_loss=L`, for the script to read.
"""
import argparse
import ctypes
import gzip
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    """An IDX file (raw or .gz) as a numpy array: magic (0, 0, type, ndim), big-endian dims, data."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    assert data[0] == 0 and data[1] == 0 and data[2] == 0x08, f"{path}: not an unsigned-byte IDX file"
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    sys.exit(f"torch_epoch: no {stem}[.gz] in {data_dir}")


def make_model(name):
    if name == "mlp":  # 784-512-512-10
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    # conv5x5(32)-relu-maxpool2-conv5x5(64)-relu-maxpool2-fc(128)-relu-fc(10); cnn-bn: a BatchNorm2d
    # after each convolution, which then has no bias; cnn-gn: a GroupNorm of 8 groups instead
    norm = {"cnn-bn": lambda c: [nn.BatchNorm2d(c)], "cnn-gn": lambda c: [nn.GroupNorm(8, c)]}.get(name, lambda c: [])
    layers = []
    for cin, cout in ((1, 32), (32, 64)):  # (N, 32, 12, 12), then (N, 64, 4, 4)
        layers += [nn.Conv2d(cin, cout, 5, bias=name == "cnn")] + norm(cout) + [nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10))


def blas_report():
    """Which BLAS torch's float32 GEMM goes to, read from the libraries this process mapped."""
    a = torch.randn(64, 64)
    _ = a @ a  # loads the BLAS if it is loaded lazily
    libs = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if len(line.split()) >= 6 and any(k in line.split()[-1].lower() for k in ("blas", "mkl", "lapack", "omp"))})
    config = torch.__config__.show()
    blas_info = "BLAS_INFO=" + (re.search(r"BLAS_INFO=(\w+)", config) or ["", "?"])[1]
    print(f"torch {torch.__version__}; {blas_info}; threads={torch.get_num_threads()}; mkldnn={torch.backends.mkldnn.is_available()}")
    openblas = [l for l in libs if "openblas" in l.lower()]
    for l in libs:
        print(f"  mapped: {l}")
    if openblas:
        try:
            lib = ctypes.CDLL(openblas[0])
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_corename.restype = ctypes.c_char_p
            print(f"  OpenBLAS: {lib.openblas_get_config().decode()}; kernel {lib.openblas_get_corename().decode()}; "
                  f"threads {lib.openblas_get_num_threads()}")
        except (OSError, AttributeError) as e:
            print(f"  OpenBLAS mapped, but its config could not be read: {e}")
    else:
        print("WARNING: torch does not use OpenBLAS here (none mapped): the comparison is against another BLAS", file=sys.stderr)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if var in os.environ:
            print(f"  env {var}={os.environ[var]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn", "cnn-bn", "cnn-gn"], default="mlp")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--amp", choices=["off", "bf16"], default="off", help="CPU autocast (PyTorch 1.13's CPU autocast is bf16 only)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--limit-train", type=int, default=0, help="use only the first N samples (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=1, help="epochs to train (a line each); after more than one, the test accuracy")
    ap.add_argument("--grad-penalty", type=float, default=0.0, help="λ of the input-gradient penalty λ · mean_n |dloss_n/dx_n|², as the trainer's")
    ap.add_argument("--fgsm", type=float, default=0.0, help="with --epochs > 1, also the test accuracy under an FGSM attack of this size")
    ap.add_argument("--quiet", action="store_true", help="skip the BLAS report")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if not args.quiet:
        blas_report()

    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data, "train-labels-idx1-ubyte"))
    if args.limit_train > 0:
        images, labels = images[:args.limit_train], labels[:args.limit_train]
    x_all = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)  # (N, 1, 28, 28)
    y_all = torch.from_numpy(labels.astype(np.int64))                         # (N)

    model = make_model(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    n = x_all.shape[0]
    for epoch in range(args.epochs):
        model.train()
        t0 = time.perf_counter()
        order = torch.randperm(n)
        loss_sum = torch.zeros(())
        batches = 0
        for start in range(0, n, args.batch_size):
            idx = order[start:start + args.batch_size]
            x, y = x_all[idx], y_all[idx]  # gathered into fresh tensors, as ampgrad's DataLoader does
            opt.zero_grad(set_to_none=True)
            x.requires_grad_(args.grad_penalty > 0)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16"):
                loss = F.cross_entropy(model(x), y)
            objective = loss
            if args.grad_penalty > 0:  # double backpropagation: the loss is a batch mean, so N · Σ g² = mean_n |dloss_n/dx_n|²
                g = torch.autograd.grad(loss, x, create_graph=True)[0]
                objective = loss + (g * g).sum() * (args.grad_penalty * x.shape[0])
            objective.backward()
            opt.step()
            loss_sum += loss.detach().float()
            batches += 1
        seconds = time.perf_counter() - t0
        print(f"torch_epoch model={args.model} amp={args.amp} epoch={epoch + 1} seconds={seconds:.3f} train_loss={loss_sum.item() / batches:.4f}")
    if args.epochs > 1:  # the same test set and metric as the trainer's
        x_test = torch.from_numpy(read_idx(find(args.data, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0).unsqueeze(1)
        y_test = torch.from_numpy(read_idx(find(args.data, "t10k-labels-idx1-ubyte")).astype(np.int64))
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum()) for i in range(0, len(y_test), 1000))
        print(f"torch_test model={args.model} epochs={args.epochs} seed={args.seed} test_acc={correct / len(y_test):.4f}")
        if args.fgsm > 0:  # x + ε·sign(dloss/dx), clamped to [0, 1], as the trainer's --fgsm
            robust = 0
            for i in range(0, len(y_test), 1000):
                x, y = x_test[i:i + 1000].clone().requires_grad_(), y_test[i:i + 1000]
                g = torch.autograd.grad(F.cross_entropy(model(x), y), x)[0]
                with torch.no_grad():
                    robust += int((model((x + args.fgsm * g.sign()).clamp(0, 1)).argmax(1) == y).sum())
            print(f"torch_fgsm eps={args.fgsm} grad_penalty={args.grad_penalty} fgsm_acc={robust / len(y_test):.4f}")

if __name__ == "__main__":
    main()
