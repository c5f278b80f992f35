#!/usr/bin/env python3
"""Fits float32 tanh's rational approximation in ops/cpu/unary_ops.h.

tanh(x) ~ x P(x^2) / Q(x^2) on [0, C], P(0) = Q(0) = 1, minimising the largest relative error
with Lawson's iteratively reweighted linear least squares on P - g Q (g = tanh(x) / x), each
round weighted by 1 / (g Q) of the round before. Prints the coefficients (lowest degree first)
and the relative error of the float64 fit; tanh_ulp.cpp measures the float32 code.

  /usr/bin/python3 bench/accuracy/fit_tanh.py [deg_p deg_q C]   (Debian's python3-numpy)
"""
import sys

import numpy as np


def fit(deg_p, deg_q, c, rounds=400, points=8000):
    x = np.concatenate([c * (1 - np.cos(np.linspace(0, np.pi / 2, points))),
                        np.linspace(0, c, points), np.geomspace(1e-4, c, points)])
    x = np.unique(x)[1:]
    s = (x / c) ** 2  # the fit runs in x^2 / c^2, in [0, 1], for a well-conditioned basis
    g = np.tanh(x) / x
    vp = np.vander(s, deg_p + 1, increasing=True)
    vq = np.vander(s, deg_q + 1, increasing=True)
    weights = np.ones_like(s)
    q_before = np.ones_like(s)
    best = None
    for _ in range(rounds):
        w = np.sqrt(weights) / (g * q_before)
        a = np.hstack([vp[:, 1:], -g[:, None] * vq[:, 1:]]) * w[:, None]
        coef, *_ = np.linalg.lstsq(a, (g - 1) * w, rcond=None)
        p = np.concatenate([[1.0], coef[:deg_p]])
        q = np.concatenate([[1.0], coef[deg_p:]])
        q_before = vq @ q
        err = (vp @ p / q_before - g) / g
        worst = np.max(np.abs(err))
        if best is None or worst < best[0]:
            best = (worst, p.copy(), q.copy())
        weights = weights * np.abs(err) + 1e-300
        weights /= weights.sum()
    worst, p, q = best
    scale = [c ** (-2 * j) for j in range(max(deg_p, deg_q) + 1)]  # back to powers of x^2
    return worst, [p[j] * scale[j] for j in range(deg_p + 1)], [
        q[j] * scale[j] for j in range(deg_q + 1)]


if __name__ == "__main__":
    deg_p, deg_q, c = (int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])) \
        if len(sys.argv) > 3 else (5, 4, 9.1)
    worst, p, q = fit(deg_p, deg_q, c)
    print(f"degrees {deg_p}/{deg_q} on [0, {c}]: largest relative error {worst:.3e}")
    print("P:", " ".join(f"{float(np.float32(v)):.9g}" for v in p))
    print("Q:", " ".join(f"{float(np.float32(v)):.9g}" for v in q))
