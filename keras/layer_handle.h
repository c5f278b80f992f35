// Internal to keras/layers*.cpp: a layer handle's state as its implementation class.
#pragma once

#include "core/check.h"
#include "keras/layers.h"

namespace tapeflow::keras::detail {

// The handle's state as `Impl`; a handle assigned another kind of layer through a Layer
// reference is a FailedPreconditionError naming both (as Model::model_impl).
template <class Impl>
Impl& impl_as(const Layer& l, const char* cls) {
  auto* p = dynamic_cast<Impl*>(&l.impl());
  TF_CHECK_T(FailedPreconditionError, p != nullptr, cls,
             "this {} handle refers to layer \"{}\" ({}), which is not a {} (was another layer "
             "assigned to it through a Layer reference?)",
             cls, l.impl().name(), l.impl().class_name(), cls);
  return *p;
}

}  // namespace tapeflow::keras::detail

namespace tapeflow::keras {
using detail::impl_as;  // the layer files call it unqualified
}  // namespace tapeflow::keras
