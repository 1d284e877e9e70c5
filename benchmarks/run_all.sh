#!/usr/bin/env bash
# Every figure of the README's performance section, on this machine (about 75 minutes on the 2-core CPU).
# Run it on a quiet machine: other jobs on the same cores distort every timing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results
mkdir -p "$out"

# 1. ngram over all 84 evaluation prompts, against transformers' prompt lookup and greedy generate.
python -m specviz bench --draft ngram --prompts eval --gamma 4 --max-new-tokens 128 --compare-hf \
    --out "$out/eval84-greedy-g4-t128-ngram.jsonl"
# 2. the shipped distilled drafts, 2 prompts per workload, against transformers' assisted generation.
python -m specviz bench --draft smol-draft-1l128 --draft smol-draft-2l256 --prompts eval --per-category 2 \
    --gamma 4 --max-new-tokens 128 --compare-hf --repeats 2 --out "$out/eval14-greedy-g4-t128-drafts.jsonl"
# 3. the distilled drafts in issue #4's setting (64 new tokens), 4 prompts per workload.
python -m specviz bench --draft smol-draft-1l128 --draft smol-draft-2l256 --prompts eval --per-category 4 \
    --gamma 4 --max-new-tokens 64 --out "$out/eval28-greedy-g4-t64-drafts.jsonl"
# 3b. the draft head's race (head, ngram+head, ngram, distilled drafts), 2 prompts per workload, γ=2, 64 tokens;
#     rewrites assets/drafts/smol-head-8k/README.md.
python -m specviz distill --kind head --eval-only --eval-prompts 2 --eval-gamma 2 --eval-tokens 64
cp artifacts/heads/smol-head-8k/evaluation.json "$out/head-race-eval14-g2-t64.json"
# 3c. token trees against chains that verify as many tokens (N = 4 and N = 8 nodes, 128 tokens), and v(N).
python -m specviz verify-cost --max-nodes 32 --repeats 15 --out assets/trees/verify_cost.json
python -m specviz bench --prompts eval --per-category 2 --max-new-tokens 128 --draft ngram --draft smol-head-8k \
    --draft ngram+smol-head-8k --draft smol-draft-1l128 --gamma 4 --tree-budget 4 --tree-branching 2 --tree-vs-chain \
    --out "$out/trees-eval14-n4-t128.jsonl" | tee "$out/trees-n4.txt"
python -m specviz bench --prompts eval --per-category 2 --max-new-tokens 128 --draft smol-head-8k \
    --draft ngram+smol-head-8k --draft ngram --gamma 8 --tree-budget 8 --tree-branching 2 --tree-vs-chain \
    --out "$out/trees-eval14-n8-t128.jsonl" | tee "$out/trees-n8.txt"
python benchmarks/report.py trees "$out"/trees-eval14-n4-t128.jsonl "$out"/trees-eval14-n8-t128.jsonl > "$out/trees.md"
# 4. recording overhead and where the time goes.
python benchmarks/overhead.py --draft ngram --draft smol-draft-1l128 --prompts eval --per-category 1 \
    --max-new-tokens 128 --repeats 3 --out "$out/overhead.jsonl" | tee "$out/overhead.txt"
python benchmarks/profile_round.py --draft ngram --draft smol-draft-1l128 > "$out/profile-cpu.txt"
# 5. tables and plots.
python benchmarks/report.py "$out"/eval84-greedy-g4-t128-ngram.jsonl "$out"/eval14-greedy-g4-t128-drafts.jsonl \
    --plots docs/performance > "$out/tables-t128.md"
python benchmarks/report.py "$out"/eval28-greedy-g4-t64-drafts.jsonl > "$out/tables-drafts-t64.md"
