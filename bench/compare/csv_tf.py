#!/usr/bin/env python3
"""TF's side of bench/bench_data.cpp's BM_CsvBatch32: one epoch of tf.data.experimental.CsvDataset
over the same 100,000-record file (an int label, required, and 8 float32 features written with 6
decimals, a header line), batched by 32, eagerly on the CPU with TF's intra-op threads set to
--threads. Prints the median milliseconds per epoch and records per second (one warm-up epoch,
then at least 5 timed epochs).

    python bench/compare/csv_tf.py [--threads 2]

Needs TensorFlow (pip install tensorflow-cpu in a venv); used only for comparison, never by the
build.
"""
import argparse
import os
import tempfile

from tf_timing import import_tf, median_ms

RECORDS, FEATURES = 100000, 8


def write_file(path):
    # The same text as BM_CsvBatch32 (C++'s std::to_string of a double: 6 decimals).
    with open(path, "w") as f:
        f.write("label" + "".join(f",f{i}" for i in range(FEATURES)) + "\n")
        for r in range(RECORDS):
            vals = ",".join(f"{((r * 131 + i * 17) % 1000) / 997.0:.6f}" for i in range(FEATURES))
            f.write(f"{r % 10},{vals}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    tf = import_tf(args.threads)
    fd, path = tempfile.mkstemp(suffix=".csv")
    os.close(fd)
    try:
        write_file(path)
        defaults = [tf.constant([], tf.int32)] + [tf.constant(0.0)] * FEATURES
        ds = tf.data.experimental.CsvDataset(path, defaults, header=True).batch(32)

        def epoch():
            for batch in ds:
                pass

        ms = median_ms(epoch)
        print(f"TF {tf.__version__}, intra-op threads {args.threads}, "
              f"{os.path.getsize(path) / 1e6:.1f} MB")
        print(f"CsvDataset {RECORDS} records batched by 32: {ms:.1f} ms per epoch, "
              f"{RECORDS / ms * 1e3 / 1e6:.2f} M records/s")
    finally:
        os.remove(path)


if __name__ == "__main__":
    main()
