#!/usr/bin/env python3
"""TF's side of bench/bench_linalg.cpp: tf.linalg.cholesky, eigh, qr, svd, triangular_solve,
slogdet and sqrtm (and sqrtm's gradient, forward and backward, only up to n = 64: TF solves an
n^2 x n^2 system for it) on float64 symmetric positive-definite matrices (B B^T / n + I, B uniform
in [-1, 1)) at the same sizes, eagerly, on the CPU, with TF's intra-op threads set to
--threads. Prints the median milliseconds per call (one warm-up call, then at least 5 timed
calls and more until they add up to 0.2 s).

    python bench/compare/linalg_tf.py [--threads 2] [--sizes 64 256 768]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build.
"""
import argparse

from tf_timing import import_tf, median_ms


def sqrtm_grad(tf, a):
    """The gradient of sum(sqrtm(a) * a) with respect to a (one forward and one backward)."""
    with tf.GradientTape() as tape:
        tape.watch(a)
        y = tf.reduce_sum(tf.linalg.sqrtm(a) * a)
    return tape.gradient(y, a).numpy()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 768])
    args = p.parse_args()
    import numpy as np
    tf = import_tf(args.threads)

    print(f"TF {tf.__version__}, intra-op threads {args.threads}")
    print(f"{'op':<18}" + "".join(f"{'n=' + str(n):>12}" for n in args.sizes))
    rows = {}
    for n in args.sizes:
        rng = np.random.default_rng(n)
        b = rng.uniform(-1, 1, (n, n))
        a = tf.constant(b @ b.T / n + np.eye(n))
        chol = tf.linalg.cholesky(a)
        ops = {
            "cholesky": lambda: tf.linalg.cholesky(a).numpy(),
            "eigh": lambda: tf.linalg.eigh(a)[0].numpy(),
            "qr": lambda: tf.linalg.qr(a)[0].numpy(),
            "svd": lambda: tf.linalg.svd(a)[0].numpy(),
            "triangular_solve": lambda: tf.linalg.triangular_solve(chol, a).numpy(),
            "slogdet": lambda: tf.linalg.slogdet(a)[1].numpy(),
            "sqrtm": lambda: tf.linalg.sqrtm(a).numpy(),
            "sqrtm_grad": lambda: sqrtm_grad(tf, a),
        }
        for name, fn in ops.items():
            skip = name == "sqrtm_grad" and n > 64
            rows.setdefault(name, []).append(float("nan") if skip else median_ms(fn))
    for name, ms in rows.items():
        print(f"{name:<18}" + "".join(f"{m:>12.3f}" for m in ms))


if __name__ == "__main__":
    main()
