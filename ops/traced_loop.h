// A data-dependent loop for ops that need one inside a trace (expm's squarings). tf::while_loop
// lives in jit/ (jit/control_flow.h), above ops/; jit/ registers it here when the library loads.
#pragma once

#include <functional>
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

}  // namespace tapeflow::detail
