#!/usr/bin/env bash
# Installs what kvscope needs to build, test and run on Debian 12, then fetches
# the models (SmolLM2, Gemma 3 270M) and the engines' KV-event publishers the
# attach tests drive.
# Idempotent: a second run installs nothing and downloads nothing.
#
#   scripts/setup.sh                      packages + models + publishers
#   scripts/setup.sh --find-links DIR     take the wheels from DIR (offline)
#   scripts/setup.sh --skip-packages      models and publishers only (no root needed)
#
# The CUDA Toolkit is not installed here: when nvcc is present the build adds
# the CUDA backend on its own (KVSCOPE_CUDA=AUTO).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
    build-essential cmake ninja-build pkg-config git ccache mold
    clang libclang-rt-14-dev
    qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev
    libxkbcommon-dev libvulkan-dev
    libsqlite3-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libabsl-dev librsvg2-dev
    libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libcurl4-openssl-dev
    xvfb xauth fonts-dejavu-core
    python3 python3-pip python3-venv ca-certificates
)

skip_packages=0
fetch_args=()
publisher_args=()
while (($#)); do
    case "$1" in
        --skip-packages) skip_packages=1 ;;
        --find-links)
            fetch_args+=("$1" "${2:?--find-links needs a directory}")
            publisher_args+=("$1" "$2")
            shift ;;
        --force-model) fetch_args+=(--force) ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

install_packages() {
    local missing=()
    for package in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$package")
        fi
    done
    if ((${#missing[@]} == 0)); then
        echo "Debian packages: all ${#packages[@]} already installed"
        return
    fi
    echo "Debian packages to install: ${missing[*]}"
    local sudo=()
    if ((EUID != 0)); then
        if ! command -v sudo >/dev/null; then
            echo "error: installing packages needs root. Run as root, or install them yourself:" >&2
            echo "  apt-get install ${missing[*]}" >&2
            exit 1
        fi
        sudo=(sudo)
    fi
    if ! "${sudo[@]}" apt-get update -qq ||
       ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
        echo "error: apt-get could not install: ${missing[*]}" >&2
        echo "  Check the network and /etc/apt/sources.list, then run scripts/setup.sh again." >&2
        exit 1
    fi
}

if ((skip_packages == 0)); then
    if ! command -v dpkg-query >/dev/null; then
        echo "error: this set-up script targets Debian 12 (no dpkg-query here). Install Qt 6" >&2
        echo "  (base, charts, svg), SQLite, CLI11, nlohmann-json, ZeroMQ (libzmq, cppzmq)," >&2
        echo "  msgpack-cxx, libcurl, CMake and Ninja yourself," >&2
        echo "  then run: scripts/setup.sh --skip-packages" >&2
        exit 1
    fi
    install_packages
fi

python3 "$repo_root/scripts/fetch_model.py" "${fetch_args[@]}"
# vLLM's and SGLang's own KV-event publishers, for tst_attach_publishers.
python3 "$repo_root/scripts/fetch_publishers.py" "${publisher_args[@]}"
