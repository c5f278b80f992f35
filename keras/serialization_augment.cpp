// Keras configs of the augmentation layers of keras/layers_augment.h (Solarization,
// RandomInvert, RandomPosterization, AutoContrast, RandomSharpness, RandomErasing,
// RandomGaussianBlur, RandomColorDegeneration, Equalization, RandomShear, MixUp, CutMix,
// RandomPerspective, RandomColorJitter, RandomElasticTransform, RandAugment, AugMix,
// ContrastLimitedAdaptiveHistogramEqualization) and of Pipeline: the writer gives Keras 3.15's
// get_config keys (the layers keep their resolved factor ranges, as Keras writes them:
// RandomInvert(0.7) is [0, 0.7]); the readers are strict.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/layers_augment.h"
#include "keras/serialization_access_augment.h"
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {
namespace {

namespace lo = detail::layer_options;
using layers::Factor;

Config augment_get(const Layer& layer) {
  Config out{{"data_format", image_format_name(layer)}};
  TF_CHECK_T(UnimplementedError, lo::augment_config(layer.impl(), out), "get_config",
             "{} is not tapeflow's built-in {} layer, so it has no config writer", who(layer),
             layer.class_name());
  return out;
}

// RandomErasing's fill_value: null (noise), a number, or a list of them.
std::vector<double> fill_value_of(Reader& r) {
  const Config* v = r.find("fill_value");
  if (v == nullptr || v->is_null()) return {};
  if (v->is_number()) return {v->get<double>()};
  return r.numbers("fill_value", *v);
}

// RandomGaussianBlur's kernel_size: an int or a [width, height] pair of equal ints.
int64_t kernel_size_of(Reader& r) {
  const Config* v = r.find("kernel_size");
  if (v == nullptr) return 3;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_array() && v->size() == 2 && (*v)[0].is_number_integer() && (*v)[0] == (*v)[1])
    return (*v)[0].get<int64_t>();
  r.fail("kernel_size",
         "must be an integer or a list of 2 equal integers (tapeflow blurs with a square "
         "kernel), got " +
             r.got(*v));
}

template <const char* kClass>
Layer augment_from(const Config& config) {
  const std::string cls = kClass;
  Reader r(cls, config);
  Base b = read_base(r);
  const bool first = read_channels_first(r);
  return with_image_format(
      make_checked(
          r, b,
          [&]() -> Layer {
            if (cls == "Solarization") {
              const auto vr = value_range_of(r);
              const Factor add = r.has("addition_factor") ? factor_of(r, "addition_factor") : 0.0;
              const Factor thr = r.has("threshold_factor") ? factor_of(r, "threshold_factor") : 0.0;
              return layers::Solarization(add, thr, vr, r.optional_integer("seed"), b.name);
            }
            if (cls == "AutoContrast") return layers::AutoContrast(value_range_of(r), b.name);
            if (cls == "AugMix") {
              const auto vr = value_range_of(r);
              const int64_t chains = r.integer("num_chains", 3);
              const int64_t depth = r.integer("chain_depth", 3);
              const Factor f = r.has("factor") ? factor_of(r, "factor") : 0.3;
              const double alpha = r.number("alpha", 1.0);
              const bool all_ops = r.boolean("all_ops", true);
              const std::string interpolation = r.string("interpolation", "bilinear");
              return layers::AugMix(vr, chains, depth, f, alpha, all_ops, interpolation,
                                    r.optional_integer("seed"), b.name);
            }
            if (cls == "RandAugment") {
              const auto vr = value_range_of(r);
              const int64_t num_ops = r.integer("num_ops", 2);
              const Factor f = r.has("factor") ? factor_of(r, "factor") : 0.5;
              const std::string interpolation = r.string("interpolation", "bilinear");
              return layers::RandAugment(vr, num_ops, f, interpolation, r.optional_integer("seed"),
                                         b.name);
            }
            if (cls == "RandomElasticTransform") {
              const Factor f = r.has("factor") ? factor_of(r, "factor") : 1.0;
              const Factor scale = r.has("scale") ? factor_of(r, "scale") : 1.0;
              const std::string interpolation = r.string("interpolation", "bilinear");
              const std::string fill_mode = r.string("fill_mode", "reflect");
              const double fill_value = r.number("fill_value", 0.0);
              const auto vr = value_range_of(r);
              return layers::RandomElasticTransform(f, scale, interpolation, fill_mode, fill_value,
                                                    vr, r.optional_integer("seed"), b.name);
            }
            if (cls == "ContrastLimitedAdaptiveHistogramEqualization") {
              const auto vr = value_range_of(r);
              const double clip = r.number("clip_limit", 4.0);
              std::pair<int64_t, int64_t> grid{8, 8};
              if (const Config* g = r.find("tile_grid_size"); g != nullptr) {
                const std::vector<double> v = r.numbers("tile_grid_size", *g);
                if (v.size() != 2 || v[0] != std::floor(v[0]) || v[1] != std::floor(v[1]))
                  r.fail("tile_grid_size", "must be a list of 2 integers, got " + r.got(*g));
                grid = {static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1])};
              }
              return layers::ContrastLimitedAdaptiveHistogramEqualization(vr, clip, grid, b.name);
            }
            if (cls == "Equalization") {
              const int64_t bins = r.integer("bins", 256);
              return layers::Equalization(value_range_of(r), bins, b.name);
            }
            if (cls == "MixUp") {
              const double alpha = r.number("alpha", 0.2);
              return layers::MixUp(alpha, r.optional_integer("seed"), b.name);
            }
            if (cls == "CutMix") {
              const Factor f = r.has("factor") ? factor_of(r, "factor") : 1.0;
              return layers::CutMix(f, r.optional_integer("seed"), b.name);
            }
            if (cls == "RandomShear") {
              // Keras writes a single factor f as [-f, f] (and cannot read that back): read as f.
              auto shear = [&](const char* key) {
                if (!r.has(key)) return Factor(0.0);
                const Factor f = factor_of(r, key);
                return !f.single && f.lower == -f.upper ? Factor(f.upper) : f;
              };
              const Factor x = shear("x_factor"), y = shear("y_factor");
              return layers::RandomShear(x, y, transform_of(r, b));
            }
            if (cls == "RandomErasing") {
              const Factor f = r.has("factor") ? factor_of(r, "factor") : 1.0;
              const Factor scale = r.has("scale") ? factor_of(r, "scale") : Factor{0.02, 0.33};
              std::vector<double> fill = fill_value_of(r);
              const auto vr = value_range_of(r);
              return layers::RandomErasing(f, scale, std::move(fill), vr,
                                           r.optional_integer("seed"), b.name);
            }
            if (cls == "RandomGaussianBlur") {
              const Factor f = r.has("factor") ? factor_of(r, "factor") : 1.0;
              const int64_t k = kernel_size_of(r);
              const Factor sigma = r.has("sigma") ? factor_of(r, "sigma") : 1.0;
              const auto vr = value_range_of(r);
              return layers::RandomGaussianBlur(f, k, sigma, vr, r.optional_integer("seed"),
                                                b.name);
            }
            // RandomInvert, RandomPosterization, RandomSharpness, RandomColorDegeneration: factor,
            // value_range, seed (RandomInvert's factor defaults to 1).
            const bool invert = cls == "RandomInvert";
            const Factor f = invert && !r.has("factor") ? Factor(1.0) : factor_of(r, "factor");
            const auto vr = value_range_of(r);
            const auto seed = r.optional_integer("seed");
            if (invert) return layers::RandomInvert(f, vr, seed, b.name);
            if (cls == "RandomPosterization")
              return layers::RandomPosterization(f, vr, seed, b.name);
            if (cls == "RandomSharpness") return layers::RandomSharpness(f, vr, seed, b.name);
            return layers::RandomColorDegeneration(f, vr, seed, b.name);
          }),
      first);
}

