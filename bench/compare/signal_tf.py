#!/usr/bin/env python3
"""TF's side of bench/bench_signal.cpp: tf.signal.rfft, irfft, fft, stft, inverse_stft and a
log-mel front end (forward, and forward plus the gradient under a GradientTape) on the same
shapes, float32, eagerly, on the CPU, with TF's intra-op threads set to --threads; numpy's
np.fft.rfft (pocketfft) beside the rffts. Prints the median milliseconds per call (one warm-up
call, then at least 5 timed calls and more until they add up to 0.2 s).

    python bench/compare/signal_tf.py [--threads 2]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build.
"""
import argparse

import numpy as np

from tf_timing import import_tf, median_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    tf = import_tf(args.threads)

    g = tf.random.Generator.from_seed(1)
    rows = []
    for r, n in [(1000, 1024), (1000, 1000)]:
        x = g.normal((r, n))
        xn = x.numpy()
        rows.append((f"rfft {r}x{n}", median_ms(lambda: tf.signal.rfft(x).numpy())))
        rows.append((f"numpy rfft {r}x{n}", median_ms(lambda: np.fft.rfft(xn))))
    z = tf.signal.rfft(g.normal((1000, 1024)))
    rows.append(("irfft 1000x1024", median_ms(lambda: tf.signal.irfft(z).numpy())))
    c = tf.complex(g.normal((64, 1 << 14)), g.normal((64, 1 << 14)))
    rows.append(("fft 64x16384", median_ms(lambda: tf.signal.fft(c).numpy())))
    audio = g.normal((8, 160000))
    rows.append(("stft 8x160000 (400, 160, 512)",
                 median_ms(lambda: tf.signal.stft(audio, 400, 160, 512).numpy())))
    s = tf.signal.stft(audio, 400, 160, 512)
    rows.append(("inverse_stft", median_ms(lambda: tf.signal.inverse_stft(s, 400, 160, 512).numpy())))
    mel = tf.signal.linear_to_mel_weight_matrix(80, 257, 16000, 20, 8000)

    def log_mel():
        return tf.math.log(tf.tensordot(tf.abs(tf.signal.stft(audio, 400, 160, 512)), mel, 1) + 1e-6)

    def log_mel_grad():
        with tf.GradientTape() as tape:
            tape.watch(audio)
            y = tf.reduce_sum(log_mel())
        return tape.gradient(y, audio)

    rows.append(("log-mel 8x160000", median_ms(lambda: log_mel().numpy())))
    rows.append(("log-mel + gradient", median_ms(lambda: log_mel_grad().numpy())))
    for name, ms in rows:
        print(f"{name:40s} {ms:10.3f} ms")


if __name__ == "__main__":
    main()
