#!/usr/bin/python3
"""Draws the two figures of the seed tutorial from matrix_benchmark's CSV: matrix multiplication
and matrix inversion, median seconds (log scale) against log2 N, one line per series (mode,
dtype, with or without host-device transfers).

    /usr/bin/python3 samples/matrix_benchmark/plot.py results.csv --out docs/img \
        [--reference reference.csv] [--title-suffix "2 cores, Zen 5"]

Needs Debian's python3-matplotlib (run it with /usr/bin/python3). Writes
matrix_benchmark_matmul.png and matrix_benchmark_inverse.png into --out.

--reference: optional CSV of points digitised from the seed's 2018 figures, drawn as dotted grey
reference series. Columns: op (matmul or inverse), series (a name without the year, e.g.
"NumPy + MKL": the legend shows "NumPy + MKL (2018, digitised)"), n, seconds. Lines starting
with '#' are comments. No such values ship with tapeflow (see the sample's README.md for where
they must come from).

Exit status 2, with a one-line message, when a CSV cannot be read or lacks a column.
"""
import argparse
import csv
import math
import os
import sys
import textwrap
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

CAPTIONS = {
    "matmul": "Matrix multiplication C = A B of two N x N matrices",
    "inverse": "Matrix inversion of an N x N matrix (LU with partial pivoting)",
}
FLOPS = {
    "matmul": "GFLOP/s in the CSV count 2 N^3 per product",
    "inverse": "GFLOP/s in the CSV count 8 N^3 / 3 per inverse",
}


RESULT_COLUMNS = ("op", "mode", "dtype", "transfers", "device", "threads", "n", "median_s",
                  "min_s", "max_s")
REFERENCE_COLUMNS = ("op", "series", "n", "seconds")


def fail(msg):
    print(f"plot.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_rows(path, columns, what):
    """The CSV's rows ('#' lines skipped); exits 2 when it cannot be read or lacks a column."""
    try:
        with open(path, newline="") as f:
            lines = [line for line in f if not line.startswith("#")]
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
    reader = csv.DictReader(lines)
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        header = ",".join(reader.fieldnames or []) or "(empty)"
        fail(f"{path} is not {what}: it lacks the column(s) {', '.join(missing)} (header: {header})")
    return list(reader)


def label_of(row):
    mode, dtype = row["mode"], row["dtype"]
    if mode == "seed_faithful":
        what = "x * y elementwise" if row["op"] == "matmul" else "inverse"
        where = "GPU" if row["device"].startswith("GPU") else "CPU"
        return f"seed_faithful ({what}, float64 feed cast to float32, transfers; {where})"
    if mode in ("cpu", "cpu_1thread"):
        return f"tapeflow {mode} {dtype} ({row['threads']} thread{'s' if row['threads'] != '1' else ''})"
    xfer = "incl. host transfers" if row["transfers"] == "yes" else "resident"
    return f"tapeflow {mode} {dtype} on {row['device']} ({xfer})"


def read_reference(path):
    """{op: {series: [(n, seconds)]}} from the optional reference CSV."""
    out = {}
    for row in read_rows(path, REFERENCE_COLUMNS, "a reference CSV"):
        try:
            n, sec = int(row["n"]), float(row["seconds"])
        except (TypeError, ValueError) as e:
            fail(f"{path}: bad reference row {row}: {e}")
        out.setdefault(row["op"], OrderedDict()).setdefault(row["series"], []).append((n, sec))
    return out


def plot(op, rows, reference, out_dir, suffix):
    series = OrderedDict()
    for row in rows:
        if row["op"] != op:
            continue
        try:
            pt = (int(row["n"]), float(row["median_s"]), float(row["min_s"]), float(row["max_s"]))
        except (TypeError, ValueError) as e:
            fail(f"bad row {row}: {e}")
        series.setdefault(label_of(row), []).append(pt)
    if not series and op not in reference:
        print(f"plot.py: no {op} rows; no figure", file=sys.stderr)
        return None
    fig, ax = plt.subplots(figsize=(9, 6))
    for label, pts in series.items():
        pts.sort()
        x = [math.log2(n) for n, *_ in pts]
        med = [m for _, m, _, _ in pts]
        lo = [m - a for _, m, a, _ in pts]
        hi = [b - m for _, m, _, b in pts]
        style = "--" if label.startswith("seed_faithful") else "-"
        ax.errorbar(x, med, yerr=[lo, hi], fmt="o" + style, ms=3, capsize=2, label=label)
    for label, pts in reference.get(op, {}).items():
        pts.sort()
        ax.plot([math.log2(n) for n, _ in pts], [s for _, s in pts], "s:", color="grey",
                ms=4, label=f"{label} (2018, digitised)")
    ax.set_yscale("log")
    ax.set_xlabel("log2 N  (N x N matrices)")
    ax.set_ylabel("seconds per operation (median; bars: min to max)")
    title = CAPTIONS[op] + ("\n" + "\n".join(textwrap.wrap(suffix, 95)) if suffix else "")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    note = FLOPS[op]
    if op == "matmul":
        note += ("; seed_faithful is what the 2018 GPU curve timed: an elementwise product "
                 "(N^2 multiplies), not a matrix product")
    fig.text(0.01, 0.005, note, fontsize=7, ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = os.path.join(out_dir, f"matrix_benchmark_{op}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="matrix_benchmark --csv output")
    p.add_argument("--out", default=".", help="folder for the PNG files")
    p.add_argument("--reference", help="optional CSV of digitised 2018 points (op,series,n,seconds)")
    p.add_argument("--title-suffix", default="", help="second title line (machine, threads)")
    a = p.parse_args()
    rows = read_rows(a.csv, RESULT_COLUMNS, "a matrix_benchmark CSV")
    reference = read_reference(a.reference) if a.reference else {}
    os.makedirs(a.out, exist_ok=True)
    for op in ("matmul", "inverse"):
        path = plot(op, rows, reference, a.out, a.title_suffix)
        if path:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
