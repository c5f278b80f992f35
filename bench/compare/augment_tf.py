#!/usr/bin/env python3
"""Keras 3.15 (TensorFlow backend) and TF 2.21 on bench_augment's shapes, eagerly on the CPU:
CLAHE, RandAugment and AugMix on 8 x 128 x 128 x 3 images, crop_and_resize of 100 boxes to
14 x 14 from a 256 x 256 x 64 map (and its gradient), non_max_suppression of 1000 boxes to 100,
combined_non_max_suppression of 8 x 1000 boxes in 20 classes. Median milliseconds per call
(bench/compare/tf_timing.py).

    KERAS_BACKEND=tensorflow python3 bench/compare/augment_tf.py [--threads 2]
"""
import argparse
import os

import numpy as np

from tf_timing import import_tf, median_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 2)))
    a = p.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    tf = import_tf(a.threads)
    import keras

    rng = np.random.default_rng(1)
    x = tf.constant(rng.uniform(0, 255, (8, 128, 128, 3)).astype(np.float32))
    rows = []
    for name, layer in [("CLAHE", keras.layers.ContrastLimitedAdaptiveHistogramEqualization()),
                        ("RandAugment", keras.layers.RandAugment()),
                        ("AugMix", keras.layers.AugMix())]:
        rows.append((name, median_ms(lambda: layer(x, training=True))))
    fmap = tf.constant(rng.uniform(0, 1, (1, 256, 256, 64)).astype(np.float32))
    corner = rng.uniform(0, 0.7, (100, 2)).astype(np.float32)
    boxes = tf.constant(np.concatenate([corner, corner + 0.3], 1))
    idx = tf.zeros([100], tf.int32)
    rows.append(("crop_and_resize",
                 median_ms(lambda: tf.image.crop_and_resize(fmap, boxes, idx, [14, 14]))))
    w = tf.constant(rng.uniform(-1, 1, (100, 14, 14, 64)).astype(np.float32))

    def crop_grad():
        with tf.GradientTape() as tape:
            tape.watch([fmap, boxes])
            loss = tf.reduce_sum(tf.image.crop_and_resize(fmap, boxes, idx, [14, 14]) * w)
        return tape.gradient(loss, [fmap, boxes])

    rows.append(("crop_and_resize + grad", median_ms(crop_grad)))
    c2 = rng.uniform(0, 0.9, (1000, 2)).astype(np.float32)
    b2 = tf.constant(np.concatenate([c2, c2 + 0.1], 1))
    s2 = tf.constant(rng.uniform(0, 1, 1000).astype(np.float32))
    rows.append(("non_max_suppression",
                 median_ms(lambda: tf.image.non_max_suppression(b2, s2, 100, 0.5))))
    c3 = rng.uniform(0, 0.9, (8, 1000, 1, 2)).astype(np.float32)
    b3 = tf.constant(np.concatenate([c3, c3 + 0.1], 3))
    s3 = tf.constant(rng.uniform(0, 1, (8, 1000, 20)).astype(np.float32))
    rows.append(("combined_non_max_supp.",
                 median_ms(lambda: tf.image.combined_non_max_suppression(
                     b3, s3, 100, 100, 0.5, 0.05))))
    print(f"TF {tf.__version__}, Keras {keras.__version__}, {a.threads} threads")
    for name, ms in rows:
        print(f"{name:22s} {ms:10.3f} ms")


if __name__ == "__main__":
    main()
