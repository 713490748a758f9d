#!/usr/bin/env bash
# A CI regression gate (docs/regression-gates.md): builds the base revision
# next to this checkout with the same preset as the change, then records one
# workload with both kvscope builds at once, taking the engine's steps in
# turns, and compares them, each round a pair. Prints the comparison; exits with kvscope gate's status (0 no
# regression, 1 regressed or a run failed, 2 bad usage).
#
#   scripts/regression-gate.sh [BASE_REV]     (default origin/main)
#
# Environment: KVSCOPE_GATE_OUT (build/gate), KVSCOPE_GATE_ROUNDS (the
# gate's default: 10 in step, 25 by runs), KVSCOPE_GATE_RECORD (the record
# options),
# KVSCOPE_GATE_OPTIONS (options gate and compare share: --threshold,
# --robust-threshold, --alpha), KVSCOPE_GATE_INTERLEAVE (steps, or runs for a
# base build from before steps in turns), and
# KVSCOPE_GATE_BASE_BIN / KVSCOPE_GATE_NEW_BIN to use builds made elsewhere
# instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."

base_rev="${1:-origin/main}"
out="${KVSCOPE_GATE_OUT:-build/gate}"
rounds="${KVSCOPE_GATE_ROUNDS:-}"
options="${KVSCOPE_GATE_OPTIONS:-}"
gate_options="$options" # the gate's own, beside those compare takes too
if [[ -n "$rounds" ]]; then
    gate_options="--rounds $rounds $gate_options"
fi
if [[ -n "${KVSCOPE_GATE_INTERLEAVE:-}" ]]; then
    gate_options="--interleave $KVSCOPE_GATE_INTERLEAVE $gate_options"
fi
# One engine thread: its CPU time is then the engine's work, not the pool's
# waiting; all requests at once: the same schedule on every run; the prompt
# in chunks of 32 tokens: steps of like size, each paired with the other
# build's (the workload bench/results measured the gate on).
record="${KVSCOPE_GATE_RECORD:---workload shared-prefix --requests 1 --max-tokens 24 --max-num-batched-tokens 32 --all-at-once --threads 1}"
mkdir -p "$out"

# Both builds by the same preset, so only the source differs.
build_kvscope() { # source folder
    (cd "$1" && cmake --preset default > /dev/null && cmake --build --preset default --target kvscope)
}
new_bin="${KVSCOPE_GATE_NEW_BIN:-}"
if [[ -z "$new_bin" ]]; then
    build_kvscope .
    new_bin=build/default/app/cli/kvscope
fi
base_bin="${KVSCOPE_GATE_BASE_BIN:-}"
if [[ -z "$base_bin" ]]; then
    # A worktree of its own; whatever else is at that path (a half-restored
    # cache) goes first, so git never acts on this checkout instead.
    git worktree prune
    if [[ -e "$out/base-src/.git" ]]; then
        git -C "$out/base-src" checkout --detach --force "$base_rev"
    else
        rm -rf "$out/base-src"
        git worktree add --force --detach "$out/base-src" "$base_rev"
    fi
    build_kvscope "$out/base-src"
    base_bin="$out/base-src/build/default/app/cli/kvscope"
fi

status=0
# shellcheck disable=SC2086 # the record options are words
"$new_bin" gate "$base_bin" "$new_bin" --out "$out" --json $gate_options \
    -- $record > "$out/report.json" || status=$?
if [[ $status -le 1 && -s "$out/report.json" ]]; then
    # shellcheck disable=SC2086
    "$new_bin" compare "$out/base" "$out/new" $options || true # the table, for the job's log
fi
echo "regression gate: exit status $status (report: $out/report.json)"
exit "$status"
