"""The timing shared by the TF comparison scripts (linalg_tf.py, sort_tf.py): TF eager on the CPU
with a given number of intra-op threads, and the median milliseconds of a call (one warm-up call,
then at least 5 timed calls and more until they add up to 0.2 s, at most 1000)."""
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def import_tf(threads):
    """TensorFlow with `threads` intra-op threads and one inter-op thread."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


def median_ms(fn):
    fn()
    times = []
    while len(times) < 5 or sum(times) < 0.2:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 1000:
            break
    return 1e3 * statistics.median(times)
