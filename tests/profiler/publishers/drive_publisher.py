"""Drive an engine's own KV-event publisher for tst_attach_publishers.

The publisher code is not ours: it is vLLM's vllm/distributed/kv_events.py or
SGLang's sglang/srt/disaggregation/kv_events.py exactly as their PyPI wheels
ship it (scripts/fetch_publishers.py puts them in the cache). This script runs
with the cache's venv (pyzmq, msgspec), stands in tiny stubs for the few
engine modules the file imports, loads the file and drives its real
ZmqEventPublisher with a seeded random workload built from the file's own
event classes. It writes what a subscriber must end up with as JSON.

Protocol with the test (stdout lines): "ready" once the sockets are bound
(the test attaches then); the driver waits until the subscriber's
subscription has reached the PUB socket, publishes, writes the expected JSON and prints "done"; it then waits for
stdin to close and shuts the publisher down. Modes:

  normal     one run
  gap        some sequence numbers never go out on the PUB socket but stay in
             the publisher's replay buffer (the send is skipped, nothing else)
  restart    a second publisher on the same ports, its sequence from 0 again
  malformed  garbage messages on the publisher's own PUB socket between
             real ones
  die        os._exit while batches are still queued and in flight
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sys
import time
import types
from pathlib import Path

import msgspec
import zmq

BASE_TS = 1_700_000_000.0
HASH_MASK = (1 << 64) - 1


# --- stubs for the engine modules the publisher file imports -----------------

def stub_module(name: str, **attributes) -> types.ModuleType:
    module = sys.modules.get(name) or types.ModuleType(name)
    module.__path__ = []  # a package, so submodules can hang below it
    module.__dict__.update(attributes)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(stub_module(parent), child, module)
    return module


class StubConfig:
    """Stands in for the engines' KVEventsConfig: takes anything, checks nothing."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def install_stubs() -> None:
    import logging

    # vLLM
    stub_module("vllm.logger", init_logger=logging.getLogger)
    stub_module("vllm.config.kv_events", KVEventsConfig=StubConfig)
    stub_module("vllm.v1.core.kv_cache_utils", ExternalBlockHash=bytes | int)
    stub_module("vllm.utils.network_utils",
                get_ip=lambda: "127.0.0.1",
                get_tcp_uri=lambda ip, port: f"tcp://{ip}:{port}",
                is_valid_ipv6_address=lambda ip: ":" in ip,
                split_zmq_path=lambda path: tuple(path.replace("//", "").split(":")))
    stub_module("vllm.distributed")
    # SGLang (pydantic only for its config class, which we never build)
    if importlib.util.find_spec("pydantic") is None:
        stub_module("pydantic", BaseModel=StubConfig)
    stub_module("sglang.srt.runtime_context", get_parallel=lambda: None)
    stub_module("sglang.srt.utils.network", NetworkAddress=object)
    stub_module("sglang.srt.disaggregation")


def load_publisher_module(path: Path, engine: str) -> types.ModuleType:
    install_stubs()
    name = {"vllm": "vllm.distributed.kv_events",
            "sglang": "sglang.srt.disaggregation.kv_events"}[engine]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the workload and what it leaves resident --------------------------------

