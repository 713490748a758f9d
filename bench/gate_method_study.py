#!/usr/bin/env python3
"""Which way of judging a regression gate holds on this machine?

Takes the recordings of one long same-build gate (`kvscope gate K K --rounds 80
--out DIR -- RECORD_OPTIONS`, run under the conditions to study, e.g. with a
busy process beside it), orders its runs in time as the gate made them, and
replays many shorter gates on contiguous windows of that series: each window's
runs are labelled base and new in a design's order, judged as is (a false alarm
if flagged) and with every new run's step CPU times scaled by 1 + SLOWDOWN (a
catch if flagged). Contiguous windows keep the machine's real drift and its
slow episodes where they fell, which a model of the noise would have to guess.

Only the standard library: reads the recordings with sqlite3.

    bench/gate_method_study.py DIR [--slowdown 0.05] [--alpha 0.01]
"""
import argparse
import glob
import math
import os
import random
import sqlite3
import sys


def step_cpu_ms(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    kind = db.execute(
        "SELECT id FROM ENUM_KVSCOPE_EVENT_KIND WHERE name = 'step_counters'"
    ).fetchone()
    if kind is None:
        sys.exit(f"{path}: no step_counters events (recorded before they existed)")
    rows = db.execute(
        "SELECT a FROM KVSCOPE_EVENTS WHERE kind = ? ORDER BY id", (kind[0],)
    ).fetchall()
    db.close()
    return [a / 1e6 for (a,) in rows]


def series(folder):
    """The gate's runs in the order it made them (base first in odd rounds)."""
    rounds = len(glob.glob(os.path.join(folder, "base", "round-*.sqlite")))
    runs = []
    for r in range(1, rounds + 1):
        for side in ("base", "new") if r % 2 == 1 else ("new", "base"):
            runs.append(step_cpu_ms(os.path.join(folder, side, f"round-{r:03d}.sqlite")))
    return runs


def signed_rank_null(n):
    counts = [1]
    for k in range(1, n + 1):
        grown = [0] * (len(counts) + k)
        for w, c in enumerate(counts):
            grown[w] += c
            grown[w + k] += c
        counts = grown
    return counts


NULLS = {}


def signed_rank_p(d):
    """One-sided exact p of the Wilcoxon signed-rank test (no ties expected)."""
    d = [x for x in d if x != 0]
    n = len(d)
    if n not in NULLS:
        NULLS[n] = signed_rank_null(n)
    order = sorted(range(n), key=lambda i: abs(d[i]))
    w_plus = sum(rank + 1 for rank, i in enumerate(order) if d[i] > 0)
    return sum(NULLS[n][w_plus:]) / 2**n


def hodges_lehmann(d):
    walsh = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
    return walsh[len(walsh) // 2]


def totals_signed_rank(rounds, alpha, threshold):
    """kvscope gate today: each run's total CPU time, per-round log ratios,
    the signed-rank test and the Hodges-Lehmann estimate."""
    d = []
    for r in rounds:
        base = min(sum(steps) for label, steps in r if label == "b")
        new = min(sum(steps) for label, steps in r if label == "n")
        d.append(math.log(new / base))
    return signed_rank_p(d) < alpha and hodges_lehmann(d) > math.log1p(threshold)


def floor_log_ratio(rounds):
    """Each side's per-step floor (the step's least CPU time over the side's
    runs), summed over steps; log new/base. A slow episode only adds time, so
    the floor is what a run costs when nothing got in its way."""
    floors = {}
    for r in rounds:
        for label, steps in r:
            f = floors.get(label)
            floors[label] = list(steps) if f is None else [min(a, b) for a, b in zip(f, steps)]
    return math.log(sum(floors["n"]) / sum(floors["b"]))


def swapped(r):
    return [("n" if label == "b" else "b", steps) for label, steps in r]


def floor_permutation(rounds, alpha, threshold, draws=4095, rng=random.Random(7)):
    """The floor ratio, with the randomisation test that swaps the labels
    within rounds (exact up to 12 rounds, else the observed labelling and
    4095 random ones, as profiler/gate/step_floors.cpp does)."""
    observed = floor_log_ratio(rounds)
    if observed <= math.log1p(threshold):
        return False
    n = len(rounds)
    masks = range(2**n) if n <= 12 else [0] + [rng.getrandbits(n) for _ in range(draws)]
    at_least = total = 0
    for mask in masks:
        relabelled = [swapped(r) if (mask >> i) & 1 else r for i, r in enumerate(rounds)]
        at_least += floor_log_ratio(relabelled) >= observed - 1e-12
        total += 1
    return at_least / total < alpha


DESIGNS = [
    # name, labels of a round (odd, even), rounds, judge
    ("run totals, signed rank (kvscope gate today)", ("bn", "nb"), 10, totals_signed_rank),
    ("run totals, signed rank", ("bn", "nb"), 20, totals_signed_rank),
    ("run totals, best of two a side, signed rank", ("bnnb", "nbbn"), 10, totals_signed_rank),
    ("per-step floors, round permutation", ("bn", "nb"), 10, floor_permutation),
    ("per-step floors, round permutation", ("bnnb", "nbbn"), 10, floor_permutation),
    ("per-step floors, round permutation", ("bn", "nb"), 20, floor_permutation),
    ("per-step floors, round permutation", ("bn", "nb"), 25, floor_permutation),
    ("per-step floors, round permutation", ("bn", "nb"), 30, floor_permutation),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="a same-build gate's --out folder")
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--threshold", type=float, default=0.02)
    parser.add_argument("--stride", type=int, default=2, help="runs between window starts")
    args = parser.parse_args()

    runs = series(args.folder)
    if len({len(r) for r in runs}) != 1:
        sys.exit("the runs differ in their steps: record with --all-at-once")
    totals = [sum(r) for r in runs]
    low = sorted(totals)[len(totals) // 10]
    print(f"{len(runs)} runs of the same build; engine CPU time per run: "
          f"min {min(totals):.0f} ms, median {sorted(totals)[len(totals) // 2]:.0f} ms, "
          f"max {max(totals):.0f} ms; {sum(t > 1.15 * low for t in totals)} runs over "
          f"1.15x the 10th percentile")
    print(f"planted slowdown {100 * args.slowdown:.0f}%, alpha {args.alpha}, "
          f"threshold {100 * args.threshold:.0f}%\n")
    print("| judged by | runs a gate | windows | same build: flagged | slower: caught |")
    print("| --- | --- | --- | --- | --- |")
    for name, (odd, even), n_rounds, judge in DESIGNS:
        length = n_rounds * len(odd)
        windows = flagged = caught = 0
        for start in range(0, len(runs) - length + 1, args.stride):
            window = runs[start:start + length]
            rounds = []
            for i in range(n_rounds):
                labels = odd if i % 2 == 0 else even
                chunk = window[i * len(odd):(i + 1) * len(odd)]
                rounds.append(list(zip(labels, chunk)))
            slower = [[(label, [s * (1 + args.slowdown) for s in steps] if label == "n" else steps)
                       for label, steps in r] for r in rounds]
            windows += 1
            flagged += judge(rounds, args.alpha, args.threshold)
            caught += judge(slower, args.alpha, args.threshold)
        label = f"{name}, {n_rounds} rounds of {odd}"
        print(f"| {label} | {length} | {windows} | {flagged / windows:.1%} | "
              f"{caught / windows:.1%} |", flush=True)


if __name__ == "__main__":
    main()
