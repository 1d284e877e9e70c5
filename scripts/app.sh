#!/usr/bin/env bash
# Installs what SpecViz needs, then opens the lab on the embedded default pair: http://localhost:8501
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec "${PYTHON:-python3}" -m streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@"
