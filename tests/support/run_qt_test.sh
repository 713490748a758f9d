#!/usr/bin/env bash
# Runs one Qt Test suite for ctest and gives ctest its verdict in the exit
# status, so no pattern in the output can hide a failure:
#   - the suite failed (a non-zero status, a crash, a sanitizer's report):
#     that status (a suite's 77 becomes 1, since 77 means skipped);
#   - it passed but skipped something (a "SKIP   :" line: no model, no GPU):
#     77, which kvscope_add_test declares as SKIP_RETURN_CODE, so ctest lists
#     the suite under "did not run ... (Skipped)" and fails nothing;
#   - it passed and skipped nothing: 0.
# The suite's output goes through unchanged.
#
#   run_qt_test.sh PROGRAM [ARGUMENTS...]
set -uo pipefail

log=$(mktemp "${TMPDIR:-/tmp}/kvscope-qt-test.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if ((status != 0)); then
    ((status == 77)) && status=1
    exit "$status"
fi
if grep -q '^SKIP   : ' "$log"; then
    exit 77
fi
exit 0
