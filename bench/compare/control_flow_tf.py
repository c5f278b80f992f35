#!/usr/bin/env python3
"""TF's side of bench/bench_control_flow.cpp: the loop y = y * 0.999 + sin(y) * 0.001 over (n,)
float32, 100 iterations counted by an int64 tensor, in tf.function as tf.while_loop (AutoGraph's
form of a `while` on a tensor), alone and with the gradient of sum(y) under a GradientTape inside
the function, and one tf.cond per call; then tf.map_fn(lambda r: tanh(r) * sum(r * r), x) and
tf.scan(lambda a, r: a * 0.9 + tanh(r), x) over the n rows of an (n, 16) float32 x (the scan also
with the gradient of the sum of its states, the tape inside); then keras.layers.LSTM(32) on
(32, T, 16) float32, T = 20 / 200, a tf.function step with the gradient of the mean square
output with respect to its weights (Keras' default unroll=False: a while_loop); on the CPU with
TF's intra-op threads set to --threads.
Prints the median microseconds per call and per iteration (one warm-up call, then at least 5
timed calls and more until they add up to 0.2 s).

    python bench/compare/control_flow_tf.py [--threads 2]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build.
"""
import argparse

from tf_timing import import_tf, median_ms

ITERATIONS = 100


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    tf = import_tf(args.threads)

    def loop(y0):
        _, y = tf.while_loop(lambda i, y: i < ITERATIONS,
                             lambda i, y: (i + 1, y * 0.999 + tf.sin(y) * 0.001),
                             (tf.constant(0, tf.int64), y0))
        return y

    @tf.function
    def while_traced(y0):
        return loop(y0)

    @tf.function
    def while_traced_grad(y0):
        with tf.GradientTape() as tape:
            tape.watch(y0)
            s = tf.reduce_sum(loop(y0))
        return tape.gradient(s, y0)

    @tf.function
    def cond_traced(y, p):
        return tf.cond(p, lambda: y * 0.999 + tf.sin(y) * 0.001, lambda: y - 0.001)

    t, f = tf.constant(True), tf.constant(False)
    for n in (64, 1 << 16):
        y0 = tf.fill((n,), 0.5)
        for name, fn in (("while_traced", lambda: while_traced(y0).numpy()),
                         ("while_traced_grad", lambda: while_traced_grad(y0).numpy())):
            ms = median_ms(fn)
            print(f"{name}/{n}: {1e3 * ms:.1f} us per call, "
                  f"{1e3 * ms / ITERATIONS:.2f} us per iteration")
        flip = [False]

        def one_cond():
            flip[0] = not flip[0]
            return cond_traced(y0, t if flip[0] else f).numpy()

        print(f"cond_traced/{n}: {1e3 * median_ms(one_cond):.1f} us per call")

    @tf.function
    def map_fn_traced(x):
        return tf.map_fn(lambda r: tf.tanh(r) * tf.reduce_sum(r * r), x)

    def scan(x):
        return tf.scan(lambda a, r: a * 0.9 + tf.tanh(r), x)

    scan_traced = tf.function(scan)

    @tf.function
    def scan_traced_grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            s = tf.reduce_sum(scan(x))
        return tape.gradient(s, x)

    for n in (64, 1024):
        x = tf.fill((n, 16), 0.5)
        for name, fn in (("map_fn_traced", map_fn_traced), ("scan_traced", scan_traced),
                         ("scan_traced_grad", scan_traced_grad)):
            ms = median_ms(lambda: fn(x).numpy())
            print(f"{name}/{n}: {1e3 * ms:.1f} us per call, {1e3 * ms / n:.2f} us per element")

    import keras
    for steps in (20, 200):
        lstm = keras.layers.LSTM(32)
        x = tf.fill((32, steps, 16), 0.25)
        lstm(x)

        @tf.function
        def lstm_step(xv):
            with tf.GradientTape() as tape:
                y = lstm(xv)
                loss = tf.reduce_mean(y * y)
            return tape.gradient(loss, lstm.trainable_variables)

        ms = median_ms(lambda: lstm_step(x)[0].numpy())
        print(f"lstm_loop_step/{steps}: {1e3 * ms:.1f} us per call")


if __name__ == "__main__":
    main()
