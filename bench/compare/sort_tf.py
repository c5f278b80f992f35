#!/usr/bin/env python3
"""TF's side of bench/bench_sort.cpp: tf.math.top_k, tf.sort, tf.argsort, tf.searchsorted,
tf.math.unsorted_segment_sum/max/prod and tf.nn.ctc_loss (forward, and forward plus the gradient
under a GradientTape, with dense labels; forward with sparse labels, TF's native kernel) on the
same shapes, float32, eagerly, on the CPU, with TF's intra-op threads set to --threads. Prints
the median milliseconds per call (one warm-up call, then at least 5 timed calls and more until
they add up to 0.2 s).

    python bench/compare/sort_tf.py [--threads 2]

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

    g = tf.random.Generator.from_seed(1)
    rows = []
    for r, c, k in [(256, 1000, 5), (32, 100000, 10)]:
        x = g.normal((r, c))
        rows.append((f"top_k {r}x{c} k={k}", median_ms(lambda: tf.math.top_k(x, k).values.numpy())))
    for r, c in [(256, 1000), (1, 1 << 20)]:
        x = g.normal((r, c))
        rows.append((f"sort {r}x{c}", median_ms(lambda: tf.sort(x).numpy())))
    x = g.normal((256, 1000))
    rows.append(("argsort 256x1000", median_ms(lambda: tf.argsort(x).numpy())))
    table = tf.sort(g.uniform((1 << 16,)))
    values = g.uniform((1 << 18,))
    rows.append(("searchsorted 2^18 into 2^16",
                 median_ms(lambda: tf.searchsorted(table, values).numpy())))
    data = g.uniform((100000, 64), 0.5, 1.5)
    ids = g.uniform((100000,), 0, 1000, dtype=tf.int32)
    for name, fn in [("sum", tf.math.unsorted_segment_sum), ("max", tf.math.unsorted_segment_max),
                     ("prod", tf.math.unsorted_segment_prod)]:
        rows.append((f"unsorted_segment_{name} 100000x64 into 1000",
                     median_ms(lambda: fn(data, ids, 1000).numpy())))
    logits = g.normal((50, 16, 20))
    labels = g.uniform((16, 10), 1, 20, dtype=tf.int32)
    label_length = tf.fill([16], 10)
    logit_length = tf.fill([16], 50)

    def ctc():
        return tf.nn.ctc_loss(labels, logits, label_length, logit_length, logits_time_major=True,
                              blank_index=0)

    def ctc_grad():
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.reduce_sum(ctc())
        return tape.gradient(loss, logits)

    # Dense labels take TF's ctc_loss_dense (a scan of TF ops); sparse labels its CTCLoss kernel.
    sparse_labels = tf.sparse.from_dense(labels)

    def ctc_sparse():
        return tf.nn.ctc_loss(sparse_labels, logits, None, logit_length, logits_time_major=True,
                              blank_index=0)

    rows.append(("ctc_loss (50, 16, 20), labels 10", median_ms(lambda: ctc().numpy())))
    rows.append(("ctc_loss + gradient", median_ms(lambda: ctc_grad().numpy())))
    rows.append(("ctc_loss, sparse labels (CTCLoss kernel)",
                 median_ms(lambda: ctc_sparse().numpy())))
    print(f"TF {tf.__version__}, intra-op threads {args.threads}")
    for name, ms in rows:
        print(f"{name:<45}{ms:>12.3f} ms")


if __name__ == "__main__":
    main()