// RandomColorJitter: each factor a number, a [lower, upper] pair or null (its layer skipped).
Layer color_jitter_from(const Config& config) {
  Reader r("RandomColorJitter", config);
  Base b = read_base(r);
  const bool first = read_channels_first(r);
  return with_image_format(
      make_checked(r, b,
                   [&]() -> Layer {
                     layers::RandomColorJitterOptions o;
                     o.value_range = value_range_of(r);
                     auto optional_factor = [&](const char* key) -> std::optional<Factor> {
                       const Config* v = r.find(key);
                       if (v == nullptr || v->is_null()) return std::nullopt;
                       return factor_of(r, key);
                     };
                     o.brightness_factor = optional_factor("brightness_factor");
                     o.contrast_factor = optional_factor("contrast_factor");
                     o.saturation_factor = optional_factor("saturation_factor");
                     o.hue_factor = optional_factor("hue_factor");
                     o.seed = r.optional_integer("seed");
                     o.name = b.name;
                     return layers::RandomColorJitter(o);
                   }),
      first);
}

Layer perspective_from(const Config& config) {
  Reader r("RandomPerspective", config);
  Base b = read_base(r);
  const bool first = read_channels_first(r);
  return with_image_format(
      make_checked(r, b,
                   [&]() -> Layer {
                     const Factor f = r.has("factor") ? factor_of(r, "factor") : Factor(1.0);
                     const double scale = r.number("scale", 1.0);
                     const std::string interpolation = r.string("interpolation", "bilinear");
                     const double fill_value = r.number("fill_value", 0.0);
                     return layers::RandomPerspective(f, scale, interpolation, fill_value,
                                                      r.optional_integer("seed"), b.name);
                   }),
      first);
}

