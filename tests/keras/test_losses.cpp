// Losses against hand-computed values: reductions, sample weights, from_logits, errors.
#include "keras/losses.h"
#include "support/testing.h"
#include "ops/factory.h"
int main_placeholder_losses = 0;
