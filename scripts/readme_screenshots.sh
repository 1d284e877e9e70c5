#!/usr/bin/env bash
# Re-makes the README's pictures in docs/screenshots/, on purpose (a test run never touches them).
# Runs the browser tests that take them (their screenshots land in the ignored artifacts/screenshots/),
# then copies the README's ones over. Usage: bash scripts/readme_screenshots.sh   (about 5 minutes)
# `bash scripts/readme_screenshots.sh class` re-makes only the class's two (docs/room-mode.md: the tally, the
# leaderboard), from tests/browser/test_class_room.py (about 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
SHOTS=artifacts/screenshots
rm -rf "$SHOTS"  # no stale picture from an earlier run can be copied
export SPECVIZ_TEST_PAIRS=3  # the pictures show runs timed as the app times them (the tests alone time one pair)
export SPECVIZ_SCREENSHOTS=1  # the tests take their pictures only when asked (tests/browser/browser_helpers.py)
CLASS_PICTURES="class_tally:class_tally_presenter class_leaderboard"
if [ "${1:-}" = class ]; then
  "${PYTHON:-python3}" -m pytest -q -p no:randomly tests/browser/test_class_room.py
  for pair in $CLASS_PICTURES; do
    cp "$SHOTS/${pair#*:}.png" "docs/screenshots/${pair%%:*}.png"
  done
  git status --short docs/screenshots
  exit 0
fi
"${PYTHON:-python3}" -m pytest -q -p no:randomly tests/browser/test_home_and_rounds.py tests/browser/test_lab_pages.py \
  tests/browser/test_lesson.py tests/browser/test_room.py tests/browser/test_room_load.py \
  tests/browser/test_trees_in_browser.py tests/browser/test_serving.py tests/browser/test_race_in_browser.py \
  tests/browser/test_class_room.py
# README picture <- the screenshot a test took
for pair in home race rounds rounds_suffix rounds_tree draft_length compare_drafts verification_tolerance theory serving \
            lesson_draft_verify lesson_gamma lesson_same room_presenter room_queue:room_load_waiting $CLASS_PICTURES; do
  picture=${pair%%:*}
  shot=${pair#*:}
  cp "$SHOTS/$shot.png" "docs/screenshots/$picture.png"
done
git status --short docs/screenshots
