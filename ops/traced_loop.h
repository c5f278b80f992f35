// Loops for ops that need one inside a trace: a data-dependent one (expm's squarings) and one over
// a tensor's first dimension (map_fn, foldl, foldr and scan in ops/higher_order.h). They live in
// jit/ (jit/control_flow.h, jit/scan_loop.cpp), above ops/; jit/ registers them here when the
// library loads.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::detail {

using OpsLoopCond = std::function<Tensor(const std::vector<Tensor>&)>;
using OpsLoopBody = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using WhileLoopHook = std::vector<Tensor> (*)(const OpsLoopCond&, const OpsLoopBody&,
                                              std::vector<Tensor>);
void set_while_loop_hook(WhileLoopHook hook);
// tf::while_loop(cond, body, loop_vars); InternalError when jit/ registered none.
std::vector<Tensor> ops_while_loop(const OpsLoopCond& cond, const OpsLoopBody& body,
                                   std::vector<Tensor> loop_vars);

// One step of a loop over elements: (carries, one slice of each elems) -> the next carries, then
// the step's results (stacked by the loop).
using OpsScanBody =
    std::function<std::vector<Tensor>(const std::vector<Tensor>&, const std::vector<Tensor>&)>;
using ScanHook = std::optional<std::vector<Tensor>> (*)(const char* op, const OpsScanBody& body,
                                                        std::vector<Tensor> init,
                                                        std::vector<Tensor> elems, bool reverse);
void set_scan_hook(ScanHook hook);
// Inside a trace: body traced once into one loop node that runs it for each slice along the
// first dimension of elems (all of the same length; from the last with reverse), carries
// starting at init. Returns the final carries, then each of the body's results stacked in
// elems' order. nullopt when the body cannot run as a loop node (it holds random ops or
// assignments, whose gradient would need their values from every step: the caller unrolls) or
// no hook is registered. `op` names the caller in errors and graph dumps.
std::optional<std::vector<Tensor>> ops_scan(const char* op, const OpsScanBody& body,
                                            std::vector<Tensor> init, std::vector<Tensor> elems,
                                            bool reverse);

}  // namespace tapeflow::detail
