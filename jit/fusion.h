// Elementwise fusion for traced graphs: a chain of float32 (or, on the CPU, float64) elementwise
// ops on one device (unary math, relu, add/subtract/multiply/divide/maximum/minimum with
// full-size or one-element operands, or rows repeated along the leading dimensions: a bias
// over channels) becomes one `fused_elementwise` node; so does a tree of them whose
// intermediate values have no other reader (a * s + b * t). On the CPU its kernel
// walks the output in tiles of 1024 elements and runs every step on a tile while the
// intermediates stay in cache, with the same vectorised loops as eager execution
// (ops/cpu/fusion_kernels.h), so fused results equal unfused ones. On a GPU
// (FusionOptions::cuda) it runs one kernel generated for the chain and compiled with NVRTC:
// every element is read once and written once. The node's gradient recomputes the chain under
// a tape, so fused graphs stay differentiable.
#pragma once

#include "jit/graph.h"

namespace tapeflow::jit {

struct FusionOptions {
  // Also fuse float32 chains on GPUs into kernels generated for them and compiled with NVRTC
  // (jit/cuda_codegen.h); tf::function sets it for jit_compile. Without NVRTC (or when a
  // kernel does not compile) the chain stays unfused, with a warning.
  bool cuda = false;
};

// TAPEFLOW_FUSION=0 leaves traced graphs unfused (to compare or debug; read when a graph is
// optimised); on otherwise.
bool fusion_enabled();

// Replaces every fusable chain of two or more nodes by one fused node; returns how many.
int fuse_elementwise(Graph& graph);
int fuse_elementwise(Graph& graph, const FusionOptions& options);

// Node `node` of `graph` alone as a one-step fused node (null when it could not join a fused
// chain; see fuse_elementwise), with its inputs in the graph's numbering in `inputs`: for updates
// computed into a variable's buffer, which only the fused kernels can do.
std::shared_ptr<Primitive> fuse_single_op(const Graph& graph, int node,
                                          const FusionOptions& options,
                                          std::vector<Graph::Ref>* inputs);

// A fused node (fuse_elementwise's) that may write its output over its full-size inputs, for
// updates computed into a variable's buffer (jit/variable_update.h): the node itself on the CPU
// (its kernel has in-place loops), on a GPU a copy whose generated kernels are compiled for
// `device` without __restrict__ pointers. Null for any other primitive; throws when the kernel
// does not compile.
std::shared_ptr<Primitive> fused_writing_over_inputs(const std::shared_ptr<Primitive>& fused,
                                                     Device device);

}  // namespace tapeflow::jit
