#!/usr/bin/env bash
# Installs what the tests need, then runs them all (unit, end to end on the embedded model, browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
exec "${PYTHON:-python3}" -m pytest -q "$@"
