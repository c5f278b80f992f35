#include "keras/checkpoint.h"
#include "support/testing.h"