class Workload:
    """Random events made with the publisher's own classes, and a model of the
    resident blocks they imply (per medium; one publisher is one rank)."""

    def __init__(self, module, rng: random.Random, hash_form: str, block_size: int,
                 media: list[str | None]):
        self.m = module
        self.rng = rng
        self.hash_form = hash_form
        self.block_size = block_size
        self.media = media
        self.tiers: dict[str, dict] = {}  # medium -> hash -> (hash value, block)

    def new_hash(self):
        if self.hash_form == "bytes":
            return self.rng.randbytes(32)
        value = self.rng.getrandbits(64)
        return value - (1 << 63) if self.hash_form == "int64" else value

    def optional_values(self, cls, count: int) -> dict:
        """Values for the fields kvscope reads past (or does not know), so the
        wire carries them as a real engine would; None as often as not."""
        r = self.rng
        makers = {
            "lora_name": lambda: f"adapter-{r.randrange(3)}",
            "extra_keys": lambda: [r.choice([None, ("mm-hash", r.randrange(99))])
                                   for _ in range(count)],
            "group_idx": lambda: r.randrange(3),
            "kv_cache_spec_kind": lambda: "full_attention",
            "kv_cache_spec_sliding_window": lambda: 4096,
            "locality": lambda: r.choice(["LOCAL", "REMOTE"]),
            "ownership": lambda: "tier-2",
            "session_id": lambda: f"session-{r.randrange(5)}",
            "cache_salt": lambda: "salt",
            "lookahead_token_ids": lambda: [[r.randrange(1000)] for _ in range(count)],
        }
        values = {}
        for name in cls.__struct_fields__:  # in order (a set's would vary by run)
            if name in makers:
                values[name] = makers[name]() if r.random() < 0.5 else None
        return values

    def stored(self):
        r = self.rng
        medium = r.choice(self.media)
        tier = self.tiers.setdefault(medium or "GPU", {})
        roll = r.random()
        if roll < 0.3 or not tier:
            parent = None if roll < 0.6 else self.new_hash()  # the parent may be long gone
        else:
            parent = tier[r.choice(sorted(tier))][0]
        count = r.randint(1, 4)
        hashes = [self.new_hash() for _ in range(count)]
        if tier and r.random() < 0.15:
            hashes[0] = tier[r.choice(sorted(tier))][0]  # stored again while resident
            if hashes[0] == parent:
                parent = None
        tokens = [r.randrange(150_000) for _ in range(count * self.block_size)]
        cls = self.m.BlockStored
        values = self.optional_values(cls, count)
        if hasattr(self.m, "BlockStoredWithMetadata") and r.random() < 0.5:
            # SGLang up to 0.5.19: a salted request's events carry a metadata
            # struct after medium.
            cls = self.m.BlockStoredWithMetadata
            values["metadata"] = self.m.BlockStoredMetadata(cache_salt="tenant-a")
        values.update(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens,
                      block_size=self.block_size, lora_id=r.choice([None, r.randrange(8)]),
                      medium=medium)
        event = cls(**values)
        for i, value in enumerate(hashes):
            tier[hash_key(value)] = (value, {
                "parent": None if (i == 0 and parent is None)
                else hash_key(parent if i == 0 else hashes[i - 1]),
                "token_ids": tokens[i * self.block_size:(i + 1) * self.block_size],
                "block_size": self.block_size,
                "lora_id": values["lora_id"],
                "group_idx": values.get("group_idx"),
            })
        return event

    def removed(self):
        r = self.rng
        medium = r.choice(self.media)
        tier = self.tiers.setdefault(medium or "GPU", {})
        keys = r.sample(sorted(tier), min(len(tier), r.randint(1, 3)))
        hashes = [tier[key][0] for key in keys]
        if not hashes or r.random() < 0.15:
            hashes.append(self.new_hash())  # never stored: counted, not an error
        for key in keys:
            del tier[key]
        values = self.optional_values(self.m.BlockRemoved, len(hashes))
        values.update(block_hashes=hashes, medium=medium)
        return self.m.BlockRemoved(**values)

    def event(self, allow_clear: bool):
        roll = self.rng.random()
        if roll < 0.04 and allow_clear:
            self.tiers.clear()
            return self.m.AllBlocksCleared()
        return self.stored() if roll < 0.7 else self.removed()

    def batch(self, allow_clear: bool) -> list:
        return [self.event(allow_clear) for _ in range(self.rng.randint(1, 4))]

    def state(self, rank: int, stored_at: dict) -> dict:
        out = {}
        for medium, tier in sorted(self.tiers.items()):
            if tier:
                out[f"{rank}/{medium}"] = {
                    key: dict(block, stored_at=stored_at[medium, key])
                    for key, (_, block) in sorted(tier.items())}
        return out


