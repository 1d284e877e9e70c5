#!/usr/bin/env bash
# Installs what the tests need, lints, then runs every test (unit, end to end on the embedded model, browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
"${PYTHON:-python3}" -m ruff check .   # lint first: line length, unused names, import order (pyproject.toml)
exec "${PYTHON:-python3}" -m pytest -q "$@"
