// Raising a caught tf::Error again with another message, keeping its type (dispatch.h's
// rethrow_named puts an op's name in front; keras/layers.cpp puts a layer's call in front).
#pragma once

#include <string>

#include "core/error.h"

namespace tapeflow::detail {

// e raised again, of the same type, with `message` as its message. Call it from the handler
// that caught e: an Error subclass outside core/error.h is raised again unchanged.
[[noreturn]] void rethrow_with_message(const Error& e, const std::string& message);

}  // namespace tapeflow::detail
