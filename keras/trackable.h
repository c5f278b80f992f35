// Trackable: what a checkpoint (tf::train::Checkpoint, save_weights) saves from an object.
// Layers, models, optimizers and metrics implement it; names are stable across runs so that a
// checkpoint written by one process loads in another.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace tapeflow::keras {

class Trackable {
 public:
  virtual ~Trackable() = default;
  // (name, variable) pairs in a stable order; names are unique within the object and use '/'
  // between levels, e.g. "dense/kernel" or "dense_1/bias".
  virtual std::vector<std::pair<std::string, Variable>> tracked_variables() const = 0;
};

}  // namespace tapeflow::keras
