// Internal checking macros (not part of the public API). User errors go through TF_CHECK_ARG and
// friends, formatted "[op] message"; broken invariants through TF_ASSERT (an InternalError).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace tapeflow::detail {

template <class E, class... Args>
[[noreturn]] void throw_error(const char* op, fmt::format_string<Args...> f, Args&&... args) {
  throw E(fmt::format("[{}] ", op) + fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tapeflow::detail

#define TF_CHECK_T(ERROR, COND, OP, ...)                                              \
  do {                                                                                \
    if (!(COND)) [[unlikely]]                                                         \
      ::tapeflow::detail::throw_error<::tapeflow::ERROR>(OP, __VA_ARGS__);            \
  } while (0)

// Throws InvalidArgumentError("[op] <formatted message>") unless COND holds.
#define TF_CHECK_ARG(COND, OP, ...) TF_CHECK_T(InvalidArgumentError, COND, OP, __VA_ARGS__)

#define TF_THROW(ERROR, OP, ...) ::tapeflow::detail::throw_error<::tapeflow::ERROR>(OP, __VA_ARGS__)

// Internal invariant: a failure is a bug in tapeflow, reported with the file and line.
#define TF_ASSERT(COND)                                                                \
  do {                                                                                 \
    if (!(COND)) [[unlikely]]                                                          \
      throw ::tapeflow::InternalError(fmt::format("internal check failed: {} at {}:{}", \
                                                  #COND, __FILE__, __LINE__));         \
  } while (0)
