#!/usr/bin/env bash
# Fuzzes one target for a fixed time from its committed seeds: what the
# fuzz_* ctests of the `fuzz` preset run (tests/fuzz/CMakeLists.txt).
#
#   run_fuzzer.sh FUZZER SOURCE_DIR RUN_DIR SECONDS [libFuzzer options...]
#
# New inputs go to RUN_DIR/corpus (the committed seeds stay as they are), a
# crash to RUN_DIR/artifacts; on one, it says how to reproduce it and where
# the input goes once fixed (tests/fuzz/regressions/<target>, which the
# replay suites run on every build).
set -euo pipefail

fuzzer=${1:?fuzzer binary}
source_dir=${2:?tests/fuzz source directory}
run_dir=${3:?run directory}
seconds=${4:?seconds}
shift 4
name=$(basename "$fuzzer")
name=${name#fuzz_}

mkdir -p "$run_dir/corpus"
rm -rf "$run_dir/artifacts" && mkdir -p "$run_dir/artifacts" # this run's findings only
corpora=("$run_dir/corpus" "$source_dir/corpus/$name")
if [[ -d "$source_dir/regressions/$name" ]]; then
    corpora+=("$source_dir/regressions/$name")
fi
options=(
    -max_total_time="$seconds"
    -timeout=30          # one input running this long is a hang
    -rss_limit_mb=2560   # and allocating past this, unbounded memory
    -print_final_stats=1
    -error_exitcode=1    # 77 is left to a target that cannot run here: skipped
    -artifact_prefix="$run_dir/artifacts/"
)
if [[ -f "$source_dir/dicts/$name.dict" ]]; then
    options+=(-dict="$source_dir/dicts/$name.dict")
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$fuzzer" "${options[@]}" "$@" "${corpora[@]}" || status=$?
if ((status == 77)); then
    echo "fuzz_$name skipped: it cannot run here (its message above says why)"
elif ((status != 0)); then
    echo
    echo "fuzz_$name failed (exit $status). The input that did it:"
    ls -1 "$run_dir/artifacts/" | sed "s|^|  $run_dir/artifacts/|"
    echo "Reproduce: $fuzzer <input>   Once fixed, keep the input as"
    echo "  tests/fuzz/regressions/$name/<what it broke> (tst_fuzz_$name replays it)."
fi
exit "$status"
