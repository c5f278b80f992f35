#include "ops/traced_loop.h"

#include <atomic>

#include "core/check.h"

namespace tapeflow::detail {

namespace {
std::atomic<WhileLoopHook> g_hook{nullptr};
}  // namespace

void set_while_loop_hook(WhileLoopHook hook) {
  g_hook.store(hook);
}

std::vector<Tensor> ops_while_loop(const OpsLoopCond& cond, const OpsLoopBody& body,
                                   std::vector<Tensor> loop_vars) {
  const WhileLoopHook hook = g_hook.load();
  TF_CHECK_T(InternalError, hook != nullptr, "while_loop",
             "no loop implementation registered (jit/control_flow.cpp registers one)");
  return hook(cond, body, std::move(loop_vars));
}

}  // namespace tapeflow::detail
