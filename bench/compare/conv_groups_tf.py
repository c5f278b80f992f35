#!/usr/bin/env python3
"""TF's side of bench/bench_depthwise.cpp's grouped convolutions: tf.nn.conv2d of a
[32, 56, 56, 128] float32 NHWC input with 3x3 filters of depth 128 / G (G groups, 128 -> 128
channels, SAME), forward alone and forward with the gradients of the input and the filters
(tf.GradientTape, the gradient of the output's sum), eagerly on the CPU with TF's intra-op
threads set to --threads. Prints the median milliseconds per call (one warm-up call, then at
least 5 timed calls and more until they add up to 0.2 s).

    python bench/compare/conv_groups_tf.py [--threads 2] [--groups 4 32]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build. TF's CPU kernel may refuse a grouped convolution (older builds did): the row then says so.
"""
import argparse

from tf_timing import import_tf, median_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--groups", type=int, nargs="+", default=[4, 32])
    args = p.parse_args()
    tf = import_tf(args.threads)

    print(f"TF {tf.__version__}, intra-op threads {args.threads}")
    print(f"{'groups':>6} {'forward_ms':>12} {'step_ms':>12}")
    x = tf.random.uniform([32, 56, 56, 128], -1, 1, seed=1)
    for g in args.groups:
        f = tf.random.uniform([3, 3, 128 // g, 128], -1, 1, seed=2)

        def forward():
            return tf.nn.conv2d(x, f, 1, "SAME").numpy()

        def step():
            with tf.GradientTape() as tape:
                tape.watch([x, f])
                y = tf.nn.conv2d(x, f, 1, "SAME")
            dx, df = tape.gradient(y, [x, f])
            return dx.numpy(), df.numpy()

        try:
            print(f"{g:>6} {median_ms(forward):>12.1f} {median_ms(step):>12.1f}", flush=True)
        except Exception as e:  # noqa: BLE001 (report and go on)
            print(f"{g:>6} not run: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)


if __name__ == "__main__":
    main()
