"""How steady is this machine's speed, core by core? One 256x256 fp32 matmul loop pinned
to each of CPUs 0 and 1 (PyTorch, one thread each) for N seconds, GFLOP/s per 0.5 s bin:
the coefficient of variation per core, the correlation between the cores, and the sd of
the log ratio of the two cores' bins. Run it on an otherwise idle machine:

    scripts/python bench/validity/core_speed.py 60
"""
import os, sys, time, json, multiprocessing as mp
def loop(core, q, seconds):
    os.sched_setaffinity(0, {core})
    import torch
    torch.set_num_threads(1)
    a = torch.rand(256, 256)
    out = []
    t0 = time.time()
    while time.time() - t0 < seconds:
        t = time.time(); n = 0
        while time.time() - t < 0.5:
            a @ a; n += 1
        out.append((t - t0, n * 2 * 256**3 / (time.time() - t) / 1e9))
    q.put((core, out))
if __name__ == "__main__":
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 40
    q = mp.Queue()
    ps = [mp.Process(target=loop, args=(c, q, secs)) for c in (0, 1)]
    for p in ps: p.start()
    res = dict(q.get() for _ in ps)
    for p in ps: p.join()
    a = [v for _, v in res[0]]; b = [v for _, v in res[1]]
    n = min(len(a), len(b)); a, b = a[:n], b[:n]
    import statistics as st
    ma, mb = st.mean(a), st.mean(b)
    cov = sum((x-ma)*(y-mb) for x, y in zip(a, b)) / (n-1)
    r = cov / (st.stdev(a) * st.stdev(b))
    print(json.dumps({"n": n, "core0_mean": round(ma,1), "core1_mean": round(mb,1), "cv0": round(st.stdev(a)/ma,3), "cv1": round(st.stdev(b)/mb,3), "corr": round(r,3),
                      "log_ratio_sd": round(st.stdev([__import__('math').log(x/y) for x, y in zip(a, b)]),3)}))
    print([round(x) for x in a]); print([round(y) for y in b])
