#include "ops/traced_loop.h"

#include <atomic>

#include "core/check.h"

namespace tapeflow::detail {

namespace {
std::atomic<WhileLoopHook> g_hook{nullptr};
std::atomic<ScanHook> g_scan_hook{nullptr};
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

void set_scan_hook(ScanHook hook) {
  g_scan_hook.store(hook);
}

std::optional<std::vector<Tensor>> ops_scan(const char* op, const OpsScanBody& body,
                                            std::vector<Tensor> init, std::vector<Tensor> elems,
                                            bool reverse) {
  const ScanHook hook = g_scan_hook.load();
  if (hook == nullptr) return std::nullopt;
  return hook(op, body, std::move(init), std::move(elems), reverse);
}

}  // namespace tapeflow::detail