def hash_key(value) -> str:
    """The hash as kvscope's BlockHash::hex() prints it."""
    if isinstance(value, bytes):
        return value.hex()
    return f"0x{value & HASH_MASK:016x}"


class Run:
    """One publisher's life: its batches, and the state after each."""

    def __init__(self, workload: Workload, rank: int, batches: int):
        self.batches = []
        self.states = []
        stored_at = {}
        for seq in range(batches):
            ts = BASE_TS + seq * 0.125  # exact in binary and in decimal
            # No clear near the end, so the final state is never empty (an
            # empty state would match a subscriber that heard nothing).
            events = workload.batch(allow_clear=seq < batches - 8)
            for event in events:
                if isinstance(event, workload.m.BlockStored):
                    for value in event.block_hashes:
                        stored_at[(event.medium or "GPU"), hash_key(value)] = ts
            self.batches.append((ts, events))
            self.states.append(workload.state(rank, stored_at))


# --- sockets ----------------------------------------------------------------

class FilteringSocket:
    """Stands between the real publisher and its PUB socket: drops the sends
    of chosen sequence numbers (they still enter the replay buffer, which the
    publisher fills after sending) or puts garbage messages before them."""

    def __init__(self, socket, drop=(), garbage_before=()):
        self._socket = socket
        self.drop = set(drop)
        self.garbage_before = set(garbage_before)
        self.garbage_sent = 0

    def __getattr__(self, name):
        return getattr(self._socket, name)

    def send_multipart(self, frames, *args, **kwargs):
        topic, seq_bytes, payload = frames
        seq = int.from_bytes(seq_bytes, "big")
        if seq in self.garbage_before:
            for message in garbage_messages(topic, seq_bytes, payload):
                self._socket.send_multipart(message)
                self.garbage_sent += 1
        if seq in self.drop:
            return None
        return self._socket.send_multipart(frames, *args, **kwargs)


