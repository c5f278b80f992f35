#!/usr/bin/env python3
"""TF's side of bench/bench_linalg.cpp: tf.linalg.cholesky, eigh, qr, svd, triangular_solve and
slogdet on float64 symmetric positive-definite matrices (B B^T / n + I, B uniform in [-1, 1)) at
the same sizes, eagerly, on the CPU, with TF's intra-op threads set to --threads. Prints the
median milliseconds per call (one warm-up call, then at least 5 timed calls and more until they
add up to 0.2 s).

    python bench/compare/linalg_tf.py [--threads 2] [--sizes 64 256 768]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build.
"""
import argparse

from tf_timing import import_tf, median_ms


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
        }
        for name, fn in ops.items():
            rows.setdefault(name, []).append(median_ms(fn))
    for name, ms in rows.items():
        print(f"{name:<18}" + "".join(f"{m:>12.3f}" for m in ms))


if __name__ == "__main__":
    main()
