// Internal to keras/serialization_sequence.cpp: the options a built-in recurrent, wrapper,
// attention, masking or preprocessing layer was made with (what Keras' get_config reports), read
// from the layer's state where only its own .cpp can see it, and the factories for the states
// Keras' from_config makes that the public constructors do not (a Bidirectional with its two
// layers' configs as given). Each accessor returns nullopt when the layer is not of that class.
// Defined beside the layers (keras/layers_recurrent.cpp, keras/layers_attention.cpp,
// keras/layers_kerasmore.cpp,
// keras/layers_misc.cpp, keras/layers_masking.cpp, keras/layers_preprocessing.cpp,
// keras/layers_extra.cpp, keras/layers_rnn_cells.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_extra.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_preprocessing.h"
#include "keras/layers_rnn_cells.h"

namespace tapeflow::keras::detail::layer_options {

// SimpleRNN, LSTM and GRU: every option (the ones a class does not have keep their defaults).
struct RecurrentConfig {
  std::string class_name;  // "SimpleRNN", "LSTM" or "GRU"
  int64_t units = 0;
  std::string activation, recurrent_activation;
  bool use_bias = true;
  Initializer kernel_initializer, recurrent_initializer, bias_initializer;  // defined
  bool unit_forget_bias = true;
  Regularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;
  Constraint kernel_constraint, recurrent_constraint, bias_constraint;
  bool return_sequences = false, go_backwards = false, stateful = false, unroll = false;
  bool zero_output_for_mask = false;
  bool reset_after = true;
  double dropout = 0.0, recurrent_dropout = 0.0;
  std::optional<int64_t> seed;
};
struct BidirectionalConfig {
  std::string merge_mode;
  Layer forward, backward;
};

struct MultiHeadAttentionConfig {
  int64_t num_heads = 0, key_dim = 0;
  layers::MultiHeadAttentionOptions options;  // value_dim set; initializers defined
  // Keras' attention_axes: as given, else once built the default ones, else empty (null).
  std::vector<int> attention_axes;
};
// Attention and AdditiveAttention.
struct AttentionConfig {
  bool additive = false;
  bool use_scale = false;
  std::string score_mode;  // Attention's "dot" or "concat"
  double dropout = 0.0;
  std::optional<int64_t> seed;
};

struct CategoryEncodingConfig {
  int64_t num_tokens = 0;
  std::string output_mode;
};
struct DiscretizationConfig {
  std::vector<double> bin_boundaries;  // empty before adapt() of one made with num_bins
  int64_t num_bins = 0;                // 0: made with bin_boundaries
  double epsilon = 0.01;
};

// Resizing, CenterCrop and the Random* augmentation layers: the options of the class (the others
// keep their defaults).
struct ImageLayerConfig {
  std::string class_name;
  int64_t height = 0, width = 0;               // Resizing, CenterCrop, RandomCrop
  layers::ResizingOptions resizing;            // Resizing
  layers::RandomTransformOptions transform;    // RandomRotation, RandomZoom, RandomTranslation
  std::optional<int64_t> seed;                 // the other random layers
  std::string mode;                            // RandomFlip
  std::pair<double, double> factor{0.0, 0.0};  // the range (RandomZoom, RandomTranslation: height)
  std::optional<std::pair<double, double>> width_factor;  // RandomZoom (none: height's), ...
  std::pair<double, double> value_range{0.0, 255.0};
  double grayscale_factor = 0.5;  // RandomGrayscale
};

// RNN (not its ConvLSTM subclasses): its options and its cell.
struct RNNConfig {
  layers::RNNOptions options;
  std::shared_ptr<layers::RNNCell> cell;
};

// keras/layers_recurrent.cpp
std::optional<RecurrentConfig> recurrent(const LayerImpl& layer);
std::optional<BidirectionalConfig> bidirectional(const LayerImpl& layer);
// Keras' Bidirectional.from_config: the wrapper of `forward` and `backward` themselves (names
// and options as they are), both new recurrent layers of one class with the same units and
// return_sequences and opposite go_backwards (InvalidArgumentError naming the difference
// otherwise). `backward` undefined: as the public constructor (copies of `forward` named
// forward_<name> and backward_<name>).
Layer make_bidirectional(const Layer& forward, const Layer& backward, const std::string& merge_mode,
                         const std::string& name);
// keras/layers_attention.cpp
std::optional<MultiHeadAttentionConfig> multi_head_attention(const LayerImpl& layer);
// keras/layers_kerasmore.cpp
struct GroupQueryAttentionConfig {
  int64_t head_dim = 0, num_query_heads = 0, num_key_value_heads = 0;
  layers::GroupQueryAttentionOptions options;  // initializers filled in (Keras' defaults)
};
std::optional<GroupQueryAttentionConfig> group_query_attention(const LayerImpl& layer);
struct SpectralNormalizationConfig {
  Layer layer;  // the wrapped layer
  int power_iterations = 1;
  // Once built: the wrapped layer's kernel (Keras tracks it as the wrapper's own vars/0 too)
  // and vector_u; undefined before.
  Variable kernel, vector_u;
};
std::optional<SpectralNormalizationConfig> spectral_normalization(const LayerImpl& layer);
std::optional<AttentionConfig> attention(const LayerImpl& layer);
// keras/layers_rnn_cells.cpp
std::optional<RNNConfig> rnn(const LayerImpl& layer);
// ConvLSTM1D/2D/3D (keras/layers_rnn_cells.cpp): kernel_size, strides and dilation_rate one
// value per spatial dimension (as Keras writes them); the options as given.
struct ConvLSTMConfig {
  int rank = 0;
  int64_t filters = 0;
  std::vector<int64_t> kernel_size, strides, dilation_rate;
  layers::ConvLSTMOptions options;
  std::shared_ptr<layers::RNNCell> cell;
};
std::optional<ConvLSTMConfig> conv_lstm(const LayerImpl& layer);
// What Bidirectional needs of an RNN(cell) or ConvLSTM it wraps (keras/layers_rnn_cells.cpp):
// its flags and number of states (nullopt for another layer), its call with states
// (RNN::call_with_state), and Keras' copy of it, from its config with another name, go_backwards
// flipped when asked, and zero_output_for_mask set.
struct SequenceLayerInfo {
  bool return_sequences = false, go_backwards = false, stateful = false;
  size_t num_states = 0;
};
std::optional<SequenceLayerInfo> rnn_info(const LayerImpl& layer);
std::vector<Tensor> rnn_call_with_state(const std::shared_ptr<LayerImpl>& layer, const Tensor& x,
                                        const std::vector<Tensor>& initial_state, bool training,
                                        const Tensor& mask);
std::shared_ptr<LayerImpl> rnn_copy(const LayerImpl& layer, const std::string& name,
                                    bool flip_go_backwards, bool zero_output_for_mask);
// keras/layers_misc.cpp
std::optional<Layer> time_distributed_layer(const LayerImpl& layer);
// keras/layers_preprocessing.cpp
std::optional<layers::NormalizationOptions> normalization(const LayerImpl& layer);
std::optional<ImageLayerConfig> image_layer(const LayerImpl& layer);
// keras/layers_extra.cpp
std::optional<CategoryEncodingConfig> category_encoding(const LayerImpl& layer);
std::optional<DiscretizationConfig> discretization(const LayerImpl& layer);
// The options with the vocabulary as it is now (given or adapted).
std::optional<layers::IntegerLookupOptions> integer_lookup(const LayerImpl& layer);
// Keras' Discretization.from_config: the boundaries and num_bins together (an adapted layer's).
Layer make_discretization(std::vector<double> bin_boundaries, int64_t num_bins, double epsilon,
                          std::string name);
// keras/layers_masking.cpp
std::optional<double> masking_value(const LayerImpl& layer);

}  // namespace tapeflow::keras::detail::layer_options
