#!/usr/bin/env python3
"""TF's side of the convolution benchmarks, eagerly on the CPU with TF's intra-op threads set to
--threads, forward alone and forward with the gradients of the input and the filters
(tf.GradientTape, the gradient of the output's sum); median milliseconds per call (one warm-up
call, then at least 5 timed calls and more until they add up to 0.2 s):
  grouped  bench/bench_depthwise.cpp's BM_grouped_conv2d*: tf.nn.conv2d of [32, 56, 56, 128]
           float32 with 3x3 filters of depth 128 / G (G groups, 128 -> 128, SAME);
  conv3d   bench/bench_conv3d.cpp: tf.nn.conv3d of [4, 16, 32, 32, 32] float32 with 3x3x3
           filters, 32 -> 32, SAME.

    python bench/compare/conv_tf.py [--threads 2] [--cases grouped conv3d] [--groups 4 32]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build. A case TF's CPU kernels refuse (older builds had no grouped convolution) says so.
"""
import argparse

from tf_timing import import_tf, median_ms


def forward_and_step(tf, conv, x, f):
    """The two timed calls of one case: conv(x, f), and it with both gradients."""

    def forward():
        return conv(x, f).numpy()

    def step():
        with tf.GradientTape() as tape:
            tape.watch([x, f])
            y = conv(x, f)
        dx, df = tape.gradient(y, [x, f])
        return dx.numpy(), df.numpy()

    return forward, step


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cases", nargs="+", default=["grouped", "conv3d"],
                   choices=["grouped", "conv3d"])
    p.add_argument("--groups", type=int, nargs="+", default=[4, 32])
    args = p.parse_args()
    tf = import_tf(args.threads)

    print(f"TF {tf.__version__}, intra-op threads {args.threads}")
    print(f"{'case':<16} {'forward_ms':>12} {'step_ms':>12}")
    runs = []
    if "grouped" in args.cases:
        x = tf.random.uniform([32, 56, 56, 128], -1, 1, seed=1)
        for g in args.groups:
            f = tf.random.uniform([3, 3, 128 // g, 128], -1, 1, seed=2)
            runs.append((f"grouped G={g}", lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"), x, f))
    if "conv3d" in args.cases:
        x = tf.random.uniform([4, 16, 32, 32, 32], -1, 1, seed=1)
        f = tf.random.uniform([3, 3, 3, 32, 32], -0.1, 0.1, seed=2)
        runs.append(("conv3d", lambda a, b: tf.nn.conv3d(a, b, [1] * 5, "SAME"), x, f))
    for name, conv, x, f in runs:
        forward, step = forward_and_step(tf, conv, x, f)
        try:
            print(f"{name:<16} {median_ms(forward):>12.1f} {median_ms(step):>12.1f}", flush=True)
        except Exception as e:  # noqa: BLE001 (report and go on)
            print(f"{name:<16} not run: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)


if __name__ == "__main__":
    main()
