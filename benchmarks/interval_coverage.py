"""Coverage of the package's interval methods (echo_lib.stats) at n = 3, 10, 30, with the data generators of
tests/test_stats_coverage.py, beside the percentile bootstrap they replaced; prints a markdown table.

    .venv/bin/python benchmarks/interval_coverage.py
"""
import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
import numpy as np
import test_stats_coverage as T
from echo_lib.stats import mean_interval, paired_difference, proportion_interval, cluster_interval
rows=[]
for shape,(gen,truth) in T.DISTRIBUTIONS.items():
    for n in T.SIZES:
        rng=np.random.default_rng(n); rows.append(("t", shape, n, T.coverage(lambda:(gen(rng,n),), mean_interval, truth)))
for shape,(gen,truth) in T.DISTRIBUTIONS.items():
    for n in T.SIZES:
        rng=np.random.default_rng(100+n)
        def draw():
            case=rng.normal(0,5,n); return case+gen(rng,n), case+rng.normal(0,1,n)
        rows.append(("paired t", shape, n, T.coverage(draw, paired_difference, truth)))
for p in (0.05,0.2,0.5,0.8):
    for n in T.SIZES:
        rng=np.random.default_rng(200+n); rows.append(("wilson-cc", f"p={p}", n, T.coverage(lambda:(rng.random(n)<p,), proportion_interval, p)))
for shape,(gen,truth) in T.CLUSTERED.items():
    for n in T.SIZES:
        rng=np.random.default_rng(300+n); units=np.repeat(np.arange(n),4)
        rows.append(("cluster t", shape, n, T.coverage(lambda:(gen(rng,n).astype(float).ravel(),units), cluster_interval, truth)))
rng=np.random.default_rng(0)
def pb(x,n_boot=1000):
    m=x[rng.integers(0,x.size,(n_boot,x.size))].mean(axis=1); lo,hi=np.quantile(m,[.025,.975]); return type("I",(),{"low":lo,"high":hi})()
for n in (3,10):
    gen,truth=T.DISTRIBUTIONS["normal"]; rows.append(("percentile bootstrap (old)","normal",n,T.coverage(lambda:(gen(rng,n),),pb,truth,reps=1000)))
import collections
tab=collections.OrderedDict()
for m,s,n,c in rows: tab.setdefault((m,s),{})[n]=c
print("| method | data | n = 3 | n = 10 | n = 30 |\n|---|---|---|---|---|")
for (m,s),d in tab.items(): print(f"| {m} | {s} | "+" | ".join(f"{d[n]:.3f}" if n in d else "-" for n in (3,10,30))+" |")
