// Keras' OrthogonalRegularizer: values from Keras 3.15 (TF backend), gradients against central
// differences, errors, and its config in a layer's.
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/layers.h"
#include "keras/regularizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {
// Keras' test weight: 0.5 sin(i) over a (4, 3) float32 matrix.
tf::Tensor weight(tf::DType dtype) {
  std::vector<double> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * std::sin(static_cast<double>(i));
  return tf::cast(tf::convert_to_tensor(v, {4, 3}), dtype);
}
}  // namespace

TEST_CASE("OrthogonalRegularizer matches Keras 3.15", "[keras][cpu]") {
  // keras.regularizers.OrthogonalRegularizer(0.3, mode)(w).
  CHECK(K::regularizers::OrthogonalRegularizer(0.3, "rows")(weight(tf::float32)).item<float>() ==
        Approx(0.2901041805744171).epsilon(1e-6));
  CHECK(K::regularizers::OrthogonalRegularizer(0.3, "columns")(weight(tf::float32)).item<float>() ==
        Approx(0.2508005201816559).epsilon(1e-6));
  // A zero row stays zero (Keras: 0.0 for [[1, 0], [0, 0], [0, 0]] in both modes).
  const tf::Tensor z =
      tf::convert_to_tensor(std::vector<float>{1, 0, 0, 0, 0, 0}, tf::TensorShape{3, 2});
  CHECK(K::regularizers::OrthogonalRegularizer(1.0)(z).item<float>() == 0.0f);
  CHECK(K::regularizers::OrthogonalRegularizer(1.0, "columns")(z).item<float>() == 0.0f);
  // Orthonormal rows: no penalty; one row: no pairs, 0 (Keras divides by zero pairs).
  CHECK(K::regularizers::OrthogonalRegularizer(1.0)(tf::eye(3, tf::float64)).item<double>() == 0.0);
  CHECK(K::regularizers::OrthogonalRegularizer(1.0)(tf::ones({1, 4})).item<float>() == 0.0f);
  // Gradients (float64) against central differences, both modes.
  for (const std::string mode : {"rows", "columns"}) {
    CAPTURE(mode);
    const K::Regularizer r = K::regularizers::OrthogonalRegularizer(0.3, mode);
    tf::testing::check_gradient([&](const tf::Tensor& w) { return r(w); }, {4, 3},
                                weight(tf::float64).numpy<double>(), 1e-6, 1e-8);
  }
}

TEST_CASE("OrthogonalRegularizer: errors and configs", "[keras][cpu][serialization]") {
  // Keras' messages.
  require_error([] { K::regularizers::OrthogonalRegularizer(0.1, "diag"); },
                {"Invalid value for argument `mode`. Expected one of {\"rows\", \"columns\"}. "
                 "Received: mode=diag"});
  require_error([] { K::regularizers::OrthogonalRegularizer(0.1)(tf::zeros({3})); },
                {"Inputs to OrthogonalRegularizer must have rank 2. Received: inputs.shape=(3,)"});
  // In a layer's config as Keras writes it (the factor as Keras' float32), and back.
  const K::Layer dense = K::layers::Dense(
      4, {.kernel_regularizer = K::regularizers::OrthogonalRegularizer(0.3, "columns")});
  const K::saving::Config c = K::saving::get_config(dense);
  CHECK(c["kernel_regularizer"] ==
        K::saving::Config::parse(R"({"module": "keras.regularizers", "class_name":
        "OrthogonalRegularizer", "config": {"factor": 0.30000001192092896, "mode": "columns"},
        "registered_name": null})"));
  const K::Layer copy = K::saving::from_config("Dense", c);
  CHECK(K::saving::get_config(copy)["kernel_regularizer"] == c["kernel_regularizer"]);
  K::saving::Config by_name = c;
  by_name["kernel_regularizer"] = "orthogonal_regularizer";
  CHECK(K::saving::get_config(K::saving::from_config(
            "Dense", by_name))["kernel_regularizer"]["config"]["mode"] == "rows");
  K::saving::Config bad = c;
  bad["kernel_regularizer"]["config"]["mode"] = "diagonal";
  require_error([&] { K::saving::from_config("Dense", bad); },
                {"Dense", "kernel_regularizer", "mode=diagonal"});
}
