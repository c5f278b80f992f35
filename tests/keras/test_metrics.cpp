#include "keras/metrics.h"
#include "support/testing.h"
