#!/usr/bin/env bash
# Installs what SpecViz needs, then opens the lab on the embedded default pair: http://localhost:8501
#   --room                 room mode for a workshop: learners pick only the offered models, cannot distil,
#                          and see their place in the line for measured runs (same as SPECVIZ_ROOM=1)
#   --presenter-key KEY    the presenter opens any page with ?presenter=KEY (same as SPECVIZ_PRESENTER_KEY)
# Other arguments go to `streamlit run` (e.g. --server.port 8600).
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --room) export SPECVIZ_ROOM=1 ;;
    --presenter-key) [ $# -ge 2 ] || { echo "app.sh: --presenter-key needs a value" >&2; exit 2; }
                     export SPECVIZ_PRESENTER_KEY="$2"; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
bash scripts/install.sh
exec "${PYTHON:-python3}" -m streamlit run app.py --server.headless true --browser.gatherUsageStats false "${args[@]}"
