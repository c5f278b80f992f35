#!/usr/bin/python3
"""Side by side on this machine's CPU: N x N matrix multiplication and inversion, float32 and
float64, through tapeflow (samples/matrix_benchmark, mode cpu), NumPy (Debian's python3-numpy)
and libtorch (bench/compare/compare_torch.cpp), all with the same thread count and the same
timing rule (one warm-up run, then at least 5 timed runs and more, up to 1000, until they add up
to 0.2 s; the median). Prints a ratio table: median seconds of each and tapeflow / fastest.

    /usr/bin/python3 bench/compare/compare.py [--threads 2] [--max-n 4096] [--rounds 2]
        [--build-dir build-bench] [--no-build] [--csv out.csv]

The table goes to stdout; the only result file is --csv (relative paths are relative to the
working directory): every measurement of every round. matrix_benchmark's own CSV for each size
goes to a temporary folder, removed afterwards. Without --no-build the script configures and
builds --build-dir (default build-bench) and writes nothing else there.

With --gpu it compares on GPU 0 instead: tapeflow against cuBLAS and cuSOLVER called directly
(bench/compare/compare_cuda.cpp, built with the CUDA backend), by device time (CUDA events
around each run) and by wall time (each run waited for), the two alternating by round.

The machine may be shared: for each size, each round runs the three one after the other (the
order rotates) so that all three see about the same load, and the table keeps each one's best
median and best minimum over the rounds (other work only ever slows a run down); the ratio is
given for both. OPENBLAS_CORETYPE is passed through untouched and printed, with
openblas_get_config() of the OpenBLAS each implementation loaded.
"""
import argparse
import csv
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- NumPy, run in a child interpreter so that OPENBLAS_NUM_THREADS applies before import ----

def numpy_worker(args):
    import numpy as np

    info = "OpenBLAS not found in the process"
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    for lib in libs:
        try:
            h = ctypes.CDLL(lib)
            h.openblas_get_config.restype = ctypes.c_char_p
            h.openblas_get_corename.restype = ctypes.c_char_p
            info = (f"{h.openblas_get_config().decode()}; core {h.openblas_get_corename().decode()}"
                    f" ({lib})")
            break
        except (OSError, AttributeError):
            continue
    rows = []
    for op in args.ops.split(","):
        for dt in args.dtypes.split(","):
            for n in [int(s) for s in args.sizes.split(",")]:
                rng = np.random.default_rng(n)
                a = rng.uniform(-1, 1, (n, n)).astype(dt)
                b = rng.uniform(-1, 1, (n, n)).astype(dt)
                if op == "inverse":
                    a += np.sqrt(n).astype(dt) * np.eye(n, dtype=dt)
                    fn = lambda: np.linalg.inv(a)  # noqa: E731
                else:
                    fn = lambda: a @ b  # noqa: E731
                fn()
                times, total = [], 0.0
                while len(times) < args.repeats or (total < args.min_time and len(times) < 1000):
                    t0 = time.perf_counter()
                    fn()
                    t = time.perf_counter() - t0
                    times.append(t)
                    total += t
                times.sort()
                m = len(times) // 2
                med = times[m] if len(times) % 2 else 0.5 * (times[m - 1] + times[m])
                rows.append(dict(impl="numpy", op=op, dtype=dt, n=n, runs=len(times),
                                 median_s=med, min_s=times[0], max_s=times[-1]))
    print(json.dumps({"info": f"numpy {np.__version__}, BLAS: {info}", "rows": rows}))


# ---- the three implementations ----

def run_tapeflow(a, build, n, env):
    exe = os.path.join(build, "samples", "matrix_benchmark")
    if not os.access(exe, os.X_OK):
        sys.exit(f"compare.py: {exe} not built (build the matrix_benchmark target, or drop "
                 "--no-build)")
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp:
        return run_tapeflow_in(a, exe, n, env, os.path.join(tmp, "tapeflow.csv"))


def run_tapeflow_in(a, exe, n, env, out):
    cmd = [exe, "--modes", "cpu",
           "--ops", a.ops, "--dtypes", a.dtypes, "--min-n", str(n), "--max-n", str(n),
           "--threads", str(a.threads), "--check-max-n", "0", "--time-budget", "100000",
           "--repeats", str(a.repeats), "--min-time", str(a.min_time), "--csv", out]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    info = [l[2:] for l in p.stdout.splitlines() if l.startswith("# gemm backends")]
    with open(out) as f:
        rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
    return ("tapeflow: " + (info[0] if info else "?"),
            [dict(impl="tapeflow", op=r["op"], dtype=r["dtype"], n=int(r["n"]), runs=int(r["runs"]),
                  median_s=float(r["median_s"]), min_s=float(r["min_s"]), max_s=float(r["max_s"]))
             for r in rows])


