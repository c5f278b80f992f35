// Helpers over the time axis of (batch, timesteps, ...) tensors shared by the recurrent layers
// (keras/layers_recurrent.cpp, keras/layers_rnn_cells.cpp). Internal to keras/.
#pragma once

#include "core/tensor.h"

namespace tapeflow::keras::detail {

// y reversed along `axis`, by a gather whose indices n-1, ..., 0 are computed when the graph
// runs: no constant holds the length, so one trace serves every number of timesteps.
Tensor reverse_along(const Tensor& y, int axis);

}  // namespace tapeflow::keras::detail
