#!/usr/bin/env python3
"""TF's side of bench/bench_conv3d.cpp: tf.nn.conv3d of a [4, 16, 32, 32, 32] float32 NDHWC input
with 3x3x3 filters, 32 -> 32 channels, SAME, forward alone and forward with the gradients of the
input and the filters (tf.GradientTape, the gradient of the output's sum), eagerly on the CPU
with TF's intra-op threads set to --threads. Prints the median milliseconds per call (one
warm-up call, then at least 5 timed calls and more until they add up to 0.2 s).

    python bench/compare/conv3d_tf.py [--threads 2]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build.
"""
import argparse

from tf_timing import import_tf, median_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    tf = import_tf(args.threads)

    x = tf.random.uniform([4, 16, 32, 32, 32], -1, 1, seed=1)
    f = tf.random.uniform([3, 3, 3, 32, 32], -0.1, 0.1, seed=2)

    def forward():
        return tf.nn.conv3d(x, f, [1, 1, 1, 1, 1], "SAME").numpy()

    def step():
        with tf.GradientTape() as tape:
            tape.watch([x, f])
            y = tf.nn.conv3d(x, f, [1, 1, 1, 1, 1], "SAME")
        dx, df = tape.gradient(y, [x, f])
        return dx.numpy(), df.numpy()

    print(f"TF {tf.__version__}, intra-op threads {args.threads}")
    print(f"conv3d forward {median_ms(forward):.1f} ms, forward and both gradients "
          f"{median_ms(step):.1f} ms")


if __name__ == "__main__":
    main()
