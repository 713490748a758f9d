#!/usr/bin/env bash
# Checks kvscope's CUDA backend on this machine's NVIDIA GPU in one command.
#
# Usage: scripts/gpu-check.sh [--out DIR] [--build-dir DIR] [--model FILE | --model-parts DIR]
#                             [--only STEPS] [--timeout SECONDS] [--force]
#        scripts/gpu-check.sh --pack DIR [--build-dir DIR]
#        scripts/gpu-check.sh --split-model FILE DIR [--part-size MIB]
#        scripts/gpu-check.sh --join-model DIR FILE
#
# Runs the GPU-labelled test suites, then again under compute-sanitizer
# (memcheck: all but tst_cuda_record; racecheck: the kernel suites; see
# sanitizer_leaves_out), the GPU benchmarks (kvscope bench
# --backend cuda and any bench program named *cuda*), Nsight Compute's reading
# of the attention kernels (ncu: throughput and occupancy, into bench.txt),
# and a CUPTI recording
# (kvscope record --backend cuda --gpu-capture on, then kvscope stats), and
# writes everything into one results folder of at most 8 files: summary.md,
# nvidia-smi.txt, build.log, tests.log, sanitizer.log, bench.txt,
# recording-stats.txt and recording.sqlite (when under 16 MiB). Without a GPU
# it writes only summary.md, says "no GPU: nothing to check" and exits 0.
#
# Options:
#   --out DIR          results folder (default: gpu-check-results); it may hold
#                      only an earlier check's files, which are replaced
#   --build-dir DIR    a CMake build tree with the CUDA backend, or a folder made
#                      by --pack (default: $KVSCOPE_BUILD_DIR, else build/headless
#                      or build/default, else a headless build made here when
#                      cmake and nvcc are present)
#   --model FILE       model for the tests, benchmarks and recording (default:
#                      $KVSCOPE_MODEL, else the model setup.sh fetched)
#   --model-parts DIR  the model reassembled from DIR/NAME.partNN and checked
#                      against DIR/NAME.sha256 (made by --split-model)
#                      Without any model, the benchmarks and the recording use a
#                      random-weight model of SmolLM2-135M's shape and storage
#                      (scripts/make_random_model.py) and the summary says so;
#                      tests that need the real model then skip.
#   --only STEPS       comma-separated subset of: tests,sanitizer,bench,profile,record
#   --timeout SECONDS  limit for each program the check runs (default: 900)
#   --no-compare       leave out the side-by-side run with Hugging Face
#                      transformers in the bench step (its torch.compile takes
#                      minutes a lease may not have)
#   --force            run the steps even when no GPU is found (to try the script)
#   -h, --help         this text
#
# Helper modes:
#   --pack DIR         copy kvscope, the GPU test suites (ctest label gpu) and the
#                      *cuda* bench programs of a build tree, stripped of debug
#                      information, with the shared libraries they need that a
#                      CUDA machine may lack (Qt, ICU, SQLite, ...; the CUDA
#                      toolkit's and the driver's own libraries stay behind), into
#                      DIR/kvscope-gpu-pack.tar.xz, at most 48 MiB; carry DIR to
#                      the GPU machine and pass it there with --build-dir DIR
#   --split-model FILE DIR [--part-size MIB]
#                      cut FILE into DIR/NAME.part00, part01, ... of MIB each
#                      (default: 40) and write DIR/NAME.sha256
#   --join-model DIR FILE
#                      put the parts back together into FILE, checked
#
# Exit status: 0 when every step that ran passed, or there is no GPU; 1 when a
# step failed (after writing the summary); 2 for a bad command line.
# KVSCOPE_GPU_CHECK_ASSUME_NO_GPU=1 takes the no-GPU path whatever the machine has.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo_root
original_args=("$@")
readonly all_steps=(tests sanitizer bench profile record)
readonly result_files=(summary.md nvidia-smi.txt build.log tests.log sanitizer.log bench.txt
                       recording-stats.txt recording.sqlite)
readonly pack_archive=kvscope-gpu-pack.tar.xz
# Suites each sanitizer tool leaves out. racecheck looks for shared-memory
# races inside kernels, which the kernel suites drive directly
# (tst_cuda_kernels, tst_rms_norm_cuda); tst_cuda_backend and tst_cuda_record
# run the same kernels through whole models and take longer than --timeout
# under it (on an H100, 2026-11-24, tst_cuda_backend was a tenth done after
# 130 s), and tst_cupti_capture needs CUPTI, which the sanitizer holds.
# tst_cuda_record runs `kvscope record` in a child process, which memcheck
# follows: over 150 s there (the same kernels as tst_cuda_backend's).
declare -A sanitizer_leaves_out=(
    [memcheck]='^tst_cuda_record$'
    [racecheck]='^(tst_cuda_backend|tst_cuda_record|tst_cupti_capture)$'
)

readonly pack_limit_mib=48
readonly file_limit_bytes=$((15 * 1024 * 1024)) # what a results file is cut to
readonly recording_limit_bytes=$((16 * 1024 * 1024))
# Libraries a pack leaves behind: the C and C++ run-times (any newer system has
# them), the NVIDIA driver's own, and the CUDA toolkit's large libraries, which
# a CUDA machine has (the run looks for them there). The CUDA run-time and
# CUPTI, small, travel with the programs built against them.
readonly system_libraries='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libutil\.|libresolv\.|libstdc\+\+\.|libgcc_s\.|libcuda\.|libnvidia-|libcublas|libnvrtc|libnvToolsExt|libnvJitLink|libcufft|libcurand|libcusparse|libcusolver|libnvperf)'

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

fatal_message=
die() {
    fatal_message=$*
    echo "gpu-check.sh: error: $*" >&2
    exit 1
}

