#!/usr/bin/env python3
"""Reference p-values for tst_compare's mann_whitney_matches_scipy, from SciPy
(an implementation nobody on the project wrote).

kvscope's profiler::mann_whitney_greater(better, worse) is the one-sided
p-value that `worse` tends to be larger than `better`, i.e. SciPy's

    scipy.stats.mannwhitneyu(worse, better, alternative='greater',
                             method='asymptotic', use_continuity=True)

(the first SciPy argument is kvscope's second). The values were generated
with SciPy 1.17.1 / NumPy 2.4.6 and pasted into tst_compare.cpp as literals.
For each case the script also prints the p-value without the continuity
correction and without the tie correction, to show which cases tell the
corrections apart.

Run by hand (needs network for pip):
    python3 -m venv /tmp/scipyvenv
    /tmp/scipyvenv/bin/pip install scipy
    /tmp/scipyvenv/bin/python tests/profiler/data/mann_whitney_reference.py
"""

from __future__ import annotations

import math

import numpy as np
import scipy
from scipy.stats import mannwhitneyu, norm, rankdata

# (name, better, worse): kvscope's argument order.
CASES = [
    ("separated", list(range(1, 11)), list(range(11, 21))),
    ("separated_reversed", list(range(11, 21)), list(range(1, 11))),
    ("interleaved", [1, 3, 5, 7, 9, 11, 13, 15], [2, 4, 6, 8, 10, 12, 14, 16]),
    ("all_ties", [5.0] * 10, [5.0] * 10),
    ("ties_across", [1, 2, 2, 3, 3, 3, 4], [2, 3, 3, 4, 4, 5, 5, 6]),
    (
        "unequal_sizes",
        [10.5, 11.25, 9.75, 12.0, 10.0],
        [11.0, 12.5, 13.25, 10.25, 11.75, 12.75, 14.0, 9.5, 13.0, 12.25, 11.5, 15.0],
    ),
    # Three distinct values in 16 observations: the tie correction shrinks the
    # variance a lot and, with these small samples, the continuity correction
    # moves p by a good share of itself.
    ("heavy_ties", [1, 1, 1, 2, 2, 2, 2, 3], [2, 2, 2, 3, 3, 3, 3, 3]),
    # Different sizes, overlapping, ties between samples, all kinds at once.
    ("mixed", [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], [8, 9, 7, 9, 3, 2, 3, 8, 4, 6]),
]


def uncorrected(better, worse, continuity: bool, ties: bool) -> float:
    """The same normal approximation with a correction switched off."""
    n1, n2 = len(better), len(worse)
    ranks = rankdata(list(better) + list(worse))
    u = ranks[n1:].sum() - n2 * (n2 + 1) / 2
    n = n1 + n2
    _, counts = np.unique(list(better) + list(worse), return_counts=True)
    tie_term = float((counts**3 - counts).sum()) if ties else 0.0
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:
        return float("nan")
    z = (u - n1 * n2 / 2 - (0.5 if continuity else 0.0)) / math.sqrt(variance)
    return float(norm.sf(z))


def main() -> None:
    print(f"// scipy {scipy.__version__}, numpy {np.__version__}")
    for name, better, worse in CASES:
        r = mannwhitneyu(
            worse, better, alternative="greater", method="asymptotic", use_continuity=True
        )
        p = float(r.pvalue)
        print(f"{name}: p = {p!r}  (U = {float(r.statistic)!r})")
        print(
            f"    without continuity correction: {uncorrected(better, worse, False, True)!r}, "
            f"without tie correction: {uncorrected(better, worse, True, False)!r}"
        )


if __name__ == "__main__":
    main()
