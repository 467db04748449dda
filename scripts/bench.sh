#!/usr/bin/env bash
# bench.sh — ampgrad's speed measurements: GEMM against this CPU's FMA peak (bench/gemm.cpp),
# whole Fashion-MNIST epochs against PyTorch (bench/torch_epoch.py) and the character GPT's
# training steps against PyTorch's (bench/torch_gpt.py), measured in the same run, alternating,
# reported as medians and ratios. The peer is PyTorch at its best on this machine: before each
# comparison a sweep runs it once with each OpenBLAS kernel this CPU can run (its default, and
# Haswell, SkylakeX, Cooperlake where the CPU has their instructions: an OpenBLAS that does not
# know a CPU falls back to its SSE3 Prescott kernel, at half speed), then, on the fastest kernel,
# once in every thread setting (intra-op threads 1 or 2 x OpenBLAS threads 1 or 2 x
# OMP_WAIT_POLICY active or passive); it prints them all and keeps the fastest for the
# alternating runs, naming the kernel beside every ratio, and warns when that kernel is below the
# CPU's. Speed only: correctness is scripts/test.sh's.
#
#   scripts/bench.sh gemm            # GEMM + MLP-step table (Google Benchmark, medians of 5)
#   scripts/bench.sh mlp             # MLP epoch, ampgrad vs PyTorch, 3 runs each, alternating
#   scripts/bench.sh cnn             # CNN epoch, 1 run each (PyTorch takes ~30 s here)
#   scripts/bench.sh cnn-bn          # the CNN with batch norm, likewise (--cnn-runs for both)
#   scripts/bench.sh amp             # ampgrad's fp16/bf16 autocast epochs vs its float32 epoch
#   scripts/bench.sh amp --torch-amp # ... and PyTorch's CPU bf16 autocast epoch beside them
#   scripts/bench.sh gpt             # GPT ms/step and loss: ampgrad f32/fp16/bf16, PyTorch f32/bf16
#   scripts/bench.sh all --wait-quiet
#
# Results (raw JSON, per-run logs) go to build/bench-results/. Two cores: never run two
# benchmarks at once, and let nothing else run during one (--wait-quiet waits for the load).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/bench.sh [gemm|mlp|cnn|cnn-bn|amp|gpt|all]... [options]
  --runs N          runs per side for mlp, amp and gpt (default 3; gpt run i uses seed i)
  --cnn-runs N      epoch runs per side for cnn and cnn-bn (default 1)
  --amp-model M     model of the amp section: mlp | cnn | cnn-bn (default mlp)
  --torch-amp       amp section: also PyTorch's float32 and CPU bf16 autocast epochs (slow for cnn)
  --gpt-steps N     training steps per GPT run (default 500)
  --no-torch-sweep  PyTorch as installed (intra-op and OpenMP threads = --threads, OpenBLAS's own
                    default, OMP_WAIT_POLICY unset) instead of its best setting found by the sweep
  --reps N          Google Benchmark repetitions for gemm (default 5; medians reported)
  --filter REGEX    Google Benchmark filter for gemm (default: all)
  --limit-train N   train on the first N samples only (smoke tests; figures then not comparable)
  --threads N       threads for both sides (default 2)
  --wait-quiet      before each section, wait (up to 10 min) until the CPUs are < 10% busy
  --no-build        skip the build
EOF
}

sections=() runs=3 cnn_runs=1 gpt_steps=500 amp_model=mlp torch_amp=0 torch_sweep=1 reps=5 filter="" limit=0 threads=2 wait_quiet=0 build=1
while (($#)); do
  case "$1" in
    gemm | mlp | cnn | cnn-bn | amp | gpt) sections+=("$1") ;;
    all) sections+=(gemm mlp cnn cnn-bn amp gpt) ;;
    --runs) runs=$2; shift ;;
    --cnn-runs) cnn_runs=$2; shift ;;
    --gpt-steps) gpt_steps=$2; shift ;;
    --amp-model) amp_model=$2; shift ;;
    --torch-amp) torch_amp=1 ;;
    --no-torch-sweep) torch_sweep=0 ;;
    --reps) reps=$2; shift ;;
    --filter) filter=$2; shift ;;
    --limit-train) limit=$2; shift ;;
    --threads) threads=$2; shift ;;
    --wait-quiet) wait_quiet=1 ;;
    --no-build) build=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