def run_numpy(a, sizes, env):
    cmd = [sys.executable, os.path.abspath(__file__), "--numpy-worker", "--ops", a.ops,
           "--dtypes", a.dtypes, "--sizes", sizes, "--repeats", str(a.repeats),
           "--min-time", str(a.min_time)]
    p = subprocess.run(cmd, env=dict(env, OPENBLAS_NUM_THREADS=str(a.threads)),
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare.py: the NumPy worker failed:\n{p.stderr}")
    d = json.loads(p.stdout)
    return d["info"], d["rows"]


def run_torch(a, build, sizes, env):
    exe = os.path.join(build, "bench", "compare_torch")
    if not os.access(exe, os.X_OK):
        log(f"compare.py: {exe} not built (libtorch-dev not found by CMake?); no libtorch column")
        return "libtorch: not built", []
    cmd = [exe, "--threads", str(a.threads), "--ops", a.ops, "--dtypes", a.dtypes, "--sizes", sizes,
           "--repeats", str(a.repeats), "--min-time", str(a.min_time)]
    p = subprocess.run(cmd, env=dict(env, OPENBLAS_NUM_THREADS=str(a.threads)),
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed:\n{p.stderr}")
    info = [l[2:] for l in p.stdout.splitlines() if l.startswith("#")]
    rows = list(csv.DictReader(l for l in p.stdout.splitlines() if not l.startswith("#")))
    for r in rows:
        r["n"] = int(r["n"])
        for k in ("median_s", "min_s", "max_s"):
            r[k] = float(r[k])
    return "libtorch: " + (info[0] if info else "?"), rows


def run_gpu(a, build, sizes):
    """The --gpu table: compare_cuda's rows, best of the rounds, tapeflow / cuBLAS-cuSOLVER."""
    exe = os.path.join(build, "bench", "compare_cuda")
    if not os.access(exe, os.X_OK):
        sys.exit(f"compare.py: {exe} not built (configure with the CUDA backend)")
    cmd = [exe, "--ops", a.ops, "--dtypes", a.dtypes, "--sizes", ",".join(map(str, sizes)),
           "--repeats", str(a.repeats), "--min-time", str(a.min_time), "--rounds", str(a.rounds)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed (exit {p.returncode})")
    for line in p.stdout.splitlines():
        if line.startswith("#"):
            print(f"  {line[2:]}")
    rows = list(csv.DictReader(l for l in p.stdout.splitlines() if not l.startswith("#")))
    best = {}
    for r in rows:
        key = (r["op"], r["dtype"], int(r["n"]), r["impl"])
        dev, wall = float(r["device_median_s"]), float(r["median_s"])
        old = best.get(key, (float("inf"), float("inf")))
        best[key] = (min(old[0], dev), min(old[1], wall))
    print()
    print(f"{'op':8} {'dtype':8} {'N':>5} {'tapeflow_dev_s':>15} {'cuda_dev_s':>12} "
          f"{'ratio(device)':>14} {'tapeflow_wall_s':>16} {'cuda_wall_s':>12} {'ratio(wall)':>12}")
    worst = worst_wall = 0.0
    for op in a.ops.split(","):
        for dt in a.dtypes.split(","):
            for n in sizes:
                t, c = best.get((op, dt, n, "tapeflow")), best.get((op, dt, n, "cuda"))
                if t is None or c is None:
                    continue
                ratio, ratio_wall = t[0] / c[0], t[1] / c[1]
                worst, worst_wall = max(worst, ratio), max(worst_wall, ratio_wall)
                flag = "" if ratio <= 1.05 else "  > 5% slower"
                print(f"{op:8} {dt:8} {n:>5} {t[0]:15.4e} {c[0]:12.4e} {ratio:14.3f} "
                      f"{t[1]:16.4e} {c[1]:12.4e} {ratio_wall:12.3f}{flag}")
    print(f"\nworst tapeflow/cuBLAS-cuSOLVER: {worst:.3f} by device time, {worst_wall:.3f} by wall "
          f"time (target: at most 1.05)")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["impl"])
            w.writeheader()
            for r in rows:
                w.writerow(r)


def build_targets(build, targets):
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                        "-DTAPEFLOW_BUILD_BENCH=ON", "-DTAPEFLOW_BUILD_TESTS=OFF"], check=True)
    subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target"] +
                   targets, check=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", 0) or os.cpu_count()),
                   help="threads of each implementation, at least 1 (default: OMP_NUM_THREADS, "
                        "else all cores)")
    p.add_argument("--min-n", type=int, default=64)
    p.add_argument("--max-n", type=int, default=4096)
    p.add_argument("--ops", default="matmul,inverse")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    p.add_argument("--no-build", action="store_true")
    p.add_argument("--csv", help="write every measurement (all rounds) to this file")
    p.add_argument("--gpu", action="store_true",
                   help="compare on GPU 0 against cuBLAS and cuSOLVER called directly")
    p.add_argument("--numpy-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--sizes", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.numpy_worker:
        numpy_worker(a)
        return
    if a.threads < 1:
        p.error(f"--threads must be at least 1, got {a.threads}")
    if not all(n >= 1 and n & (n - 1) == 0 for n in (a.min_n, a.max_n)) or a.max_n > 32768:
        p.error(f"--min-n and --max-n must be powers of two up to 32768, got {a.min_n} and "
                f"{a.max_n}")
    if a.min_n > a.max_n:
        p.error(f"--min-n {a.min_n} is above --max-n {a.max_n}")
    if a.repeats < 1 or a.repeats > 100000:
        p.error(f"--repeats must be in [1, 100000], got {a.repeats}")
    if a.rounds < 1:
        p.error(f"--rounds must be at least 1, got {a.rounds}")
    if not a.min_time >= 0:
        p.error(f"--min-time must be a number >= 0, got {a.min_time}")
    build = os.path.abspath(a.build_dir)
    if a.no_build and not os.path.isdir(build):
        sys.exit(f"compare.py: the build folder {build} does not exist (drop --no-build, or give "
                 "--build-dir)")
    if not a.no_build:
        build_targets(build, ["compare_cuda"] if a.gpu else ["matrix_benchmark", "compare_torch"])
    sizes = []
    n = a.min_n
    while n <= a.max_n:
        sizes.append(n)
        n *= 2
    if a.gpu:
        print(f"GPU side by side: rounds={a.rounds}, repeats={a.repeats}, min-time={a.min_time}")
        run_gpu(a, build, sizes)
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))

    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}  "
          f"threads={a.threads}  cores={os.cpu_count()}  rounds={a.rounds}  "
          f"load average {os.getloadavg()[0]:.1f}")
    runners = [("tapeflow", lambda n: run_tapeflow(a, build, n, env)),
               ("numpy", lambda n: run_numpy(a, str(n), env)),
               ("torch", lambda n: run_torch(a, build, str(n), env))]
    all_rows, infos = [], {}
    k = 0
    for n in sizes:
        for r in range(a.rounds):
            order = runners[k % 3:] + runners[:k % 3]
            k += 1
            for name, fn in order:
                log(f"N={n} round {r + 1}/{a.rounds}: {name}")
                info, rows = fn(n)
                infos[name] = info
                for row in rows:
                    row["round"] = r + 1
                all_rows += rows
    for name in ("tapeflow", "numpy", "torch"):
        if name in infos:
            print(f"  {infos[name]}")

    best, best_min = {}, {}
    for row in all_rows:
        key = (row["op"], row["dtype"], int(row["n"]), row["impl"])
        best[key] = min(best.get(key, float("inf")), float(row["median_s"]))
        best_min[key] = min(best_min.get(key, float("inf")), float(row["min_s"]))
    impls = [i for i in ("tapeflow", "numpy", "torch") if any(k[3] == i for k in best)]
    print()
    print(f"{'op':8} {'dtype':8} {'N':>5} " + " ".join(f"{i + '_s':>12}" for i in impls) +
          f" {'fastest':>9} {'tapeflow/fastest':>17} {'(by min)':>9}")
    worst = worst_min = 0.0
    for op in a.ops.split(","):
        for dt in a.dtypes.split(","):
            for n in sizes:
                vals = {i: best.get((op, dt, n, i)) for i in impls}
                have = {i: v for i, v in vals.items() if v is not None}
                if not have:
                    continue
                fastest = min(have, key=have.get)
                ratio = have.get("tapeflow", float("nan")) / have[fastest]
                mins = {i: best_min[(op, dt, n, i)] for i in have}
                ratio_min = mins.get("tapeflow", float("nan")) / min(mins.values())
                worst = max(worst, ratio)
                worst_min = max(worst_min, ratio_min)
                flag = "" if ratio <= 1.05 else "  > 5% slower"
                print(f"{op:8} {dt:8} {n:>5} " +
                      " ".join(f"{vals[i]:12.4e}" if vals[i] is not None else f"{'-':>12}"
                               for i in impls) +
                      f" {fastest:>9} {ratio:17.3f} {ratio_min:9.3f}{flag}")
    print(f"\nworst tapeflow/fastest: {worst:.3f} by median, {worst_min:.3f} by min "
          f"(target: at most 1.05)")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["round", "impl", "op", "dtype", "n", "runs",
                                              "median_s", "min_s", "max_s"])
            w.writeheader()
            for row in all_rows:
                w.writerow({k: row[k] for k in w.fieldnames})


if __name__ == "__main__":
    main()
