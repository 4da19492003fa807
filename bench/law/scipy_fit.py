#!/usr/bin/python3
"""The SciPy side of bench/law: the same fits as bench_law, done the way a SciPy user does them
(scipy.optimize.minimize with L-BFGS-B over every start, Huber(1e-3) on log residuals with the
prediction in log-sum-exp form, the same boxes), timed with a wall clock.

  scipy_fit.py chinchilla CSV [--grad numeric|analytic] [--starts K]   # Epoch data, 4,500-start grid
  scipy_fit.py iso-depth CSV  [--grad numeric|analytic] [--starts K]   # 500 random starts

--grad numeric (the default) leaves the gradient to SciPy's finite differences, as Epoch's
replication does; analytic passes the exact gradient. Prints one JSON line."""
import argparse, csv, json, math, sys, time

import numpy as np
from scipy.optimize import minimize
from scipy.special import huber, logsumexp

DELTA = 1e-3


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def chinchilla_problem(path):
    rows = read(path)
    n = np.array([float(r["Model Size"]) for r in rows])
    c = np.array([float(r["Training FLOP"]) for r in rows])
    loss = np.array([float(r["loss"]) for r in rows])
    keep = np.sort(np.argsort(-loss, kind="stable")[5:])  # drop the 5 highest losses
    n, d, loss = n[keep], c[keep] / (6 * n[keep]), loss[keep]
    log_n, log_d, log_l = np.log(n), np.log(d), np.log(loss)

    def terms(p):  # p = (log E, log A, log B, alpha, beta)
        e, a, b, al, be = p
        return np.stack([np.full_like(log_n, e), a - al * log_n, b - be * log_d])


    def grads(p, w, slope):
        _, _, _, al, be = p
        return np.array([(slope * w[0]).sum(), (slope * w[1]).sum(), (slope * w[2]).sum(),
                         -(slope * w[1] * log_n).sum(), -(slope * w[2] * log_d).sum()])

    bounds = [(-3, 2), (-5, 35), (-5, 35), (0, 2.5), (0, 2.5)]
    starts = [np.array([e, a, b, al, be])
              for al in np.arange(0, 2.01, 0.5) for be in np.arange(0, 2.01, 0.5)
              for e in np.arange(-1, 1.01, 0.5) for a in np.arange(0, 26, 5) for b in np.arange(0, 26, 5)]
    return terms, grads, log_l, bounds, starts, ["E", "A", "B", "alpha", "beta"], [True, True, True, False, False]


def isodepth_problem(path):
    rows = read(path)
    n_once = np.array([float(r["N_once"]) for r in rows])
    log_n_rec = np.log([float(r["N_rec"]) for r in rows])
    log_r = np.log([float(r["r"]) for r in rows])
    log_d = np.log([float(r["D"]) for r in rows])
    log_l = np.log([float(r["loss"]) for r in rows])

    def neff(phi):
        rec = np.exp(phi * log_r + log_n_rec)
        return rec, n_once + rec

    def terms(p):  # p = (log E, log A, log B, alpha, beta, phi)
        e, a, b, al, be, phi = p
        _, ne = neff(phi)
        return np.stack([np.full_like(log_d, e), a - al * np.log(ne), b - be * log_d])

    def grads(p, w, slope):
        _, _, _, al, be, phi = p
        rec, ne = neff(phi)
        log_ne = np.log(ne)
        return np.array([(slope * w[0]).sum(), (slope * w[1]).sum(), (slope * w[2]).sum(),
                         -(slope * w[1] * log_ne).sum(), -(slope * w[2] * log_d).sum(),
                         -(slope * w[1] * al * log_r * rec / ne).sum()])

    bounds = [(-3, 2), (-5, 35), (-5, 35), (0, 2.5), (0, 2.5), (-3, 3)]
    rng = np.random.default_rng(0)
    lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    starts = [lo + (hi - lo) * rng.random(6) for _ in range(500)]
    return terms, grads, log_l, bounds, starts, ["E", "A", "B", "alpha", "beta", "phi"], [True, True, True, False, False, False]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("law", choices=["chinchilla", "iso-depth"])
    ap.add_argument("csv")
    ap.add_argument("--grad", choices=["numeric", "analytic"], default="numeric")
    ap.add_argument("--starts", type=int, default=0, help="use only the first K starts (0: all)")
    a = ap.parse_args()
    terms, grads, log_l, bounds, starts, names, logs = (chinchilla_problem if a.law == "chinchilla" else isodepth_problem)(a.csv)
    if a.starts:
        starts = starts[: a.starts]

    def objective(p):
        return huber(DELTA, logsumexp(terms(p), axis=0) - log_l).sum()

    def objective_and_grad(p):
        t = terms(p)
        lse = logsumexp(t, axis=0)
        r = lse - log_l
        w = np.exp(t - lse)
        return huber(DELTA, r).sum(), grads(p, w, np.clip(r, -DELTA, DELTA))

    t0, c0 = time.perf_counter(), time.process_time()
    best, failed = None, 0
    for s in starts:
        if a.grad == "numeric":
            res = minimize(objective, s, method="L-BFGS-B", bounds=bounds)
        else:
            res = minimize(objective_and_grad, s, method="L-BFGS-B", bounds=bounds, jac=True)
        if not np.isfinite(res.fun):
            failed += 1
            continue
        if best is None or res.fun < best.fun:
            best = res
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    params = {k: (math.exp(v) if lg else float(v)) for k, v, lg in zip(names, best.x, logs)}
    print(json.dumps({"law": a.law, "grad": a.grad, "starts": len(starts), "failed": failed,
                      "objective": float(best.fun), "params": params, "seconds": seconds,
                      "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    sys.exit(main())