((${#sections[@]})) || sections=(gemm mlp)

out=build/bench-results
PY=/usr/bin/python3  # Debian's: the one python3-torch and python3-numpy are installed for
export OMP_NUM_THREADS=$threads  # one pool per process, sized to the cores, for both sides

# ---- helpers ----
# Share of the CPUs busy over the next 2 s, in percent, from /proc/stat (we are idle meanwhile, so
# it is everyone else: other sessions' processes count here even when ps cannot show them).
busy_pct() {
  local a b
  a=($(head -n1 /proc/stat)); sleep 2; b=($(head -n1 /proc/stat))
  local idle=$(((b[4] + b[5]) - (a[4] + a[5]))) total=0 i
  for ((i = 1; i < ${#a[@]}; i++)); do total=$((total + b[i] - a[i])); done
  echo $((total > 0 ? 100 * (total - idle) / total : 0))
}
check_quiet() {
  local busy
  busy=$(busy_pct)
  if ((wait_quiet)); then
    local waited=0
    local calm=0  # three 2-s samples in a row under 10%: a build between two files does not count
    while ((calm < 3 && waited < 600)); do
      if ((busy < 10)); then calm=$((calm + 1)); else
        ((waited == 0)) && echo "waiting for the CPUs to go quiet (now ${busy}% busy) ..."
        calm=0
      fi
      ((calm < 3)) && { busy=$(busy_pct); waited=$((waited + 2)); }
    done
  fi
  echo "before this section: CPUs ${busy}% busy (2 s sample); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  ((busy < 10)) || echo "WARNING: something else is using the CPUs: timings below are not trustworthy"
}
# The median of a[i] / b[i] over paired runs ("a1 a2 ..." "b1 b2 ..."): on a shared machine whose
# speed drifts, each ratio is taken between runs made moments apart.
paired() { paste -d' ' <(tr -s ' ' '\n' <<<"$1" | grep .) <(tr -s ' ' '\n' <<<"$2" | grep .) | awk '{ printf "%.6f\n", $1 / $2 }' | median | xargs printf '%.2f'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
have_torch() { "$PY" -c 'import torch' 2>/dev/null; }

# One ampgrad epoch: prints the training loop's seconds (the trainer's own timer, from --metrics).
ampgrad_epoch() {  # model amp tag
  local csv="$out/ampgrad-$1-$2-$3.csv" log="$out/ampgrad-$1-$2-$3.log"
  local extra=()
  ((limit > 0)) && extra+=(--limit-train "$limit" --limit-test 1000)
  build/examples/mnist --dataset fashion --model "$1" --amp "$2" --epochs 1 --batch-size 128 --optimizer sgd \
    --lr 0.05 --momentum 0.9 --threads "$threads" --metrics "$csv" "${extra[@]}" >"$log" 2>&1 ||
    { echo "ampgrad epoch failed, see $log" >&2; cat "$log" >&2; return 1; }
  tail -n 1 "$csv" | cut -d, -f5
}

# PyTorch's settings, "INTRA BLAS WAIT KERNEL": intra-op threads (set_num_threads and
# OMP_NUM_THREADS), OpenBLAS threads, OMP_WAIT_POLICY, OpenBLAS's kernel (OPENBLAS_CORETYPE;
# "default": the one it picks itself). Debian's torch has two pools, its OpenMP one and OpenBLAS's
# pthreads; on 2 cores each may spin while the other works, so which setting is fastest depends on
# the machine and the model: the sweep finds out. "as-installed" is --no-torch-sweep's.
torch_settings() {  # kernel
  local i b w
  for i in 1 2; do for b in 1 2; do for w in active passive; do echo "$i $b $w $1"; done; done; done
}
# The OpenBLAS kernels this CPU runs: its default, and those whose instructions /proc/cpuinfo lists.
blas_kernels() {
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  echo default
  [[ $flags == *" avx2 "* && $flags == *" fma "* ]] && echo Haswell
  [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* && $flags == *" avx512dq "* ]] && echo SkylakeX
  [[ $flags == *" avx512f "* && $flags == *" avx512_bf16 "* ]] && echo Cooperlake
  return 0
}
# The best kernel this CPU runs, by the same test: a ratio against a slower one is named as such.
best_blas_kernel() { blas_kernels | tail -n 1; }
# runs a PyTorch script in one setting: OPENBLAS_CORETYPE set to the setting's kernel, or unset
# ("default"), and OPENBLAS_L2_SIZE unset, for this command alone
torch_in() {  # setting script args...
  local envs=() threads_arg=(--threads "$threads") kernel=default
  if [ "$1" != as-installed ]; then
    read -r i b w kernel <<<"$1"
    envs=(OMP_NUM_THREADS="$i" OPENBLAS_NUM_THREADS="$b" OMP_WAIT_POLICY="${w^^}")
    threads_arg=(--threads "$i")
  fi
  [ "$kernel" != default ] && envs+=(OPENBLAS_CORETYPE="$kernel")
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${envs[@]}" "$PY" "$2" "${@:3}" "${threads_arg[@]}"
}
# The kernel OpenBLAS runs in a setting, as it reports itself (openblas_get_corename).
blas_kernel_of() {  # setting
  torch_in "$1" bench/torch_epoch.py --model mlp --limit-train 256 2>/dev/null | sed -n 's/.*; kernel \([A-Za-z0-9]*\);.*/\1/p'
}
# What a ratio against the peer in this setting must say: nothing where OpenBLAS runs this CPU's
# best kernel; else that it does not, and whether the sweep chose it (faster here) or nobody did.
kernel_caveat() {  # setting
  local k best
  k=$(blas_kernel_of "$1") best=$(best_blas_kernel)
  [ "$best" = default ] || [ "$k" = "$best" ] || [[ $k == Cooperlake || $k == SapphireRapids ]] && return
  if ((torch_sweep)); then
    echo " (PyTorch's OpenBLAS runs kernel ${k:-?}, below this CPU's $best: the sweep's fastest here)"
  else
    echo " (CAVEAT: PyTorch's OpenBLAS runs kernel ${k:-?}, below this CPU's $best: not the peer at its best)"
  fi
}
# One PyTorch epoch in a setting: prints its seconds.
torch_epoch() {  # model amp setting tag [--quiet]
  local log="$out/torch-$1-$2-$4.log"
  local extra=()
  ((limit > 0)) && extra+=(--limit-train "$limit")
  torch_in "$3" bench/torch_epoch.py --model "$1" --amp "$2" "${extra[@]}" "${@:5}" >"$log" 2>&1 ||
    { echo "PyTorch epoch failed, see $log" >&2; cat "$log" >&2; return 1; }
  grep -q '^WARNING' "$log" && grep '^WARNING' "$log" >&2
  sed -n 's/^torch_epoch .* seconds=\([0-9.]*\) .*/\1/p' "$log"
}
# PyTorch's best setting for one kind of run: `sweep_torch FN ARGS...` runs `FN ARGS... SETTING`
# (which prints seconds or ms) once per setting, prints each, and sets torch_best to the fastest:
# first each OpenBLAS kernel at 2 intra-op threads, 1 OpenBLAS thread, passive waits; then every
# thread setting on the fastest kernel. Without the sweep (--no-torch-sweep): as installed.
sweep_torch() {
  torch_best=as-installed
  ((torch_sweep)) || return 0
  local best_t="" best_k=default s t k
  echo "  PyTorch's OpenBLAS kernels (intra-op threads 2, OpenBLAS threads 1, passive waits), one run each:"
  while read -r k; do
    t=$("$@" "2 1 passive $k")
    printf '    %-30s %8s   (runs kernel %s)\n' "$k" "$t" "$(blas_kernel_of "2 1 passive $k")"
    if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then best_t=$t best_k=$k; fi
  done < <(blas_kernels)
  best_t=""
  echo "  PyTorch's thread settings on kernel $best_k (intra-op threads, OpenBLAS threads, OMP_WAIT_POLICY), one run each:"
  while read -r s; do
    t=$("$@" "$s")
    printf '    %-30s %8s\n' "$s" "$t"
    if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then best_t=$t torch_best=$s; fi
  done < <(torch_settings "$best_k")
  echo "  best: $torch_best ($best_t), OpenBLAS kernel $(blas_kernel_of "$torch_best"); the runs below use it$(kernel_caveat "$torch_best")"
}

sweep_epoch() { torch_epoch "$1" "$2" "$3" sweep --quiet; }  # model amp setting

# Alternates ampgrad and PyTorch epochs of one model, n runs each, PyTorch in its best setting;
# prints the medians and the ratio.
compare_epochs() {  # model n
  local model=$1 n=$2 a=() t=()
  echo
  echo "== $model epoch, Fashion-MNIST $( ((limit > 0)) && echo "first $limit" || echo 60000 ), batch 128, SGD(0.05, 0.9), $threads threads: ampgrad vs PyTorch, $n run(s) each, alternating"
  if ! have_torch; then
    echo "PyTorch is not importable by $PY (scripts/install-deps.sh --bench installs it): ampgrad only"
  else
    torch_in as-installed bench/torch_epoch.py --model "$model" --limit-train 256 >"$out/torch-blas.log" 2>&1 || true
    grep -v '^torch_epoch' "$out/torch-blas.log" | sed 's/^/  /'
  fi
  check_quiet
  have_torch && sweep_torch sweep_epoch "$model" off
  for ((i = 1; i <= n; i++)); do
    a+=("$(ampgrad_epoch "$model" off "$i")")
    printf '  run %d: ampgrad %6.2f s' "$i" "${a[-1]}"
    if have_torch; then
      t+=("$(torch_epoch "$model" off "$torch_best" "$i" --quiet)")
      printf '   PyTorch (%s) %6.2f s' "$torch_best" "${t[-1]}"
    fi
    echo
  done
  local am tm
  am=$(printf '%s\n' "${a[@]}" | median)
  if have_torch; then
    tm=$(printf '%s\n' "${t[@]}" | median)
    printf '  median: ampgrad %.2f s   PyTorch (%s) %.2f s   ampgrad/PyTorch %s%s\n' "$am" "$torch_best" "$tm" "$(ratio "$am" "$tm")" "$(kernel_caveat "$torch_best")"
  else
    printf '  median: ampgrad %.2f s\n' "$am"
  fi
}

section_gemm() {
  echo
  echo "== GEMM and MLP step (bench/gemm.cpp), median of $reps repetitions"
  check_quiet
  local json="$out/gemm.json"
  # random interleaving spreads each benchmark's repetitions over the whole run, so a burst of
  # outside load spoils one repetition of many benchmarks (which the median drops), not all of one
  # The JSON file keeps every repetition (display_aggregates_only limits the console only), so the
  # table can show the best repetition beside the median: on a shared 2-core machine the best is
  # the one nothing else interrupted.
  build/bench/gemm --benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true --benchmark_enable_random_interleaving=true \
    ${filter:+--benchmark_filter="$filter"} --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json >/dev/null
  "$PY" - "$json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ctx = d["context"]
print(f"  {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz (nominal); AVX2 FMA peak (one core measured, times threads): "
      f"{ctx.get('fma_peak_gflops_1t', '?')} GFLOP/s on 1 thread, {ctx.get('fma_peak_gflops_2t', '?')} on 2")
runs = {}
for b in d["benchmarks"]:
    if b.get("run_type") == "iteration":
        runs.setdefault(b["run_name"].replace("/real_time", ""), []).append(b)
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
def order(k):  # fma_peak, matmul f32/f16/bf16, mlp_step; then threads, then size
    fam = next((i for i, p in enumerate(["fma_peak", "matmul_n/f32", "matmul_n/f16", "matmul_n/bf16",
                                          "mlp_step/f32", "mlp_step/amp_f16", "mlp_step/amp_bf16"]) if k.startswith(p + "/")), 99)
    args = dict(a.split(":") for a in k.split("/") if ":" in a)
    return (fam, int(args.get("threads", 0)), int(args.get("n", 0)), k)
stat = {}
for k, rs in runs.items():
    t = [r["real_time"] for r in rs]
    gf = [r["GFLOP/s"] for r in rs if "GFLOP/s" in r]
    pk = [r["of_peak"] for r in rs if "of_peak" in r]
    stat[k] = dict(n=len(rs), t=median(t), tbest=min(t), gf=median(gf) if gf else None, gfbest=max(gf) if gf else None,
                   pk=median(pk) if pk else None, spread=(max(t) - min(t)) / median(t))
f32 = {k.split("/", 2)[2]: v["t"] for k, v in stat.items() if k.startswith(("matmul_n/f32/", "mlp_step/f32/"))}
fmt = lambda x, f: "" if x is None else format(x, f)
print(f"  {'benchmark (median of ' + str(max(v['n'] for v in stat.values())) + ')':38s} {'time ms':>9s} {'best ms':>9s} {'spread':>6s} "
      f"{'GFLOP/s':>8s} {'best':>6s} {'of peak':>7s} {'vs f32':>6s}")
for k in sorted(stat, key=order):
    v = stat[k]
    parts = k.split("/")
    base = f32.get("/".join(parts[2:])) if parts[0] in ("matmul_n", "mlp_step") else None
    print(f"  {k:38s} {v['t']:9.3f} {v['tbest']:9.3f} {100 * v['spread']:5.0f}% {fmt(v['gf'], '8.1f'):>8s} {fmt(v['gfbest'], '6.1f'):>6s} "
          f"{fmt(v['pk'], '7.2f'):>7s} {'' if not base else format(v['t'] / base, '5.2f') + 'x':>6s}")
EOF
  echo "  (spread: (slowest - fastest) / median of the repetitions; of peak: median GFLOP/s / measured FMA peak on as"
  echo "   many threads; vs f32: median time / float32's at the same size and threads; raw JSON: $json)"
}

section_amp() {
  local model=$amp_model n=$runs
  [ "$model" != mlp ] && n=$cnn_runs
  echo
  echo "== AMP epochs ($model): ampgrad float32 vs autocast fp16 / bf16, $n run(s) each, interleaved"
  # the line a 16-bit run prints first: which path its GEMMs take on this CPU, and what to expect
  local amp
  for amp in bf16 fp16; do
    build/examples/mnist --dataset fashion --amp $amp --epochs 1 --limit-train 128 --limit-test 128 2>/dev/null | grep '^cpu:' | sed 's/^/  /' || true
  done
  check_quiet
  local off=() f16=() b16=() toff=() tb16=() best_off best_b16
  local with_torch=0
  ((torch_amp)) && have_torch && with_torch=1
  if ((with_torch)); then
    sweep_torch sweep_epoch "$model" off && best_off=$torch_best
    sweep_torch sweep_epoch "$model" bf16 && best_b16=$torch_best
  fi
  for ((i = 1; i <= n; i++)); do
    off+=("$(ampgrad_epoch "$model" off "amp$i")")
    f16+=("$(ampgrad_epoch "$model" fp16 "amp$i")")
    b16+=("$(ampgrad_epoch "$model" bf16 "amp$i")")
    printf '  run %d: ampgrad f32 %6.2f s  fp16 %6.2f s  bf16 %6.2f s' "$i" "${off[-1]}" "${f16[-1]}" "${b16[-1]}"
    if ((with_torch)); then
      toff+=("$(torch_epoch "$model" off "$best_off" "amp$i" --quiet)")
      tb16+=("$(torch_epoch "$model" bf16 "$best_b16" "amp$i" --quiet)")
      printf '   PyTorch f32 %6.2f s  bf16 %6.2f s' "${toff[-1]}" "${tb16[-1]}"
    fi
    echo
  done
  local mo mf mb
  mo=$(printf '%s\n' "${off[@]}" | median)
  mf=$(printf '%s\n' "${f16[@]}" | median)
  mb=$(printf '%s\n' "${b16[@]}" | median)
  printf '  median ampgrad: f32 %.2f s  fp16 %.2f s (%sx f32)  bf16 %.2f s (%sx f32)\n' "$mo" "$mf" "$(ratio "$mf" "$mo")" "$mb" "$(ratio "$mb" "$mo")"
  printf '  median of the runs'"'"' own ratios (each 16-bit epoch over the float32 epoch beside it): fp16 %sx  bf16 %sx\n' \
    "$(paired "${f16[*]}" "${off[*]}")" "$(paired "${b16[*]}" "${off[*]}")"
  if ((with_torch)); then
    local to tb
    to=$(printf '%s\n' "${toff[@]}" | median)
    tb=$(printf '%s\n' "${tb16[@]}" | median)
    echo "  (PyTorch's settings: f32 $best_off, bf16 $best_b16)"
    printf '  median PyTorch: f32 %.2f s  bf16 autocast %.2f s (%sx f32); ampgrad f32 / PyTorch f32 %s%s; ampgrad bf16 / PyTorch bf16 %s\n' \
      "$to" "$tb" "$(ratio "$tb" "$to")" "$(ratio "$mo" "$to")" "$(kernel_caveat "$best_off")" "$(ratio "$mb" "$tb")"
  elif ((!torch_amp)); then
    echo "  (PyTorch's CPU bf16 autocast epoch: add --torch-amp)"
  fi
}

# One GPT run of $gpt_steps steps with seed $2: prints "ms_per_step val_loss" (ms: the median of
# the intervals between evaluations). ampgrad's from its metrics CSV, PyTorch's from its last
# line. Both sides get every setting spelled out, so a changed default cannot part them.
gpt_settings=(--steps "$gpt_steps" --eval-every 100 --eval-batches 20 --batch-size 32 --block-size 64 --layers 2 --heads 4
              --embd 64 --lr 2e-3 --warmup-steps 100 --weight-decay 0.1 --clip-grad 1.0 --threads "$threads")
ampgrad_gpt() {  # amp seed
  local csv="$out/ampgrad-gpt-$1-$2.csv" log="$out/ampgrad-gpt-$1-$2.log"
  build/examples/gpt "${gpt_settings[@]}" --amp "$1" --seed "$2" --sample 0 --metrics "$csv" >"$log" 2>&1 ||
    { echo "ampgrad GPT run failed, see $log" >&2; cat "$log" >&2; return 1; }
  echo "$(tail -n +2 "$csv" | cut -d, -f6 | median) $(tail -n 1 "$csv" | cut -d, -f3)"
}
torch_gpt() {  # amp seed setting
  local log="$out/torch-gpt-$1-$2.log"
  # --threads comes last from torch_in, overriding gpt_settings' own
  torch_in "$3" bench/torch_gpt.py "${gpt_settings[@]}" --amp "$1" --seed "$2" >"$log" 2>&1 ||
    { echo "PyTorch GPT run failed, see $log" >&2; cat "$log" >&2; return 1; }
  sed -n 's/^torch_gpt .* ms_per_step=\([0-9.]*\) val_loss=\([0-9.a-z]*\)$/\1 \2/p' "$log"
}
sweep_gpt() { local r; r=$(torch_gpt "$1" 1 "$2"); echo "${r% *}"; }  # amp setting: ms/step

section_gpt() {
  echo
  echo "== GPT training steps (examples/gpt defaults: 2 layers, 4 heads, 64 wide, block 64, batch 32), $gpt_steps steps a run,"
  echo "   $runs run(s) of each (run i: seed i), interleaved: ms/step (median of the evaluation intervals) and the last val_loss"
  local with_torch=0
  have_torch && with_torch=1 || echo "  (PyTorch is not importable by $PY: ampgrad only)"
  ((with_torch)) && echo "  (PyTorch's CPU autocast has bf16 only)"
  check_quiet
  declare -A best
  if ((with_torch)); then
    for amp in off bf16; do
      echo "  PyTorch $amp:"
      sweep_torch sweep_gpt "$amp"
      best[$amp]=$torch_best
    done
  fi
  local kinds=(ampgrad:off ampgrad:fp16 ampgrad:bf16) k i
  ((with_torch)) && kinds+=(torch:off torch:bf16)
  declare -A ms loss
  for ((i = 1; i <= runs; i++)); do
    printf '  run %d:' "$i"
    for k in "${kinds[@]}"; do
      local r
      r=$("${k%%:*}_gpt" "${k#*:}" "$i" "${best[${k#*:}]:-}")  # "ms loss"
      ms[$k]+="${r% *} "
      loss[$k]+="${r#* } "
      printf '  %s %s %s ms' "${k%%:*}" "${k#*:}" "${r% *}"
    done
    echo
  done
  local base
  base=$(printf '%s\n' ${ms[ampgrad:off]} | median)
  for k in "${kinds[@]}"; do
    local m
    m=$(printf '%s\n' ${ms[$k]} | median)
    printf '  median %-7s %-4s %7.2f ms/step  (%sx ampgrad f32)  val_loss %s\n' "${k%%:*}" "${k#*:}" "$m" "$(ratio "$m" "$base")" \
      "$(printf '%s\n' ${loss[$k]} | median)"
  done
  printf '  median of the runs'"'"' own ratios (each step time over ampgrad float32'"'"'s in the same run):'
  for k in "${kinds[@]:1}"; do printf '  %s %s %sx' "${k%%:*}" "${k#*:}" "$(paired "${ms[$k]}" "${ms[ampgrad:off]}")"; done
  echo
  if ((with_torch)); then
    for amp in off bf16; do
      printf '  ampgrad %s / PyTorch %s (%s): %s%s\n' "$amp" "$amp" "${best[$amp]}" \
        "$(ratio "$(printf '%s\n' ${ms[ampgrad:$amp]} | median)" "$(printf '%s\n' ${ms[torch:$amp]} | median)")" "$(kernel_caveat "${best[$amp]}")"
    done
  fi
}

# ---- run ----
mkdir -p "$out"
# The sections with a PyTorch column install it (Debian's, on OpenBLAS); without it they still
# measure ampgrad.
for s in "${sections[@]}"; do
  if [[ $s == mlp || $s == cnn* || $s == gpt || ($s == amp && $torch_amp -eq 1) ]]; then
    scripts/install-deps.sh --bench || echo "bench.sh: could not install PyTorch; ampgrad only"
    break
  fi
done
if ((build)); then
  echo "building ..."
  cmake -S . -B build >/dev/null
  cmake --build build -j2 --target mnist gpt gemm >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
fi
[ -x build/bench/gemm ] || { echo "bench.sh: build/bench/gemm missing (is libbenchmark-dev installed?)" >&2; exit 1; }
echo "ampgrad bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; OMP_NUM_THREADS=$OMP_NUM_THREADS"
((limit > 0)) && echo "NOTE: --limit-train $limit: epochs are partial, figures only for smoke tests"
for s in "${sections[@]}"; do
  case "$s" in
    gemm) section_gemm ;;
    mlp) compare_epochs mlp "$runs" ;;
    cnn | cnn-bn) compare_epochs "$s" "$cnn_runs" ;;
    amp) section_amp ;;
    gpt) section_gpt ;;
  esac
done