usage_error() {
    echo "gpu-check.sh: $*" >&2
    echo "Run 'scripts/gpu-check.sh --help' for the options." >&2
    exit 2
}

say() {
    echo "[gpu-check] $*"
}

# ---- Command line ------------------------------------------------------------
mode="check"
out_dir=gpu-check-results
build_dir=${KVSCOPE_BUILD_DIR:-}
model_arg=
model_parts=
only=
step_timeout=900
force=0
compare_transformers=1
pack_dir=
split_file=
split_dir=
join_dir=
join_file=
part_mib=40

need_value() {
    if (($2 < 2)) || [[ -z $3 ]]; then
        usage_error "$1 needs a value"
    fi
}

while (($#)); do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --out) need_value "$1" $# "${2:-}"; out_dir=$2; shift ;;
        --build-dir) need_value "$1" $# "${2:-}"; build_dir=$2; shift ;;
        --model) need_value "$1" $# "${2:-}"; model_arg=$2; shift ;;
        --model-parts) need_value "$1" $# "${2:-}"; model_parts=$2; shift ;;
        --only) need_value "$1" $# "${2:-}"; only=$2; shift ;;
        --timeout) need_value "$1" $# "${2:-}"; step_timeout=$2; shift ;;
        --force) force=1 ;;
        --no-compare) compare_transformers=0 ;;
        --pack) need_value "$1" $# "${2:-}"; mode=pack; pack_dir=$2; shift ;;
        --split-model)
            if (($# < 3)) || [[ -z $2 || -z $3 ]]; then usage_error "--split-model needs FILE and DIR"; fi
            mode="split"; split_file=$2; split_dir=$3; shift 2 ;;
        --join-model)
            if (($# < 3)) || [[ -z $2 || -z $3 ]]; then usage_error "--join-model needs DIR and FILE"; fi
            mode="join"; join_dir=$2; join_file=$3; shift 2 ;;
        --part-size) need_value "$1" $# "${2:-}"; part_mib=$2; shift ;;
        *) usage_error "unknown option or argument '$1'" ;;
    esac
    shift
done

if ! [[ $step_timeout =~ ^[1-9][0-9]*$ ]]; then
    usage_error "--timeout must be a whole number of seconds, not '$step_timeout'"
fi
if ! [[ $part_mib =~ ^[1-9][0-9]*$ ]]; then
    usage_error "--part-size must be a whole number of MiB, not '$part_mib'"
fi
if [[ -n $model_arg && -n $model_parts ]]; then
    usage_error "--model and --model-parts name the model twice: give one"
fi
if [[ -n $model_arg && ! -f $model_arg ]]; then
    usage_error "--model: no such file: $model_arg"
fi
if [[ -n $model_parts && ! -d $model_parts ]]; then
    usage_error "--model-parts: no such folder: $model_parts"
fi
if [[ $mode == check && -n $build_dir && ! -d $build_dir ]]; then
    usage_error "--build-dir (or KVSCOPE_BUILD_DIR): no such folder: $build_dir"
fi
declare -A wanted=()
if [[ -z $only ]]; then
    for step in "${all_steps[@]}"; do wanted[$step]=1; done
else
    IFS=, read -r -a only_steps <<<"$only"
    for step in "${only_steps[@]}"; do
        case "$step" in
            tests|sanitizer|bench|profile|record) wanted[$step]=1 ;;
            *) usage_error "--only: unknown step '$step' (steps: ${all_steps[*]})" ;;
        esac
    done
fi

# ---- Helpers -----------------------------------------------------------------
file_size() {
    stat -c %s "$1"
}

mib() {
    awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}

# The SHA-256 of a file, in hex.
sha256_of() {
    sha256sum "$1" | awk '{ print $1 }'
}

