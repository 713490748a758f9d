#!/usr/bin/env python3
# Reference values for tests/profiler/tst_rank_interval.cpp, computed by brute
# force: the null distributions of the Mann-Whitney U and Wilcoxon signed-rank
# statistics by enumerating every ordering or sign assignment (no formula
# shared with profiler/gate/rank_interval.cpp), then the Hodges-Lehmann ratios and
# their intervals from the sorted pairwise differences or Walsh averages.
# Half ranks (ties) round toward no difference: the p-values are conservative.
# Run: python3 tests/profiler/data/rank_interval_reference.py
import itertools, math
from fractions import Fraction
def mw_cdf(n, m, u):
    total = 0; below = 0
    for pos in itertools.combinations(range(n+m), n):   # positions of "now" values in the sorted pool
        s = set(pos); U = 0; bases_before = 0
        for i in range(n+m):
            if i in s: U += bases_before
            else: bases_before += 1
        total += 1; below += (U <= u)
    return Fraction(below, total)
def sr_cdf(n, w):
    total=0; below=0
    for signs in itertools.product([0,1], repeat=n):
        W = sum(r+1 for r,sg in enumerate(signs) if sg)
        total+=1; below += (W<=w)
    return Fraction(below,total)
for (n,m,u) in [(5,5,2),(5,5,3),(4,6,3),(7,3,5),(6,6,7)]:
    print("mw", n, m, u, float(mw_cdf(n,m,u)))
for (n,w) in [(7,2),(8,5),(10,8),(10,10),(12,13)]:
    print("sr", n, w, float(sr_cdf(n,w)))
def unpaired(base, now, conf):
    d = sorted(math.log(x)-math.log(y) for x in now for y in base)
    N=len(d); mid = d[N//2] if N%2 else (d[N//2-1]+d[N//2])/2
    n,m=len(now),len(base); tail=(1-conf)/2; k=0
    while k < N//2 and mw_cdf(n,m,k) <= tail: k+=1
    U = sum(1 if x>y else 0.5 if x==y else 0 for x in now for y in base)
    pg = float(mw_cdf(n,m,N-math.floor(U)))
    return math.exp(mid), math.exp(d[k-1]), math.exp(d[N-k]), pg
def paired(base, now, conf):
    d=[math.log(x)-math.log(y) for x,y in zip(now,base)]; n=len(d)
    wa=sorted((d[i]+d[j])/2 for i in range(n) for j in range(i,n)); N=len(wa)
    mid = wa[N//2] if N%2 else (wa[N//2-1]+wa[N//2])/2
    tail=(1-conf)/2; k=0
    while k < N//2 and sr_cdf(n,k) <= tail: k+=1
    # W+: ranks of |d| (zeros dropped), tied magnitudes sharing their mean rank.
    nz=[x for x in d if x!=0]
    Wp=0
    for x in nz:
        if x > 0:
            below=sum(1 for y in nz if abs(y) < abs(x)); tied=sum(1 for y in nz if abs(y)==abs(x))
            Wp += below + (tied+1)/2
    top=len(nz)*(len(nz)+1)//2
    pg=float(sr_cdf(len(nz), top-math.floor(Wp)))
    return math.exp(mid), math.exp(wa[k-1]), math.exp(wa[N-k]), pg
b=[1.00,1.02,0.99,1.01,1.03]; n=[1.06,1.05,1.08,1.04,1.07]
print("unpaired95", ["%.17g"%v for v in unpaired(b,n,0.95)])
b2=[10.1,9.8,10.4,10.0,9.9,10.2]; n2=[10.0,10.3,9.7,10.5,10.1,9.6,10.2]
print("unpaired90", ["%.17g"%v for v in unpaired(b2,n2,0.90)])
pb=[100,130,90,120,110,95,140,105]; pn=[104,136,93,127,114,99,146,108]
print("paired98", ["%.17g"%v for v in paired(pb,pn,0.98)])
pb2=[5.0,5.2,4.9,5.1,5.3,5.0,4.8,5.2,5.1,4.9]; pn2=[5.1,5.1,5.0,5.0,5.4,4.95,4.9,5.3,5.0,5.0]
print("paired95", ["%.17g"%v for v in paired(pb2,pn2,0.95)])
