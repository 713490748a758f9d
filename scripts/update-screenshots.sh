#!/usr/bin/env bash
# Regenerates the README's screenshots: tst_view_renders records a run with
# the real model and renders every main view of kvscope-ui from it into
# docs/images/. Needs a build (cmake --workflow --preset build) and the model.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build/default --target tst_view_renders kvscope
mkdir -p docs/images
KVSCOPE_SCREENSHOT_DIR="$PWD/docs/images" QT_QPA_PLATFORM=offscreen \
    build/default/tests/app/tst_view_renders