// Pipeline: Keras writes its layers and name alone (no trainable or dtype keys).
Config pipeline_get(const Layer& layer) {
  TF_CHECK_T(UnimplementedError, layer.class_name() == "Pipeline", "get_config",
             "{} is not tapeflow's built-in Pipeline layer, so it has no config writer",
             who(layer));
  Config list = Config::array();
  for (const Layer& l : layer.impl().sublayers()) list.push_back(serialize(l));
  return Config{{"layers", list}, {"name", layer.name()}};
}

Layer pipeline_from(const Config& config) {
  Reader r("Pipeline", config);
  const Config& list = r.require("layers");
  if (!list.is_array()) r.fail("layers", "must be a list of layer objects, got " + r.got(list));
  std::vector<Layer> parts;
  for (const Config& item : list) parts.push_back(deserialize(item));
  const std::string name = r.string("name", "");
  r.finish();
  return layers::Pipeline(std::move(parts), name);
}

constexpr char kSolarization[] = "Solarization", kRandomInvert[] = "RandomInvert",
               kRandomPosterization[] = "RandomPosterization", kAutoContrast[] = "AutoContrast",
               kRandomSharpness[] = "RandomSharpness", kRandomErasing[] = "RandomErasing",
               kRandomGaussianBlur[] = "RandomGaussianBlur",
               kRandomColorDegeneration[] = "RandomColorDegeneration",
               kEqualization[] = "Equalization", kRandomShear[] = "RandomShear", kMixUp[] = "MixUp",
               kCutMix[] = "CutMix", kClahe[] = "ContrastLimitedAdaptiveHistogramEqualization",
               kElastic[] = "RandomElasticTransform", kRandAugment[] = "RandAugment",
               kAugMix[] = "AugMix";

}  // namespace

void add_augment_layers(Registry& m) {
  add_builtin(m, kSolarization, augment_get, augment_from<kSolarization>);
  add_builtin(m, kRandomInvert, augment_get, augment_from<kRandomInvert>);
  add_builtin(m, kRandomPosterization, augment_get, augment_from<kRandomPosterization>);
  add_builtin(m, kAutoContrast, augment_get, augment_from<kAutoContrast>);
  add_builtin(m, kRandomSharpness, augment_get, augment_from<kRandomSharpness>);
  add_builtin(m, kRandomErasing, augment_get, augment_from<kRandomErasing>);
  add_builtin(m, kRandomGaussianBlur, augment_get, augment_from<kRandomGaussianBlur>);
  add_builtin(m, kRandomColorDegeneration, augment_get, augment_from<kRandomColorDegeneration>);
  add_builtin(m, kEqualization, augment_get, augment_from<kEqualization>);
  add_builtin(m, kRandomShear, augment_get, augment_from<kRandomShear>);
  add_builtin(m, kMixUp, augment_get, augment_from<kMixUp>);
  add_builtin(m, kCutMix, augment_get, augment_from<kCutMix>);
  add_builtin(m, kClahe, augment_get, augment_from<kClahe>);
  add_builtin(m, kElastic, augment_get, augment_from<kElastic>);
  add_builtin(m, kRandAugment, augment_get, augment_from<kRandAugment>);
  add_builtin(m, kAugMix, augment_get, augment_from<kAugMix>);
  add_builtin(m, "RandomColorJitter", augment_get, color_jitter_from);
  add_builtin(m, "RandomPerspective", augment_get, perspective_from);
  add_builtin(m, "Pipeline", pipeline_get, pipeline_from);
}

}  // namespace tapeflow::keras::saving::internal
