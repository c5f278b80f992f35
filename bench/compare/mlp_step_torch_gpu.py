#!/usr/bin/env python3
"""PyTorch's side of bench_cuda's BM_MlpStep: issue 5's 784-128-10 MLP train step on GPU 0.

The same step as bench/mlp_step.h (ReLU, softmax cross-entropy on int64 labels, batch mean,
plain SGD at lr = 0.01, float32, every tensor on the GPU), written as PyTorch's eager Python
(`loss.backward()` and in-place `sub_` updates under no_grad), and again replayed as a captured
torch.cuda.CUDAGraph. Like BM_MlpStep it times the wall clock of one step including the wait
for its loss (`loss.item()`), medians over --repeats rounds of --steps steps.

    python3 bench/compare/mlp_step_torch_gpu.py [--batches 32,256] [--steps 200] [--repeats 5]

Run where PyTorch with CUDA is installed (the lent H200's python3); tools/gpu_check.sh runs it
when `import torch` works. PyTorch's eager step pays Python's dispatch per op: libtorch's C++
API would be somewhat faster per op; it is the reference users of PyTorch see.
"""
import argparse
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="32,256")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("mlp_step_torch_gpu: no CUDA device; nothing measured")
        return
    dev = torch.device("cuda:0")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print(f"{'batch':>5} {'mode':<22} {'us/step (median)':>17} {'min':>9} {'max':>9}")
    for batch in [int(b) for b in a.batches.split(",")]:
        g = torch.Generator(device=dev).manual_seed(1)
        w1 = (torch.randn(784, 128, device=dev, generator=g) * 0.05).requires_grad_()
        b1 = torch.zeros(128, device=dev, requires_grad=True)
        w2 = (torch.randn(128, 10, device=dev, generator=g) * 0.05).requires_grad_()
        b2 = torch.zeros(10, device=dev, requires_grad=True)
        params = [w1, b1, w2, b2]
        x = torch.rand(batch, 784, device=dev, generator=g)
        y = torch.randint(0, 10, (batch,), device=dev, generator=g, dtype=torch.int64)

        def step():
            h = torch.relu(x @ w1 + b1)
            logits = h @ w2 + b2
            loss = torch.nn.functional.cross_entropy(logits, y)
            for q in params:
                q.grad = None
            loss.backward()
            with torch.no_grad():
                for q in params:
                    q.sub_(q.grad * 0.01)
            return loss

        def timed(run, label):
            for _ in range(20):  # warm-up: kernels loaded, allocator caches filled
                run().item()
            rounds = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    run().item()
                rounds.append((time.perf_counter() - t0) / a.steps * 1e6)
            print(f"{batch:>5} {label:<22} {statistics.median(rounds):>17.1f} "
                  f"{min(rounds):>9.1f} {max(rounds):>9.1f}")

        timed(step, "eager")
        # The whole step captured once and replayed (PyTorch's CUDA-graph recipe: warm up on a
        # side stream, gradients kept allocated between replays).
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()

        def step_keep_grads():
            h = torch.relu(x @ w1 + b1)
            logits = h @ w2 + b2
            loss = torch.nn.functional.cross_entropy(logits, y)
            loss.backward()
            with torch.no_grad():
                for q in params:
                    q.sub_(q.grad * 0.01)
                    q.grad.zero_()
            return loss

        for q in params:
            q.grad = torch.zeros_like(q)
        with torch.cuda.graph(graph):
            static_loss = step_keep_grads()

        def replay():
            graph.replay()
            return static_loss

        timed(replay, "CUDA graph replay")


if __name__ == "__main__":
    main()
