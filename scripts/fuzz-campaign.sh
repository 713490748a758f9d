#!/usr/bin/env bash
# A longer fuzzing campaign than CI's 30 s a target: each fuzz target of the
# `fuzz` preset runs for the given minutes (two at a time), from its seeds
# plus whatever earlier campaigns kept, and a Markdown table of what each
# did (executions, coverage, corpus, crashes) goes to stdout and, with
# --out, to a file for bench/results/.
#
#   scripts/fuzz-campaign.sh [--minutes M] [--jobs J] [--only a,b] [--out FILE] [--table-only]
#
# --table-only tabulates the last campaign's logs without fuzzing again.
# Needs the fuzz build: cmake --preset fuzz && cmake --build --preset fuzz.
# Corpora grow under build/fuzz/campaign/<target>/corpus; crashes land in
# build/fuzz/campaign/<target>/artifacts (see docs/fuzzing.md for what to do
# with one).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$repo_root/build/fuzz"
minutes=10
jobs=2
only=
out=
table_only=0
while (($#)); do
    case "$1" in
        --minutes) minutes=${2:?}; shift ;;
        --jobs) jobs=${2:?}; shift ;;
        --only) only=${2:?}; shift ;;
        --out) out=${2:?}; shift ;;
        --table-only) table_only=1 ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "fuzz-campaign.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

mapfile -t fuzzers < <(find "$build/tests/fuzz" -maxdepth 1 -name 'fuzz_*' -type f -executable | sort)
if ((${#fuzzers[@]} == 0)); then
    echo "fuzz-campaign.sh: no fuzz targets under $build (cmake --preset fuzz && cmake --build --preset fuzz)" >&2
    exit 1
fi
selected=()
for fuzzer in "${fuzzers[@]}"; do
    name=$(basename "$fuzzer"); name=${name#fuzz_}
    if [[ -z "$only" || ",$only," == *",$name,"* ]]; then
        selected+=("$fuzzer")
    fi
done

run_one() {
    local fuzzer=$1 name
    name=$(basename "$fuzzer"); name=${name#fuzz_}
    local dir="$build/campaign/$name"
    mkdir -p "$dir"
    "$repo_root/tests/fuzz/run_fuzzer.sh" "$fuzzer" "$repo_root/tests/fuzz" "$dir" \
        $((minutes * 60)) > "$dir/log.txt" 2>&1 || echo "exit $?" >> "$dir/log.txt"
}
export -f run_one
export build repo_root minutes
((table_only)) || printf '%s\n' "${selected[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {}

table=$(
    echo "| target | minutes | executions | exec/s | coverage (edges) | features | corpus (inputs) | peak RSS (MB) | crashes |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for fuzzer in "${selected[@]}"; do
        name=$(basename "$fuzzer"); name=${name#fuzz_}
        log="$build/campaign/$name/log.txt"
        final_stat() { grep -oE "stat::$1: +[0-9]+" "$log" | tail -1 | awk '{print $2}'; }
        execs=$(final_stat number_of_executed_units)
        rate=$(final_stat average_exec_per_sec)
        rss=$(final_stat peak_rss_mb)
        last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -1)
        cov=$(awk '{print $2}' <<<"$last"); ft=$(awk '{print $4}' <<<"$last"); corp=$(awk '{print $6}' <<<"$last")
        crashes=$(find "$build/campaign/$name/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' \
            -o -name 'timeout-*' -o -name 'oom-*' \) 2>/dev/null | wc -l)
        echo "| $name | $minutes | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${rss:-?} | $crashes |"
    done
)
echo "$table"
if [[ -n "$out" ]]; then
    echo "$table" > "$out"
fi
