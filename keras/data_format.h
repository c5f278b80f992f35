// Keras' data_format argument of the convolution, pooling, padding, cropping, upsampling,
// spatial-dropout and Flatten layers: "channels_last" (the default; "" means it too), where the
// channels are the last axis (NHWC, NWC, NDHWC), or "channels_first", where they are axis 1
// (NCHW, NCW, NCDHW). The layers compute in channels_last: a channels_first layer moves axis 1
// of its input to the end before, and the last axis of its output back to 1 after.
#pragma once

#include <string>

#include "core/shape.h"
#include "core/tensor.h"

namespace tapeflow::keras::detail {

class DataFormat {
 public:
  DataFormat() = default;
  // Keras' data_format for layer class `cls`: "channels_last" or "channels_first", any case, or
  // "" for backend::image_data_format() (Keras' None); anything else is an InvalidArgumentError
  // naming the class and the value.
  static DataFormat parse(const char* cls, const std::string& data_format);
  static DataFormat first() {
    DataFormat f;
    f.first_ = true;
    return f;
  }

  bool channels_first() const { return first_; }
  // Keras' spelling, for get_config: "channels_first" or "channels_last".
  const char* keras_name() const { return first_ ? "channels_first" : "channels_last"; }
  // The input's channel axis for a rank-`rank` shape: 1 or rank - 1.
  int channel_axis(int rank) const { return first_ ? 1 : rank - 1; }
  // The layout of a rank-(spatial + 2) input, for messages: "NHWC", "NCHW (channels_first)",
  // "(batch, steps, channels)", "(batch, channels, steps) (channels_first)", "NDHWC", ...
  std::string layout(int spatial) const;
  // Keras' rank expectation for messages: "expected ndim=4 (NCHW (channels_first))",
  // "expected ndim=3 (batch, steps, channels)".
  std::string expected_ndim(int spatial) const;

  // A shape in this format to channels_last and back (unchanged when channels_last or of rank
  // below 3).
  TensorShape to_last(const TensorShape& s) const;
  TensorShape to_first(const TensorShape& s) const;
  // The same for tensors: a transpose when channels_first.
  Tensor to_last(const Tensor& x) const;
  Tensor to_first(const Tensor& x) const;
  // Images of rank 3 (one image: (C, H, W) <-> (H, W, C)) or 4 (a batch, as to_last / to_first)
  // in this format to channels_last and back; other ranks unchanged.
  TensorShape image_to_last(const TensorShape& s) const;
  TensorShape image_to_first(const TensorShape& s) const;
  Tensor image_to_last(const Tensor& x) const;
  Tensor image_to_first(const Tensor& x) const;
  // The image layers' input check: empty when `s` is a rank-3 or rank-4 image shape in this
  // format (with a known height and width when `known_hw`), else what Keras would report.
  std::string image_mismatch(const TensorShape& s, bool known_hw) const;

  // Keras' InputSpec check of a layer built for rank-`rank` inputs with `channels` at the
  // channel axis (None passes): empty when `s` passes, else the expectation to report
  // ("expected ndim=4 and axis 1 of input shape to have value 3").
  std::string mismatch(const TensorShape& s, int rank, int64_t channels) const;

 private:
  bool first_ = false;
};

// The data_format of a layer that takes it from backend::image_data_format() when it is made
// (Keras' data_format=None) and from its config when loaded: the image preprocessing and
// augmentation layers (keras/layers_preprocessing.cpp, layers_augment.cpp), which compute in
// channels_last between image_to_last and image_to_first.
class ImageFormat {
 public:
  virtual ~ImageFormat() = default;
  DataFormat data_format() const { return format_; }
  void set_data_format(DataFormat f) { format_ = f; }

 protected:
  DataFormat format_ = DataFormat::parse("", "");
};

}  // namespace tapeflow::keras::detail