def garbage_messages(topic: bytes, seq_bytes: bytes, payload: bytes) -> list[list[bytes]]:
    """Messages no decoder may take for a batch; each carries a real sequence
    number where it has one, so a decoder that took it would break the stream."""
    return [
        [topic, seq_bytes, b"\xc1"],                       # a byte msgpack never uses
        [topic, seq_bytes, payload[: len(payload) // 2]],  # cut short
        [topic, b"\x00\x01", payload],                     # sequence frame too short
        [b"one frame only"],
        [topic, seq_bytes, payload, b"extra", b"frames"],
        [topic, seq_bytes, msgspec.msgpack.encode("not a batch")],
        [topic, seq_bytes, msgspec.msgpack.encode([BASE_TS, 5])],  # events not an array
    ]


class XpubContext:
    """The publisher's zmq context, except that its PUB socket is an XPUB.

    An XPUB sends exactly as a PUB does (same wire protocol, same topic
    filtering) and also hands each subscription to recv() once it is in
    force. That is the only way to know the subscriber will get the first
    message without a timed sleep or a probe message that would move the
    publisher's sequence numbers."""

    def __init__(self, context):
        self._context = context

    def socket(self, kind, *args, **kwargs):
        return self._context.socket(zmq.XPUB if kind == zmq.PUB else kind, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._context, name)


def make_publisher(module, engine: str, rank: int, endpoint: str, replay: str, topic: str):
    # The publishers add the rank to the port (one port per data-parallel
    # rank); the test gives the ports it wants, so take the rank back off.
    def base(address: str) -> str:
        host, _, port = address.rpartition(":")
        return f"{host}:{int(port) - rank}"

    # The publishers bind only wildcard PUB endpoints (and connect to the
    # rest); the replay ROUTER binds whatever it is given.
    pub = "tcp://*:" + base(endpoint).rpartition(":")[2]
    kwargs = dict(endpoint=pub, replay_endpoint=base(replay), buffer_steps=1000, topic=topic)
    rank_kwarg = "data_parallel_rank" if engine == "vllm" else "attn_dp_rank"
    kwargs[rank_kwarg] = rank
    # Every publisher takes zmq.Context.instance() in its constructor and
    # makes its sockets there.
    instance = zmq.Context.instance
    zmq.Context.instance = classmethod(lambda cls, *a, **k: XpubContext(instance(*a, **k)))
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                return module.ZmqEventPublisher(**kwargs)
            except zmq.ZMQError:
                # The last run's port is still being released.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        zmq.Context.instance = instance


def wait_for_subscriber(xpub) -> None:
    """Returns once a subscription has arrived on the publisher's XPUB. Read
    here before the first publish, while the publisher's thread does not
    touch the socket."""
    if xpub.poll(10_000, zmq.POLLIN):
        xpub.recv()  # b"\x01" + the topic: in force from here on
        return
    sys.exit("drive_publisher: no subscriber subscribed within 10 s")


def publish_run(module, publisher, run: Run) -> None:
    for ts, events in run.batches:
        publisher.publish(module.KVEventBatch(ts=ts, events=events))


def say(line: str) -> None:
    print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--publisher", type=Path, required=True, help="the engine's kv_events.py")
    parser.add_argument("--engine", choices=["vllm", "sglang"], required=True)
    parser.add_argument("--endpoint", required=True, help="tcp://127.0.0.1:PORT (PUB)")
    parser.add_argument("--replay", required=True, help="tcp://127.0.0.1:PORT (ROUTER)")
    parser.add_argument("--expected", type=Path, required=True, help="JSON written here")
    parser.add_argument("--mode", default="normal",
                        choices=["normal", "gap", "restart", "malformed", "die"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--hashes", default="uint", choices=["uint", "int64", "bytes"])
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--topic", default="", help="the publisher's topic frame")
    args = parser.parse_args()

    module = load_publisher_module(args.publisher, args.engine)
    media = [None, "GPU", "CPU"] if args.engine == "vllm" else [None, "GPU", "CPU_PINNED", "DISK"]
    rng = random.Random(args.seed)

    def new_run(batches: int) -> Run:
        return Run(Workload(module, rng, args.hashes, args.block_size, media), args.rank, batches)

    runs = [new_run(args.batches)]
    if args.mode == "restart":
        runs.append(new_run(args.batches // 2))  # a new engine: an empty cache
    expected = {
        "final_sequence": len(runs[-1].batches) - 1,
        "final": runs[-1].states[-1],
        "dropped": [],
        "garbage": 0,
    }
    n = args.batches
    drop = sorted({3, 4, n // 2, n - 3}) if args.mode == "gap" else []
    garbage_before = {2, n // 2} if args.mode == "malformed" else set()
    die_at = n // 2
    if args.mode == "die":
        # Written first: the driver will not live to write it.
        expected["died_at"] = die_at
        expected["prefix_states"] = runs[0].states
        args.expected.write_text(json.dumps(expected))

    for index, run in enumerate(runs):
        publisher = make_publisher(module, args.engine, args.rank, args.endpoint, args.replay,
                                   args.topic)
        say("ready")
        wait_for_subscriber(publisher._pub)
        filtering = FilteringSocket(publisher._pub, drop, garbage_before)
        publisher._pub = filtering
        if args.mode == "die":
            for ts, events in run.batches[:die_at]:
                publisher.publish(module.KVEventBatch(ts=ts, events=events))
            publisher._event_queue.join()
            time.sleep(0.2)
            for ts, events in run.batches[die_at:]:
                publisher.publish(module.KVEventBatch(ts=ts, events=events))
            os._exit(3)  # no shutdown, no atexit, no flush: a crash
        publish_run(module, publisher, run)
        publisher._event_queue.join()
        expected["garbage"] += filtering.garbage_sent
        if index + 1 < len(runs):
            time.sleep(0.3)
            publisher.shutdown()
    expected["dropped"] = drop
    tmp = args.expected.with_suffix(".partial")
    tmp.write_text(json.dumps(expected))
    os.replace(tmp, args.expected)
    say("done")
    sys.stdin.read()  # until the test closes our stdin: replay must stay up
    publisher.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
