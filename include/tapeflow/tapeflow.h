// The umbrella header for users: #include <tapeflow/tapeflow.h> and namespace tf = tapeflow;
// Files inside the library include what they use, never this header.
#pragma once

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "core/tensor_spec.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/print.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