find_program() {
    local name=$1 candidate
    if candidate=$(command -v "$name" 2>/dev/null); then
        echo "$candidate"
        return 0
    fi
    for candidate in "/usr/local/cuda/bin/$name" "/usr/local/nvidia/bin/$name" "/usr/bin/$name"; do
        if [[ -x $candidate ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# ---- Model in parts ----------------------------------------------------------
split_model() {
    local file=$1 dir=$2 name
    [[ -f $file ]] || die "--split-model: no such file: $file"
    name=$(basename "$file")
    mkdir -p "$dir"
    if compgen -G "$dir/$name.part*" >/dev/null; then
        die "--split-model: $dir already holds parts of $name; remove them first"
    fi
    echo "$(sha256_of "$file")  $name" >"$dir/$name.sha256"
    split -b "${part_mib}M" -d -a 2 "$file" "$dir/$name.part"
    say "cut $file into $(compgen -G "$dir/$name.part*" | wc -l) parts of at most $part_mib MiB in $dir"
    say "carry them over (each call of at most 64 MiB can take one or more), then run:"
    say "  scripts/gpu-check.sh --model-parts $dir"
}

# Puts DIR's parts together into FILE; returns 1 (and says why) when they are
# missing or damaged, leaving no FILE behind.
join_model() {
    local dir=$1 file=$2 sums name expected actual
    local -a parts
    sums=$(compgen -G "$dir/*.sha256" || true)
    if [[ -z $sums ]]; then
        echo "no *.sha256 file in $dir (make the parts with --split-model)" >&2
        return 1
    fi
    if (($(wc -l <<<"$sums") != 1)); then
        echo "more than one *.sha256 file in $dir: keep the parts of one model there" >&2
        return 1
    fi
    read -r expected name <"$sums"
    mapfile -t parts < <(compgen -G "$dir/$name.part*" | sort)
    if ((${#parts[@]} == 0)); then
        echo "no parts $name.part* in $dir" >&2
        return 1
    fi
    cat "${parts[@]}" >"$file.partial"
    actual=$(sha256_of "$file.partial")
    if [[ $actual != "$expected" ]]; then
        rm -f "$file.partial"
        echo "the ${#parts[@]} parts of $name in $dir do not add up to it (SHA-256 $actual," \
             "expected $expected): a part is missing or damaged" >&2
        return 1
    fi
    mv "$file.partial" "$file"
    echo "${#parts[@]} parts"
}

# ---- Pack: binaries and their libraries for a GPU machine ---------------------
default_build_dir() {
    local dir
    for dir in "$repo_root/build/headless" "$repo_root/build/default"; do
        if [[ -x $dir/app/cli/kvscope ]]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

# Names of the tests labelled gpu in build tree $1, one a line.
gpu_test_names() {
    ctest --test-dir "$1" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p'
}

# The programs that the gpu-labelled tests of build tree $1 run, into test_programs.
find_gpu_tests() {
    local dir=$1 name found
    local -a names
    mapfile -t names < <(gpu_test_names "$dir")
    test_programs=()
    for name in "${names[@]}"; do
        found=$(find "$dir/tests" -type f -perm -u+x -name "$name" -print -quit)
        [[ -n $found ]] || die "test $name is labelled gpu but $dir/tests has no program of that name"
        test_programs+=("$found")
    done
}

bench_binaries() {
    [[ -d $1/bench ]] || return 0
    find "$1/bench" -maxdepth 1 -type f -perm -u+x -name '*cuda*' | sort
}

# Copies program $1 into folder $2 without its debug information (symbols stay,
# for the sanitizer's stack traces).
copy_stripped() {
    if command -v strip >/dev/null; then
        strip --strip-debug -o "$2/$(basename "$1")" "$1"
    else
        cp "$1" "$2/"
    fi
}

declare -a test_programs=() bench_programs=()

pack() {
    local dest=$1 source=$build_dir staging archive size src name line lib
    local -a programs
    if [[ -z $source ]]; then
        source=$(default_build_dir) || die "--pack: no build tree found; name one with --build-dir"
    fi
    [[ -f $source/CMakeCache.txt && -x $source/app/cli/kvscope ]] ||
        die "--pack: $source is not a build tree with kvscope built in it"
    command -v ctest >/dev/null || die "--pack needs ctest (CMake) to find the GPU test suites"
    command -v xz >/dev/null || die "--pack needs xz (apt-get install xz-utils)"
    if ! "$source/app/cli/kvscope" info --json | grep -q '"cuda_compiled": true'; then
        die "--pack: $source/app/cli/kvscope was built without the CUDA backend (configure with nvcc present)"
    fi
    if [[ -e $dest ]] && [[ -n $(find "$dest" -mindepth 1 -maxdepth 1 ! -name "$pack_archive") ]]; then
        die "--pack: $dest holds other files; give an empty or new folder"
    fi
    mkdir -p "$dest"

    staging=$(mktemp -d)
    # shellcheck disable=SC2064 # the folder is known now
    trap "rm -rf '$staging'" EXIT
    mkdir -p "$staging/bin" "$staging/tests" "$staging/bench" "$staging/lib"
    find_gpu_tests "$source"
    mapfile -t bench_programs < <(bench_binaries "$source")
    programs=("$source/app/cli/kvscope" "${test_programs[@]}" "${bench_programs[@]}")
    copy_stripped "$source/app/cli/kvscope" "$staging/bin"
    for src in "${test_programs[@]}"; do copy_stripped "$src" "$staging/tests"; done
    for src in "${bench_programs[@]}"; do copy_stripped "$src" "$staging/bench"; done

    local -a left_behind=()
    while read -r line; do
        if [[ $line == *"not found"* ]]; then
            die "--pack: a library is missing here: $line"
        fi
        name=${line%% *}
        lib=$(sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' <<<"$line")
        [[ -n $lib ]] || continue
        if [[ $name =~ $system_libraries ]]; then
            left_behind+=("$name")
        elif [[ ! -e $staging/lib/$name ]]; then
            cp -L "$lib" "$staging/lib/$name"
        fi
    done < <(for src in "${programs[@]}"; do ldd "$src" | sed 's/^[[:space:]]*//'; done | sort -u)

    {
        echo "kvscope-gpu-pack 1"
        echo "created=$(date -u '+%F %T UTC') on $(hostname)"
        echo "build_dir=$(cd "$source" && pwd)"
        echo "source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$source/CMakeCache.txt")"
        echo "commit=$(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
            git -C "$repo_root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
        echo "expects_from_the_machine=$(printf '%s\n' "${left_behind[@]}" | sort -u | tr '\n' ' ')"
        echo "files:"
        (cd "$staging" && find . -type f ! -name MANIFEST.txt | sort | sed 's/^\.\//  /')
    } >"$staging/MANIFEST.txt"

    archive=$dest/$pack_archive
    say "compressing $(du -sh "$staging" | cut -f1) of programs and libraries (xz, a minute or so)"
    tar -C "$staging" -cf - . | xz -T0 -6 >"$archive.partial"
    mv "$archive.partial" "$archive"
    size=$(file_size "$archive")
    if ((size > pack_limit_mib * 1024 * 1024)); then
        die "--pack: $archive is $(mib "$size"), over the $pack_limit_mib MiB that leaves room for the" \
            "rest of a 64 MiB transfer; pack fewer programs"
    fi
    say "wrote $archive ($(mib "$size")): $(grep -c '^  ' "$staging/MANIFEST.txt") files"
    say "on the GPU machine, with $dest carried over: scripts/gpu-check.sh --build-dir $dest"
}

case "$mode" in
    pack) pack "$pack_dir"; exit 0 ;;
    split) split_model "$split_file" "$split_dir"; exit 0 ;;
    join)
        [[ -d $join_dir ]] || die "--join-model: no such folder: $join_dir"
        if ! joined_parts=$(join_model "$join_dir" "$join_file"); then
            die "--join-model: could not put $join_file together"
        fi
        say "put $join_file together from $joined_parts, SHA-256 checked"
        exit 0 ;;
esac

# ---- The check ---------------------------------------------------------------
# The results folder holds this script's files and nothing else.
mkdir -p "$out_dir" || usage_error "cannot create the results folder $out_dir"
out_dir=$(cd "$out_dir" && pwd)
while read -r entry; do
    known=0
    for name in "${result_files[@]}"; do
        if [[ $entry == "$name" ]]; then
            known=1
        fi
    done
    if ((known == 0)); then
        usage_error "the results folder $out_dir holds '$entry', which a GPU check does not write:" \
                    "give an empty or new folder"
    fi
done < <(find "$out_dir" -mindepth 1 -maxdepth 1 -printf '%f\n')
for name in "${result_files[@]}"; do
    rm -f "${out_dir:?}/$name"
done

work=$(mktemp -d)
model=
model_is_real=0
made_link=
summary_written=0
started=$(date -u '+%F %H:%M UTC')
declare -a step_names=() step_results=() step_details=() step_seconds=()
# Each step's wall time: from the row before it (or the start) to its own,
# so a lease's minutes can be planned from an earlier summary.
row_started=$SECONDS
device_line="unknown"
device_name=
compute_cap=
driver_line=
info_line=
binaries_line=
model_line=
model_kind=
notes=()

add_step() {
    step_names+=("$1")
    step_results+=("$2")
    step_details+=("$3")
    step_seconds+=($((SECONDS - row_started)))
    row_started=$SECONDS
    say "$1: $2${3:+ ($3)} [${step_seconds[-1]} s]"
}

failed_steps() {
    local i n=0
    for i in "${!step_results[@]}"; do
        if [[ ${step_results[$i]} == fail ]]; then
            n=$((n + 1))
        fi
    done
    echo "$n"
}

# Keeps a log under the size a results file may have: its start and its end.
cap_file() {
    local file=$1 size half
    [[ -f $file ]] || return 0
    size=$(file_size "$file")
    ((size > file_limit_bytes)) || return 0
    half=$((file_limit_bytes / 2 - 1024))
    {
        head -c "$half" "$file"
        printf '\n\n[... %d bytes cut by gpu-check.sh ...]\n\n' $((size - 2 * half))
        tail -c "$half" "$file"
    } >"$file.cut"
    mv "$file.cut" "$file"
}

write_summary() {
    local result=$1 failures skipped=0 i files
    failures=$(failed_steps)
    for i in "${step_results[@]}"; do
        if [[ $i == skip ]]; then
            skipped=$((skipped + 1))
        fi
    done
    files=$(cd "$out_dir" && find . -maxdepth 1 -type f ! -name 'summary.md*' -printf '%f\n' | sort |
            tr '\n' ' ')
    {
        echo "# kvscope GPU check, $started"
        echo
        echo "- result: **$result**"
        echo "- device: $device_line"
        if [[ -n $driver_line ]]; then echo "- driver: $driver_line"; fi
        echo "- host: $(hostname), $(uname -sr)"
        if [[ -n $info_line ]]; then echo "- kvscope: $info_line"; fi
        if [[ -n $binaries_line ]]; then echo "- binaries: $binaries_line"; fi
        if [[ -n $model_line ]]; then echo "- model: $model_line"; fi
        echo "- command: scripts/gpu-check.sh ${original_args[*]}"
        if ((${#step_names[@]} > 0)); then
            echo
            echo "| step | result | seconds | detail |"
            echo "| --- | --- | ---: | --- |"
            for i in "${!step_names[@]}"; do
                echo "| ${step_names[$i]} | ${step_results[$i]} | ${step_seconds[$i]} | ${step_details[$i]//|/\\|} |"
            done
        fi
        if ((${#notes[@]} > 0)); then
            echo
            for i in "${notes[@]}"; do echo "- $i"; done
        fi
        echo
        echo "Files: ${files}summary.md"
        if [[ $result == pass ]] && ((skipped == 0 && model_is_real == 1)); then
            echo
            echo "Every step ran and passed with the real model. To record the CUDA backend as"
            echo "verified, commit this folder as bench/results/gpu-$(date -u +%F)-<device>/ and set"
            echo "bench/results/gpu-verification.json: verified_on_gpu true, date $(date -u +%F),"
            echo "device \"$device_name\", results that folder, not_yet_on_gpu \"\"."
        elif ((failures > 0)); then
            echo
            echo "$failures step(s) failed: see the logs named above."
        fi
    } >"$out_dir/summary.md.tmp"
    mv "$out_dir/summary.md.tmp" "$out_dir/summary.md"
    summary_written=1
}

finish() {
    local status=$?
    if ((summary_written == 0)); then
        add_step "gpu-check.sh" fail "stopped early with status $status: ${fatal_message:-an unexpected error (see the output)}"
        write_summary "fail"
        if ((status == 0)); then
            status=1
        fi
    fi
    for name in tests.log sanitizer.log bench.txt recording-stats.txt build.log nvidia-smi.txt; do
        cap_file "$out_dir/$name"
    done
    if [[ -n $made_link ]]; then
        rm -f "$made_link"
    fi
    rm -rf "$work"
    exit "$status"
}
trap finish EXIT

# ---- Is there a GPU? -----------------------------------------------------------
no_gpu() {
    if [[ $device_line == unknown ]]; then device_line="none"; fi
    write_summary "no GPU: nothing to check ($1)"
    echo "no GPU: nothing to check ($1)"
    echo "summary: $out_dir/summary.md"
    exit 0
}

gpu_absent_reason=
if [[ ${KVSCOPE_GPU_CHECK_ASSUME_NO_GPU:-} == 1 ]]; then
    gpu_absent_reason="KVSCOPE_GPU_CHECK_ASSUME_NO_GPU=1 is set"
elif ! smi=$(find_program nvidia-smi); then
    gpu_absent_reason="nvidia-smi not found: no NVIDIA driver on this machine"
elif ! listing=$(timeout 60 "$smi" -L 2>&1); then
    gpu_absent_reason="nvidia-smi failed: $(head -n 1 <<<"$listing")"
elif ! grep -q '^GPU [0-9]' <<<"$listing"; then
    gpu_absent_reason="nvidia-smi lists no GPU"
fi
if [[ -n $gpu_absent_reason ]]; then
    if ((force == 0)); then
        no_gpu "$gpu_absent_reason"
    fi
    notes+=("no GPU was found ($gpu_absent_reason); the steps ran anyway because of --force")
fi

if [[ -z $gpu_absent_reason ]]; then
    {
        "$smi"
        echo
        "$smi" -q
    } >"$out_dir/nvidia-smi.txt" 2>&1 || true
    query=$("$smi" --query-gpu=name,memory.total,compute_cap,driver_version \
            --format=csv,noheader 2>/dev/null | head -n 1 || true)
    IFS=, read -r device_name memory compute_cap driver <<<"$query"
    device_name=$(xargs <<<"$device_name")
    device_line="$device_name, ${memory# }, compute capability ${compute_cap# }"
    driver_line="${driver# }"
fi

# ---- Binaries ------------------------------------------------------------------
kvscope=
lib_path=

# The checked programs run as "${ours[@]}" PROGRAM: with the pack's libraries
# when there is one, and with no display.
declare -a ours=(env QT_QPA_PLATFORM=offscreen)
set_library_path() {
    local path=$lib_path
    if [[ -n ${LD_LIBRARY_PATH:-} ]]; then
        path=${path:+$path:}$LD_LIBRARY_PATH
    fi
    # KVSCOPE_CLI: the kvscope checked, for suites that run it (tst_cuda_record).
    ours=(env QT_QPA_PLATFORM=offscreen "KVSCOPE_CLI=$kvscope")
    if [[ -n $path ]]; then
        ours+=("LD_LIBRARY_PATH=$path")
    fi
}

use_build_tree() {
    local dir=$1
    kvscope=$dir/app/cli/kvscope
    [[ -x $kvscope ]] || die "$dir has no kvscope built (app/cli/kvscope)"
    if command -v ctest >/dev/null; then
        find_gpu_tests "$dir"
    else
        notes+=("ctest is not on PATH, so the GPU test suites of $dir could not be listed")
    fi
    mapfile -t bench_programs < <(bench_binaries "$dir")
    binaries_line="build tree $dir"
}

use_pack() {
    local dir=$1 source_dir cuda_dir
    kvscope=$dir/bin/kvscope
    [[ -x $kvscope ]] || die "$dir is not a pack made by --pack (no bin/kvscope)"
    mapfile -t test_programs < <(find "$dir/tests" -maxdepth 1 -type f -perm -u+x | sort)
    mapfile -t bench_programs < <(find "$dir/bench" -maxdepth 1 -type f -perm -u+x | sort)
    lib_path=$dir/lib
    for cuda_dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
                    /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib; do
        if [[ -d $cuda_dir ]]; then
            lib_path+=":$cuda_dir"
        fi
    done
    binaries_line="pack $(sed -n 's/^created=//p' "$dir/MANIFEST.txt"), commit $(sed -n 's/^commit=//p' "$dir/MANIFEST.txt")"
    # The test suites find their data under the source folder they were built
    # in; point that path at this checkout when it does not exist here.
    source_dir=$(sed -n 's/^source_dir=//p' "$dir/MANIFEST.txt")
    if [[ -n $source_dir && ! -e $source_dir ]]; then
        if mkdir -p "$(dirname "$source_dir")" 2>/dev/null && ln -s "$repo_root" "$source_dir" 2>/dev/null; then
            made_link=$source_dir
            notes+=("$source_dir (where the pack was built) pointed at this checkout while the check ran")
        else
            notes+=("could not link $source_dir to this checkout: suites that read test data may fail")
        fi
    fi
}

build_here() {
    local arch targets
    local -a build_targets
    if ! command -v cmake >/dev/null || ! find_program nvcc >/dev/null; then
        add_step binaries fail "no build tree or pack given (--build-dir) and no cmake or nvcc here to build one; make a pack elsewhere with --pack"
        return 1
    fi
    arch=${compute_cap//./}
    arch=${arch// /}
    say "building a headless kvscope for sm_${arch:-?} into build/headless (log: build.log)"
    if ! (cd "$repo_root" && cmake --preset headless -DKVSCOPE_CUDA=ON -DKVSCOPE_WERROR=OFF \
              ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch}) >>"$out_dir/build.log" 2>&1; then
        add_step binaries fail "cmake --preset headless failed (build.log): make a pack elsewhere with --pack"
        return 1
    fi
    build_targets=(kvscope)
    if command -v ctest >/dev/null; then
        mapfile -t -O 1 build_targets < <(gpu_test_names "$repo_root/build/headless")
    fi
    targets=$(cmake --build "$repo_root/build/headless" --target help 2>/dev/null |
              sed -n 's/^\([^: ]*cuda[^: ]*\): .*/\1/p' | grep -v '^tst_' || true)
    # shellcheck disable=SC2206 # one target a word
    build_targets+=($targets)
    if ! cmake --build "$repo_root/build/headless" -j "$(nproc)" --target "${build_targets[@]}" \
            >>"$out_dir/build.log" 2>&1; then
        add_step binaries fail "the headless build failed (build.log)"
        return 1
    fi
    use_build_tree "$repo_root/build/headless"
    binaries_line="built here into build/headless for sm_${arch:-?}"
}

# Names of the libraries the checked programs need and the loader cannot find.
missing_libraries() {
    local program
    for program in "$kvscope" "${test_programs[@]}" "${bench_programs[@]}"; do
        "${ours[@]}" ldd "$program" 2>&1 | sed -n 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p'
    done | sort -u
}

find_binaries() {
    local dir=$build_dir
    if [[ -n $dir ]]; then
        dir=$(cd "$dir" && pwd)
        if [[ -f $dir/$pack_archive ]]; then
            say "unpacking $dir/$pack_archive"
            mkdir -p "$work/pack"
            if command -v xz >/dev/null; then
                tar -C "$work/pack" -xJf "$dir/$pack_archive"
            else
                python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
                    "$dir/$pack_archive" "$work/pack"
            fi
            use_pack "$work/pack"
        elif [[ -f $dir/MANIFEST.txt ]]; then
            use_pack "$dir"
        elif [[ -f $dir/CMakeCache.txt ]]; then
            use_build_tree "$dir"
        else
            add_step binaries fail "--build-dir $dir is neither a build tree nor a pack made by --pack"
            return 1
        fi
    elif dir=$(default_build_dir); then
        use_build_tree "$dir"
    else
        build_here || return 1
    fi
    set_library_path
    local program name found
    local -a missing
    mapfile -t missing < <(missing_libraries)
    # A library left out of a pack (cuBLAS, say) may sit outside the loader's
    # path: in the CUDA toolkit or a Python package of NVIDIA's.
    for name in "${missing[@]}"; do
        found=$(find /usr/local /opt /usr/lib /usr/lib64 -name "$name" \( -type f -o -type l \) \
                -print -quit 2>/dev/null || true)
        if [[ -n $found ]]; then
            lib_path+="${lib_path:+:}$(dirname "$found")"
        fi
    done
    if ((${#missing[@]} > 0)); then
        set_library_path
        mapfile -t missing < <(missing_libraries)
    fi
    if ((${#missing[@]} > 0)); then
        add_step binaries fail "these programs need libraries this machine lacks: ${missing[*]}"
        return 1
    fi
    add_step binaries pass "kvscope, ${#test_programs[@]} GPU test suite(s), ${#bench_programs[@]} GPU bench program(s)"
}

if ! find_binaries; then
    write_summary fail
    exit 1
fi

"${ours[@]}" "$kvscope" info --json >"$work/info.json" 2>&1 || true
"${ours[@]}" "$kvscope" info >"$work/info.txt" 2>&1 || true
info_line=$(sed -n 's/^\(kvscope .*\)/\1/p' "$work/info.txt" | head -n 1)
info_line+="; $(sed -n 's/^ *CUDA backend *: //p' "$work/info.txt")"
if ! grep -q '"cuda_compiled": true' "$work/info.json"; then
    add_step binaries fail "$kvscope was built without the CUDA backend"
    write_summary fail
    exit 1
fi
if grep -q '"gpus": \[\]' "$work/info.json" && ((force == 0)); then
    no_gpu "kvscope sees no CUDA GPU: $(sed -n 's/.*"gpu_unavailable_reason": "\(.*\)",\{0,1\}$/\1/p' \
        "$work/info.json"); nvidia-smi lists: $(head -n 1 <<<"${listing:-nothing}")"
fi

# ---- Model ---------------------------------------------------------------------
resolve_model() {
    local joined name
    if [[ -n $model_arg ]]; then
        model=$model_arg
        model_is_real=1
    elif [[ -n ${KVSCOPE_MODEL:-} && -f ${KVSCOPE_MODEL:-} ]]; then
        model=$KVSCOPE_MODEL
        model_is_real=1
    elif [[ -n $model_parts ]]; then
        mkdir -p "$work/model"
        name=$(awk '{ print $2; exit }' "$model_parts"/*.sha256 2>/dev/null || true)
        if joined=$(join_model "$model_parts" "$work/model/${name:-model.gguf}" 2>"$work/join.err"); then
            model=$work/model/$name
            model_is_real=1
            add_step model pass "put together from $joined in $model_parts, SHA-256 checked"
        else
            add_step model fail "$(cat "$work/join.err")"
        fi
    elif grep -q '"available": true' "$work/info.json"; then
        model=$(sed -n 's/.*"path": "\(.*\)"$/\1/p' "$work/info.json" | head -n 1)
        model_is_real=1
    fi
    if [[ -n $model ]]; then
        model_kind="real model"
        model_line="$model ($(mib "$(file_size "$model")"), SHA-256 $(sha256_of "$model")): every step"
        return 0
    fi
    if ! command -v python3 >/dev/null; then
        model_line="none (no model and no python3 to make a random-weight one): the benchmarks and the recording did not run"
        return 0
    fi
    say "no model here: making a random-weight one of SmolLM2-135M's shape"
    if python3 "$repo_root/scripts/make_random_model.py" "$work/random.gguf" >"$work/random.log" 2>&1; then
        model=$work/random.gguf
        model_kind="random weights of SmolLM2-135M's shape"
        model_line="random weights of SmolLM2-135M's shape and storage (scripts/make_random_model.py) for the benchmarks and the recording: speed figures only, its text is noise (the test suites got no model: those that need the real one skip)"
    else
        model_line="none (making a random-weight model failed: $(tail -n 1 "$work/random.log"))"
    fi
}
resolve_model
if ((model_is_real)); then
    export KVSCOPE_MODEL=$model
else
    unset KVSCOPE_MODEL
fi
model_args=()
[[ -n $model ]] && model_args=(-m "$model")

# ---- Steps ---------------------------------------------------------------------
# Runs one test suite (the command after $1, the log it is appended to) and
# prints its outcome: pass, skip (a Qt Test SKIP line), fail, timeout,
# sanitizer when compute-sanitizer found errors (exit status 86), or a failure
# for a suite that skipped for want of a GPU where nvidia-smi found one.
run_suite() {
    local log=$1 status=0
    shift
    timeout "$step_timeout" "$@" >"$work/suite.out" 2>&1 || status=$?
    cat "$work/suite.out" >>"$log"
    if ((status == 124)); then
        echo "timeout"
    elif ((status == 86)); then
        echo "sanitizer"
    elif ((status != 0)); then
        echo "fail"
    elif grep -q '^SKIP   :.*no CUDA GPU' "$work/suite.out" && [[ -z $gpu_absent_reason ]]; then
        echo "skipped: it saw no GPU"
    elif grep -q '^SKIP   :' "$work/suite.out"; then
        echo "skip"
    else
        echo "pass"
    fi
}

# Runs every GPU test suite, under compute-sanitizer's tool $2 when given, into
# log $1, and adds the step.
run_suites() {
    local step=$1 log=$2 tool=${3:-} program name label outcome passed=0 skipped=0 failed=0
    local failures="" skips="" left_out=""
    local -a command
    for program in "${test_programs[@]}"; do
        name=$(basename "$program")
        if [[ -n $tool && $name =~ ${sanitizer_leaves_out[$tool]} ]]; then
            left_out+=" $name"
            continue
        fi
        label=${tool:+$tool: }$name
        command=("${ours[@]}")
        if [[ -n $tool ]]; then
            command+=("$sanitizer" --tool "$tool" --error-exitcode 86 --print-limit 200)
        fi
        echo "===== $label =====" >>"$log"
        outcome=$(run_suite "$log" "${command[@]}" "$program")
        echo "===== $label: $outcome =====" >>"$log"
        case "$outcome" in
            pass) passed=$((passed + 1)) ;;
            skip) skipped=$((skipped + 1)); skips+=" $label" ;;
            sanitizer) failed=$((failed + 1)); failures+=" $label (errors found)" ;;
            *) failed=$((failed + 1)); failures+=" $label ($outcome)" ;;
        esac
    done
    local detail="$passed passed, $skipped skipped${skips:+ (${skips# })}, $failed failed"
    detail+="${failures:+:$failures}${left_out:+; left out:$left_out} ($(basename "$log"))"
    if ((failed > 0)); then
        add_step "$step" fail "$detail"
    elif ((passed == 0)); then
        add_step "$step" skip "$detail"
    else
        add_step "$step" pass "$detail"
    fi
}

tests_step() {
    if ((${#test_programs[@]} == 0)); then
        add_step tests skip "no GPU test suites in these binaries"
        return
    fi
    run_suites tests "$out_dir/tests.log"
}

sanitizer=
sanitizer_step() {
    local tool
    if ! sanitizer=$(find_program compute-sanitizer); then
        add_step sanitizer skip "compute-sanitizer not found (it comes with the CUDA toolkit)"
        return
    fi
    if ((${#test_programs[@]} == 0)); then
        add_step sanitizer skip "no GPU test suites in these binaries"
        return
    fi
    for tool in memcheck racecheck; do
        run_suites "sanitizer $tool" "$out_dir/sanitizer.log" "$tool"
    done
}

bench_step() {
    local log=$out_dir/bench.txt program status ran=0 failed=0 failures=""
    {
        echo "# kvscope GPU benchmarks, $started, $device_line"
        echo "# model: ${model:-none}${model_kind:+ ($model_kind)}"
    } >>"$log"
    for program in "${bench_programs[@]}"; do
        echo "===== $(basename "$program") =====" >>"$log"
        status=0
        # Bench programs take the model from KVSCOPE_MODEL, the random one too.
        timeout "$step_timeout" "${ours[@]}" ${model:+"KVSCOPE_MODEL=$model"} "$program" \
            >>"$log" 2>&1 || status=$?
        ran=$((ran + 1))
        if ((status != 0)); then
            failed=$((failed + 1))
            failures+=" $(basename "$program") (status $status)"
        fi
    done
    if [[ -n $model ]]; then
        echo "===== kvscope bench --backend cuda -b 1,32,128 -c 1024,4096 =====" >>"$log"
        status=0
        timeout "$step_timeout" "${ours[@]}" "$kvscope" bench --backend cuda -b 1,32,128 \
            -c 1024,4096 "${model_args[@]}" >>"$log" 2>&1 || status=$?
        ran=$((ran + 1))
        if ((status != 0)); then
            failed=$((failed + 1))
            failures+=" kvscope bench (status $status)"
        fi
    fi
    # Side by side with Hugging Face transformers on the same GPU, where the
    # machine's python3 has torch and transformers (the GPU image does).
    local floor_bench=""
    for program in "${bench_programs[@]}"; do
        [[ $(basename "$program") == kvscope-bench-cuda ]] && floor_bench=$program
    done
    if ((compare_transformers)) && [[ -n $floor_bench ]] &&
        python3 -c 'import torch, transformers' >/dev/null 2>&1; then
        echo "===== bench/compare_transformers.py =====" >>"$log"
        status=0
        timeout "$step_timeout" "${ours[@]}" ${model:+"KVSCOPE_MODEL=$model"} python3 \
            "$repo_root/bench/compare_transformers.py" --kvscope-bench "$floor_bench" \
            >>"$log" 2>&1 || status=$?
        ran=$((ran + 1))
        if ((status != 0)); then
            failed=$((failed + 1))
            failures+=" compare_transformers.py (status $status)"
        fi
    fi
    local which="model: ${model_kind:-none}"
    if ((ran == 0)); then
        add_step bench skip "no *cuda* bench programs in these binaries and no model for kvscope bench"
    elif ((failed > 0)); then
        add_step bench fail "$failed of $ran failed:$failures (bench.txt)"
    else
        add_step bench pass "$ran benchmark(s), ${#bench_programs[@]} *cuda* program(s) and kvscope bench; $which (bench.txt)"
    fi
}

# Nsight Compute's reading of the attention kernels, each launched once by
# kvscope-bench-cuda --profile-attention: the decode split kernel (f16 rows
# into registers and through the ring, q8_0) and the prefill's tile kernel.
# Speed of light (DRAM and compute throughput against the peaks), occupancy
# and launch statistics, appended to bench.txt. The clocks are left as they
# are (--clock-control none), as the device's notes ask.
profile_step() {
    local log=$out_dir/bench.txt program floor_bench="" ncu status=0 profiled
    for program in "${bench_programs[@]}"; do
        [[ $(basename "$program") == kvscope-bench-cuda ]] && floor_bench=$program
    done
    if [[ -z $floor_bench ]]; then
        add_step profile skip "no kvscope-bench-cuda in these binaries"
        return
    fi
    if ! ncu=$(find_program ncu); then
        add_step profile skip "Nsight Compute (ncu) not found"
        return
    fi
    echo "===== ncu: kvscope-bench-cuda --profile-attention =====" >>"$log"
    timeout "$step_timeout" "${ours[@]}" ${model:+"KVSCOPE_MODEL=$model"} "$ncu" \
        --clock-control none --kernel-name regex:'vector_attention_split_kernel|tile_attention_kernel' \
        --launch-count 4 --section SpeedOfLight --section Occupancy --section LaunchStats \
        "$floor_bench" --profile-attention >"$work/ncu.out" 2>&1 || status=$?
    cat "$work/ncu.out" >>"$log"
    profiled=$(grep -c 'Section: GPU Speed Of Light Throughput' "$work/ncu.out" || true)
    if ((status != 0)); then
        add_step profile fail "ncu exited with status $status after $profiled kernel(s) (bench.txt)"
    elif ((profiled == 0)); then
        add_step profile fail "ncu profiled no kernel (bench.txt)"
    else
        add_step profile pass "ncu read $profiled attention kernel(s): speed of light, occupancy (bench.txt)"
    fi
}

record_step() {
    local log=$out_dir/recording-stats.txt recording=$work/recording.sqlite status=0 counts
    if [[ -z $model ]]; then
        add_step record skip "no model"
        return
    fi
    echo "===== kvscope record --backend cuda --gpu-capture on --workload shared-prefix --requests 8 --max-tokens 32 =====" >>"$log"
    echo "model: $model ($model_kind)" >>"$log"
    timeout "$step_timeout" "${ours[@]}" "$kvscope" record --backend cuda --gpu-capture on --workload shared-prefix --requests 8 \
        --max-tokens 32 --out "$recording" "${model_args[@]}" >>"$log" 2>&1 || status=$?
    if ((status != 0)); then
        add_step record fail "kvscope record exited with status $status (recording-stats.txt)"
        return
    fi
    echo "===== kvscope stats =====" >>"$log"
    if ! "${ours[@]}" "$kvscope" stats "$recording" >>"$log" 2>&1 ||
       ! "${ours[@]}" "$kvscope" stats --json "$recording" >"$work/stats.json" 2>>"$log"; then
        add_step record fail "kvscope stats failed on the recording (recording-stats.txt)"
        return
    fi
    counts=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(len(s["gpu_kernels"]), len(s["gpu_memory_ops"]), len(s["nvtx_ranges"]))' "$work/stats.json" 2>/dev/null ||
        echo "? ? ?")
    local kernels copies ranges
    read -r kernels copies ranges <<<"$counts"
    if [[ -f $recording-wal && $(file_size "$recording-wal") -gt 0 ]]; then
        notes+=("the recording was left with a write-ahead log, so it is not among the results")
    elif (($(file_size "$recording") < recording_limit_bytes)); then
        cp "$recording" "$out_dir/recording.sqlite"
    else
        notes+=("the recording ($(mib "$(file_size "$recording")")) is over 16 MiB, so it is not among the results")
    fi
    local detail="$kernels kernel names, $copies copy/memset kinds, $ranges NVTX range names; model: $model_kind (recording-stats.txt)"
    if [[ $kernels == "?" ]]; then
        add_step record fail "could not read kvscope stats --json (python3 missing?) (recording-stats.txt)"
    elif ((kernels == 0 || copies == 0 || ranges == 0)); then
        add_step record fail "CUPTI or NVTX captured nothing of a kind: $detail"
    else
        add_step record pass "$detail"
    fi
}

for step in "${all_steps[@]}"; do
    if [[ -z ${wanted[$step]:-} ]]; then
        add_step "$step" skip "not asked for (--only $only)"
        continue
    fi
    say "running $step"
    "${step}_step"
done

failures=$(failed_steps)
if ((failures > 0)); then
    write_summary fail
else
    write_summary pass
fi
cat "$out_dir/summary.md"
((failures == 0)) || exit 1
