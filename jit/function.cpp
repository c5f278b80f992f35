// tf::function is header-only until the tracer lands (see jit/function.h).
#include "jit/function.h"
