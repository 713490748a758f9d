#!/usr/bin/env python3
"""Fetch the real KV-event publishers the attach tests drive.

tests/profiler/tst_attach_publishers runs vLLM's and SGLang's own ZeroMQ
publisher code (not ours) against kvscope's decoder. This script puts into the
cache:

  venv/                  a Python venv with pyzmq and msgspec (pinned, PyPI), and
                         prometheus_client, which wrote the metrics fixtures
                         (tests/profiler/data/metrics/make_fixtures.py)
  <engine>-<version>/    one publisher source file taken out of that engine's
                         wheel, plus manifest.json (package, version, path in
                         the wheel, the wheel's file name and both SHA-256s)

Each wheel is downloaded with `pip download --no-deps --only-binary=:all:`
into a staging directory inside the cache; only the publisher file is kept
(checked against a pinned SHA-256) and the wheel is deleted. Everything lands
with one rename, so an interrupted run leaves nothing half-written, and a
second run downloads nothing.

Cache: $XDG_CACHE_HOME/kvscope/publishers (default ~/.cache/kvscope/publishers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

# Shares the model fetcher's error type and hashing, so both scripts fail alike.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_model import FetchError, sha256_of  # noqa: E402

# The venv's packages; the publishers import nothing else outside their engine.
# prometheus_client is vLLM's and SGLang's metrics library: it regenerates the
# /metrics pages tst_prometheus_text reads. A venv made before a pin changed
# is made again, once (its stamp lists the pins).
VENV_REQUIREMENTS = ("pyzmq==27.3.0", "msgspec==0.22.0", "prometheus_client==0.23.1")
VENV_STAMP = "kvscope-requirements.txt"


@dataclass(frozen=True)
class Publisher:
    package: str
    version: str
    member: str       # the publisher's path inside the wheel
    sha256: str       # of that file: pure Python, the same in every platform's wheel
    encoding: str     # how its events go on the wire: "array" or "map"
    size_mb: int      # the wheel's download size, for the progress line

    @property
    def name(self) -> str:
        return f"{self.package}-{self.version}"


PUBLISHERS = (
    # The last release whose events are positional arrays (msgspec
    # array_like=True on KVCacheEvent).
    Publisher("vllm", "0.23.0", "vllm/distributed/kv_events.py",
              "24841685ad6db3543a19b9639eea24e1992ab37c4773c775da9f4140bb813322", "array", 274),
    # Events are tagged maps from 0.24.0 on; 0.33.0 is the newest release and
    # adds what 0.24 lacks: a topic frame in replay replies and more fields.
    Publisher("vllm", "0.33.0", "vllm/distributed/kv_events.py",
              "82b362a0a7f89318d9127addfce254d537f5078a31aa87beb08493b0953895ee", "map", 336),
    # SGLang's ZmqEventPublisher: positional-array events up to 0.5.19 (every
    # field sent, a metadata struct after medium when a request had a salt)...
    Publisher("sglang", "0.5.19", "sglang/srt/disaggregation/kv_events.py",
              "06c14ecc295b816b08173d51938ac394c8e14d0c25fe701c7df6ea2b4d0c3747", "array", 26),
    # ... tagged maps from 0.5.20 on, and a topic frame in replay replies.
    Publisher("sglang", "0.5.23", "sglang/srt/disaggregation/kv_events.py",
              "ef80e7165b11280d30bc07a9e3c04de5057ee45e9c94503a3ac432b009a0e421", "map", 39),
)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvscope" / "publishers"


def how_to_fix(cache_dir: Path) -> str:
    wheels = " ".join(f"{p.package}=={p.version}" for p in PUBLISHERS)
    return (
        "What to do:\n"
        "  * Check the network or proxy (pip honours HTTPS_PROXY and PIP_INDEX_URL), then run\n"
        "    scripts/setup.sh again.\n"
        "  * Debian: the venv needs python3-venv (apt-get install python3-venv).\n"
        "  * Or, on a machine with network access:\n"
        "      for w in " + wheels + "; do\n"
        "        python3 -m pip download --no-deps --only-binary=:all: $w -d WHEELS; done\n"
        "      python3 -m pip download --only-binary=:all: " + " ".join(VENV_REQUIREMENTS) +
        " -d WHEELS\n"
        "    copy WHEELS here and run: scripts/setup.sh --find-links WHEELS\n"
        f"  (Everything goes under {cache_dir}.)"
    )


def run_pip(python: str, args: list[str], what: str, find_links: Path | None) -> None:
    command = [python, "-m", "pip", *args, "--disable-pip-version-check"]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    result = subprocess.run(command, stdout=sys.stdout, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no output"
        if "No module named pip" in result.stderr:
            detail = f"{python} has no pip (Debian: apt-get install python3-pip python3-venv)"
        raise FetchError(f"pip could not {what}: {detail}")


def venv_ready(venv: Path) -> bool:
    stamp = venv / VENV_STAMP
    return (venv / "bin" / "python").exists() and stamp.is_file() and \
        stamp.read_text().split() == list(VENV_REQUIREMENTS)


def fetch_venv(cache_dir: Path, find_links: Path | None) -> None:
    venv = cache_dir / "venv"
    if venv_ready(venv):
        print(f"Publisher venv already in place: {venv}")
        return
    # Built beside its final place and renamed: `python -m` finds a venv
    # from its own path, so the move keeps it working.
    with tempfile.TemporaryDirectory(prefix=".venv-", dir=cache_dir) as staging_dir:
        staged = Path(staging_dir) / "venv"
        print(f"Creating the publisher venv ({', '.join(VENV_REQUIREMENTS)}) ...", flush=True)
        result = subprocess.run([sys.executable, "-m", "venv", str(staged)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise FetchError("python3 -m venv failed (Debian: apt-get install python3-venv): "
                             + (result.stdout.strip().splitlines() or ["no output"])[-1])
        run_pip(str(staged / "bin" / "python"),
                ["install", "--quiet", "--only-binary=:all:", *VENV_REQUIREMENTS],
                "install " + " ".join(VENV_REQUIREMENTS), find_links)
        (staged / VENV_STAMP).write_text("\n".join(VENV_REQUIREMENTS) + "\n")
        if venv.exists():
            shutil.rmtree(venv)
        os.replace(staged, venv)
    print(f"Publisher venv ready: {venv}")


def publisher_ready(target: Path, publisher: Publisher) -> bool:
    source = target / publisher.member
    return (target / "manifest.json").is_file() and source.is_file() and \
        sha256_of(source) == publisher.sha256


def fetch_publisher(cache_dir: Path, publisher: Publisher, find_links: Path | None) -> None:
    target = cache_dir / publisher.name
    if publisher_ready(target, publisher):
        print(f"{publisher.name} publisher already in place: {target}")
        return
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache_dir) as staging_dir:
        staging = Path(staging_dir)
        wheels = staging / "wheel"
        size = f" (about {publisher.size_mb} MB)" if publisher.size_mb else ""
        print(f"Downloading {publisher.name}{size} for {publisher.member} ...", flush=True)
        run_pip(sys.executable,
                ["download", "--no-deps", "--only-binary=:all:", "--dest", str(wheels),
                 f"{publisher.package}=={publisher.version}"],
                f"download {publisher.name}", find_links)
        found = sorted(wheels.glob("*.whl"))
        if len(found) != 1:
            raise FetchError(f"expected one wheel from pip, found {len(found)} in {wheels}")
        wheel = found[0]
        staged = staging / publisher.name
        try:
            with zipfile.ZipFile(wheel) as archive:
                archive.extract(publisher.member, staged)
        except (zipfile.BadZipFile, KeyError) as error:
            raise FetchError(f"cannot take {publisher.member} out of {wheel.name}: {error}") \
                from error
        actual = sha256_of(staged / publisher.member)
        if actual != publisher.sha256:
            raise FetchError(
                f"{publisher.member} in {wheel.name} has SHA-256 {actual}, expected "
                f"{publisher.sha256}: refusing to use it (a different or tampered file)")
        manifest = {
            "package": publisher.package,
            "version": publisher.version,
            "encoding": publisher.encoding,
            "path": publisher.member,
            "sha256": actual,
            "wheel": wheel.name,
            "wheel_sha256": sha256_of(wheel),
        }
        (staged / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        wheel.unlink()  # hundreds of MB: gone before the next one comes
        if target.exists():
            shutil.rmtree(target)
        os.replace(staged, target)
    print(f"{publisher.name} publisher ready: {target / publisher.member}")


def parse_pin(text: str) -> Publisher:
    try:
        requirement, member, sha256 = text.split(":")
        package, version = requirement.split("==")
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected PKG==VER:PATH:SHA256, got {text!r}") from error
    return Publisher(package, version, member, sha256, "unknown", 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="where the publishers go (default: %(default)s)")
    parser.add_argument("--find-links", type=Path, metavar="DIR",
                        help="take the wheels from DIR instead of PyPI (offline machines)")
    # For tests and private mirrors only: other pins, and no venv.
    parser.add_argument("--publisher", action="append", metavar="PKG==VER:PATH:SHA256",
                        type=parse_pin, help=argparse.SUPPRESS)
    parser.add_argument("--no-venv", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    publishers = args.publisher or PUBLISHERS
    try:
        try:
            args.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise FetchError(f"cannot create {args.cache_dir}: {error.strerror}") from error
        if not args.no_venv:
            fetch_venv(args.cache_dir, args.find_links)
        for publisher in publishers:
            fetch_publisher(args.cache_dir, publisher, args.find_links)
    except FetchError as error:
        print(f"error: {error}\n{how_to_fix(args.cache_dir)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted: nothing half-written was left behind", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
