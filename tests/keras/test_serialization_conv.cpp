// Whole-model serialization of the convolution, pooling, padding, cropping, upsampling,
// activation, noise and normalization layers (keras/serialization_conv.cpp): get_config is
// Keras 3.15's, Keras' JSON loads and predicts as Keras, save_model / load_model round trip,
// and bad configs name the class and the key. The JSON literals and predictions come from Keras
// 3.15 (the calls named above each); the weights are set in both to the same formula
// (set_formula_weights), the inputs are cos(0.1 * arange(n)) reshaped.
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "keras/functional.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/layers_conv.h"
#include "keras/layers_conv3d.h"
#include "keras/layers_extra.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/regularizers.h"
#include "keras/safetensors.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "serialization_testing.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
namespace I = tapeflow::keras::initializers;
namespace Rg = tapeflow::keras::regularizers;
using K::Size2;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::cos_input;
using tf::testing::KerasModel;
using tf::testing::layers_by_name;
using tf::testing::set_formula_weights;
using tf::testing::TempDir;

namespace {

// Model E (Keras 3.15): keras.Sequential([keras.Input((8, 3)), Conv1D(4, 3, padding="causal",
// dilation_rate=2, activation="relu", name="c1"), SeparableConv1D(4, 3, depth_multiplier=2,
// padding="same", name="sc1"), DepthwiseConv1D(2, name="dc1"), Conv1DTranspose(3, 3, strides=2,
// padding="same", name="ct1"), ZeroPadding1D((1, 2), name="zp1"), Cropping1D((2, 1),
// name="cr1"), UpSampling1D(2, name="up1"), MaxPooling1D(2, name="mp1"), AveragePooling1D(3,
// strides=2, padding="same", name="ap1"), LeakyReLU(0.2, name="lr"), PReLU(shared_axes=[1],
// name="pr"), SpatialDropout1D(0.3, name="sd1"), GaussianNoise(0.2, seed=4, name="gn"),
// Permute((2, 1), name="perm"), GlobalAveragePooling1D(name="gap"), RepeatVector(2, name="rv"),
// Rescaling(0.5, offset=0.25, name="resc"), UnitNormalization(name="un"),
// GlobalMaxPooling1D(keepdims=True, name="gmp")], name="seq_e"): kEJson is its to_json(),
// kEPred its predict(cos_input({2, 8, 3})) with the formula weights.
const char* const kEJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_e", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "layers": [{"module": "keras.layers", "class_name":
"InputLayer", "config": {"batch_shape": [null, 8, 3], "dtype": "float32", "sparse": false,
"ragged": false, "name": "input_layer", "optional": false}, "registered_name": null},
{"module": "keras.layers", "class_name": "Conv1D", "config": {"name": "c1", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "filters": 4, "kernel_size": [3], "strides": [1],
"padding": "causal", "data_format": "channels_last", "dilation_rate": [2], "groups": 1,
"activation": "relu", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null,
"build_config": {"input_shape": [null, 8, 3]}}, {"module": "keras.layers", "class_name":
"SeparableConv1D", "config": {"name": "sc1", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"depth_multiplier": 2, "filters": 4, "kernel_size": [3], "strides": [1], "padding": "same",
"data_format": "channels_last", "dilation_rate": [1], "activation": "linear", "use_bias":
true, "depthwise_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "pointwise_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null}, "depthwise_regularizer":
null, "pointwise_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"depthwise_constraint": null, "pointwise_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 8, 4]}}, {"module":
"keras.layers", "class_name": "DepthwiseConv1D", "config": {"name": "dc1", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "depth_multiplier": 1, "kernel_size": [2], "strides":
[1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1], "activation":
"linear", "use_bias": true, "depthwise_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null}, "depthwise_regularizer":
null, "bias_regularizer": null, "activity_regularizer": null, "depthwise_constraint": null,
"bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 8,
4]}}, {"module": "keras.layers", "class_name": "Conv1DTranspose", "config": {"name": "ct1",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "filters": 3, "kernel_size": [3], "strides":
[2], "padding": "same", "output_padding": null, "data_format": "channels_last",
"dilation_rate": [1], "activation": "linear", "use_bias": true, "kernel_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name":
null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null,
"build_config": {"input_shape": [null, 7, 4]}}, {"module": "keras.layers", "class_name":
"ZeroPadding1D", "config": {"name": "zp1", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"padding": [1, 2], "data_format": "channels_last"}, "registered_name": null, "build_config":
{"input_shape": [null, 14, 3]}}, {"module": "keras.layers", "class_name": "Cropping1D",
"config": {"name": "cr1", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "cropping": [2, 1]},
"registered_name": null, "build_config": {"input_shape": [null, 17, 3]}}, {"module":
"keras.layers", "class_name": "UpSampling1D", "config": {"name": "up1", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "size": 2}, "registered_name": null, "build_config":
{"input_shape": [null, 14, 3]}}, {"module": "keras.layers", "class_name": "MaxPooling1D",
"config": {"name": "mp1", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "pool_size": [2],
"padding": "valid", "strides": [2], "data_format": "channels_last"}, "registered_name":
null}, {"module": "keras.layers", "class_name": "AveragePooling1D", "config": {"name":
"ap1", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "pool_size": [3], "padding":
"same", "strides": [2], "data_format": "channels_last"}, "registered_name": null},
{"module": "keras.layers", "class_name": "LeakyReLU", "config": {"name": "lr", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "negative_slope": 0.2}, "registered_name": null},
{"module": "keras.layers", "class_name": "PReLU", "config": {"name": "pr", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "alpha_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null}, "alpha_regularizer": null,
"alpha_constraint": null, "shared_axes": [1]}, "registered_name": null, "build_config":
{"input_shape": [null, 7, 3]}}, {"module": "keras.layers", "class_name": "SpatialDropout1D",
"config": {"rate": 0.3, "seed": null, "name": "sd1", "dtype": "float32"}, "registered_name":
null}, {"module": "keras.layers", "class_name": "GaussianNoise", "config": {"name": "gn",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "stddev": 0.2, "seed": 4}, "registered_name":
null}, {"module": "keras.layers", "class_name": "Permute", "config": {"name": "perm",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "dims": [2, 1]}, "registered_name": null,
"build_config": {"input_shape": [null, 7, 3]}}, {"module": "keras.layers", "class_name":
"GlobalAveragePooling1D", "config": {"name": "gap", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "data_format": "channels_last", "keepdims": false}, "registered_name": null},
{"module": "keras.layers", "class_name": "RepeatVector", "config": {"name": "rv",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "n": 2}, "registered_name": null,
"build_config": {"input_shape": [null, 7]}}, {"module": "keras.layers", "class_name":
"Rescaling", "config": {"name": "resc", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"scale": 0.5, "offset": 0.25}, "registered_name": null, "build_config": {"input_shape":
[null, 2, 7]}}, {"module": "keras.layers", "class_name": "UnitNormalization", "config":
{"name": "un", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "axis": -1}, "registered_name":
null}, {"module": "keras.layers", "class_name": "GlobalMaxPooling1D", "config": {"name":
"gmp", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"keepdims": true}, "registered_name": null}], "build_input_shape": [null, 8, 3]},
"registered_name": null, "build_config": {"input_shape": [null, 8, 3]}, "compile_config":
{}})json";
const std::vector<double> kEPred = {0.3781982362270355,  0.37851446866989136, 0.37902402877807617,
                                    0.3795161247253418,  0.37954217195510864, 0.3797769546508789,
                                    0.3711041510105133,  0.3789203464984894,  0.37951594591140747,
                                    0.37926962971687317, 0.37877973914146423, 0.378645658493042,
                                    0.3781948983669281,  0.37237560749053955};
// Its weights ([w.path, w.shape] in Keras): c1 kernel (3, 3, 4), bias (4); sc1
// depthwise_kernel (3, 4, 2), pointwise_kernel (1, 8, 4), bias (4); dc1 kernel (2, 4, 1), bias
// (4); ct1 kernel (3, 3, 4), bias (3); pr alpha (1, 3).
const std::vector<std::vector<int64_t>> kEShapes = {{3, 3, 4}, {4}, {3, 4, 2}, {1, 8, 4}, {4},
                                                    {2, 4, 1}, {4}, {3, 3, 4}, {3},       {1, 3}};

// Model F (Keras 3.15): x = Input((5, 5, 2), name="img"); t = Conv2DTranspose(3, 3, strides=2,
// padding="same", output_padding=1, activation="tanh", name="t2")(x); d = DepthwiseConv2D(3,
// depth_multiplier=2, strides=2, name="dw2")(t); s = SeparableConv2D(4, (3, 2), padding="same",
// name="sep2")(d); g = GroupNormalization(2, name="gnorm")(s); z = ZeroPadding2D(((1, 0), (0,
// 1)), name="zp2")(g); c = Cropping2D(((1, 1), (0, 2)), name="cr2")(z); u = UpSampling2D((1, 2),
// name="up2")(c); sd = SpatialDropout2D(0.2, name="sd2")(u); el = ELU(0.7, name="elu")(sd);
// c2 = Conv2D(2, 1, groups=2, name="grp")(el); a = GlobalMaxPooling2D(name="gmax2")(c2);
// b = GlobalAveragePooling2D(name="gavg2")(el); gd = GaussianDropout(0.1, name="gd")(b);
// ad = AlphaDropout(0.1, name="ad")(gd); ar = ActivityRegularization(l1=0.01, name="areg")(ad);
// rms = RMSNormalization(epsilon=1e-5, name="rms")(ar); cat = Concatenate(name="cat")([a, rms]);
// keras.Model(x, cat, name="fun_f"), predicted on cos_input({2, 5, 5, 2}).
const char* const kFJson = R"json(
{"module": "keras.src.models.functional", "class_name": "Functional", "config": {"name":
"fun_f", "trainable": true, "layers": [{"module": "keras.layers", "class_name":
"InputLayer", "config": {"batch_shape": [null, 5, 5, 2], "dtype": "float32", "sparse":
false, "ragged": false, "name": "img", "optional": false}, "registered_name": null, "name":
"img", "inbound_nodes": []}, {"module": "keras.layers", "class_name": "Conv2DTranspose",
"config": {"name": "t2", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters": 3,
"kernel_size": [3, 3], "strides": [2, 2], "padding": "same", "output_padding": [1, 1],
"data_format": "channels_last", "dilation_rate": [1, 1], "activation": "tanh", "use_bias":
true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 5, 5, 2]}, "name": "t2",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 5,
5, 2], "dtype": "float32", "keras_history": ["img", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "DepthwiseConv2D", "config": {"name": "dw2", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "depth_multiplier": 2, "kernel_size": [3, 3],
"strides": [2, 2], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1,
1], "activation": "linear", "use_bias": true, "depthwise_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"depthwise_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"depthwise_constraint": null, "bias_constraint": null}, "registered_name": null,
"build_config": {"input_shape": [null, 10, 10, 3]}, "name": "dw2", "inbound_nodes":
[{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 10, 10, 3],
"dtype": "float32", "keras_history": ["t2", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "SeparableConv2D", "config": {"name": "sep2", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "depth_multiplier": 1, "filters": 4, "kernel_size":
[3, 2], "strides": [1, 1], "padding": "same", "data_format": "channels_last",
"dilation_rate": [1, 1], "activation": "linear", "use_bias": true, "depthwise_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "pointwise_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name":
null}, "depthwise_regularizer": null, "pointwise_regularizer": null, "bias_regularizer":
null, "activity_regularizer": null, "depthwise_constraint": null, "pointwise_constraint":
null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape":
[null, 4, 4, 6]}, "name": "sep2", "inbound_nodes": [{"args": [{"class_name":
"__keras_tensor__", "config": {"shape": [null, 4, 4, 6], "dtype": "float32",
"keras_history": ["dw2", 0, 0]}}], "kwargs": {}}]}, {"module": "keras.layers", "class_name":
"GroupNormalization", "config": {"name": "gnorm", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "groups": 2, "axis": -1, "epsilon": 0.001, "center": true, "scale": true,
"beta_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "gamma_initializer": {"module": "keras.initializers",
"class_name": "Ones", "config": {}, "registered_name": null}, "beta_regularizer": null,
"gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 4, 4, 4]}, "name": "gnorm",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4,
4, 4], "dtype": "float32", "keras_history": ["sep2", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "ZeroPadding2D", "config": {"name": "zp2", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "padding": [[1, 0], [0, 1]], "data_format": "channels_last"},
"registered_name": null, "build_config": {"input_shape": [null, 4, 4, 4]}, "name": "zp2",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4,
4, 4], "dtype": "float32", "keras_history": ["gnorm", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "Cropping2D", "config": {"name": "cr2", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "cropping": [[1, 1], [0, 2]], "data_format": "channels_last"},
"registered_name": null, "build_config": {"input_shape": [null, 5, 5, 4]}, "name": "cr2",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 5,
5, 4], "dtype": "float32", "keras_history": ["zp2", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "UpSampling2D", "config": {"name": "up2", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "size": [1, 2], "data_format": "channels_last", "interpolation":
"nearest"}, "registered_name": null, "build_config": {"input_shape": [null, 3, 3, 4]},
"name": "up2", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config":
{"shape": [null, 3, 3, 4], "dtype": "float32", "keras_history": ["cr2", 0, 0]}}], "kwargs":
{}}]}, {"module": "keras.layers", "class_name": "SpatialDropout2D", "config": {"rate": 0.2,
"seed": null, "name": "sd2", "dtype": "float32", "data_format": "channels_last"},
"registered_name": null, "name": "sd2", "inbound_nodes": [{"args": [{"class_name":
"__keras_tensor__", "config": {"shape": [null, 3, 6, 4], "dtype": "float32",
"keras_history": ["up2", 0, 0]}}], "kwargs": {"training": false}}]}, {"module":
"keras.layers", "class_name": "ELU", "config": {"name": "elu", "alpha": 0.7, "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}}, "registered_name": null, "name": "elu",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 3,
6, 4], "dtype": "float32", "keras_history": ["sd2", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "GlobalAveragePooling2D", "config": {"name": "gavg2",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "keepdims":
false}, "registered_name": null, "name": "gavg2", "inbound_nodes": [{"args": [{"class_name":
"__keras_tensor__", "config": {"shape": [null, 3, 6, 4], "dtype": "float32",
"keras_history": ["elu", 0, 0]}}], "kwargs": {}}]}, {"module": "keras.layers", "class_name":
"GaussianDropout", "config": {"name": "gd", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"rate": 0.1, "seed": null}, "registered_name": null, "name": "gd", "inbound_nodes":
[{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4], "dtype":
"float32", "keras_history": ["gavg2", 0, 0]}}], "kwargs": {"training": false}}]}, {"module":
"keras.layers", "class_name": "AlphaDropout", "config": {"name": "ad", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "rate": 0.1, "seed": null, "noise_shape": null},
"registered_name": null, "name": "ad", "inbound_nodes": [{"args": [{"class_name":
"__keras_tensor__", "config": {"shape": [null, 4], "dtype": "float32", "keras_history":
["gd", 0, 0]}}], "kwargs": {"training": false}}]}, {"module": "keras.layers", "class_name":
"Conv2D", "config": {"name": "grp", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"filters": 2, "kernel_size": [1, 1], "strides": [1, 1], "padding": "valid", "data_format":
"channels_last", "dilation_rate": [1, 1], "groups": 2, "activation": "linear", "use_bias":
true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 3, 6, 4]}, "name": "grp",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 3,
6, 4], "dtype": "float32", "keras_history": ["elu", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "ActivityRegularization", "config": {"name": "areg",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "l1": 0.01, "l2": 0.0}, "registered_name":
null, "name": "areg", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 4], "dtype": "float32", "keras_history": ["ad", 0, 0]}}],
"kwargs": {}}]}, {"module": "keras.layers", "class_name": "GlobalMaxPooling2D", "config":
{"name": "gmax2", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format":
"channels_last", "keepdims": false}, "registered_name": null, "name": "gmax2",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 3,
6, 2], "dtype": "float32", "keras_history": ["grp", 0, 0]}}], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "RMSNormalization", "config": {"name": "rms", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "axis": [-1], "epsilon": 1e-05}, "registered_name":
null, "build_config": {"input_shape": [null, 4]}, "name": "rms", "inbound_nodes": [{"args":
[{"class_name": "__keras_tensor__", "config": {"shape": [null, 4], "dtype": "float32",
"keras_history": ["areg", 0, 0]}}], "kwargs": {}}]}, {"module": "keras.layers",
"class_name": "Concatenate", "config": {"name": "cat", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "axis": -1}, "registered_name": null, "build_config":
{"input_shape": [[null, 2], [null, 4]]}, "name": "cat", "inbound_nodes": [{"args":
[[{"class_name": "__keras_tensor__", "config": {"shape": [null, 2], "dtype": "float32",
"keras_history": ["gmax2", 0, 0]}}, {"class_name": "__keras_tensor__", "config": {"shape":
[null, 4], "dtype": "float32", "keras_history": ["rms", 0, 0]}}]], "kwargs": {}}]}],
"input_layers": ["img", 0, 0], "output_layers": ["cat", 0, 0]}, "registered_name":
"Functional", "build_config": {"input_shape": null}, "compile_config": {}})json";
const std::vector<double> kFPred = {
    0.34082111716270447,  0.411718487739563,    -0.5318995714187622, -0.49392837285995483,
    -0.3371524214744568,  -0.08516271412372589, 0.3489453196525574,  0.4055957794189453,
    -0.45045530796051025, -0.467637836933136,   -0.3547246754169464, -0.12058888375759125};
// Keras: t2 kernel (3, 3, 3, 2), bias (3); dw2 kernel (3, 3, 3, 2), bias (6); sep2
// depthwise_kernel (3, 2, 6, 1), pointwise_kernel (1, 1, 6, 4), bias (4); gnorm gamma (4), beta
// (4); grp kernel (1, 1, 2, 2), bias (2); rms scale (4).
const std::vector<std::vector<int64_t>> kFShapes = {{3, 3, 3, 2}, {3},          {3, 3, 3, 2}, {6},
                                                    {3, 2, 6, 1}, {1, 1, 6, 4}, {4},          {4},
                                                    {4},          {1, 1, 2, 2}, {2},          {4}};

// Model G (Keras 3.15): keras.Sequential([keras.Input((4, 4, 4, 2)), Conv3D(3, 2,
// padding="same", activation="relu", name="c3"), Conv3DTranspose(2, 2, strides=2, name="t3"),
// MaxPooling3D(2, name="mp3"), AveragePooling3D(2, strides=1, padding="same", name="ap3"),
// ZeroPadding3D(1, name="zp3"), Cropping3D(((1, 0), (0, 1), (1, 1)), name="cr3"),
// UpSampling3D((1, 2, 1), name="up3"), GlobalAveragePooling3D(name="gap3")], name="seq_g"),
// predicted on cos_input({2, 4, 4, 4, 2}).
const char* const kGJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_g", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "layers": [{"module": "keras.layers", "class_name":
"InputLayer", "config": {"batch_shape": [null, 4, 4, 4, 2], "dtype": "float32", "sparse":
false, "ragged": false, "name": "input_layer_1", "optional": false}, "registered_name":
null}, {"module": "keras.layers", "class_name": "Conv3D", "config": {"name": "c3",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "filters": 3, "kernel_size": [2, 2, 2],
"strides": [1, 1, 1], "padding": "same", "data_format": "channels_last", "dilation_rate":
[1, 1, 1], "groups": 1, "activation": "relu", "use_bias": true, "kernel_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name":
null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null,
"build_config": {"input_shape": [null, 4, 4, 4, 2]}}, {"module": "keras.layers",
"class_name": "Conv3DTranspose", "config": {"name": "t3", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "filters": 2, "kernel_size": [2, 2, 2], "strides": [2, 2, 2],
"padding": "valid", "output_padding": null, "data_format": "channels_last", "dilation_rate":
[1, 1, 1], "activation": "linear", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null,
"build_config": {"input_shape": [null, 4, 4, 4, 3]}}, {"module": "keras.layers",
"class_name": "MaxPooling3D", "config": {"name": "mp3", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "pool_size": [2, 2, 2], "padding": "valid", "strides": [2, 2, 2],
"data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers",
"class_name": "AveragePooling3D", "config": {"name": "ap3", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "pool_size": [2, 2, 2], "padding": "same", "strides": [1, 1, 1],
"data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers",
"class_name": "ZeroPadding3D", "config": {"name": "zp3", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "padding": [[1, 1], [1, 1], [1, 1]], "data_format":
"channels_last"}, "registered_name": null, "build_config": {"input_shape": [null, 4, 4, 4,
2]}}, {"module": "keras.layers", "class_name": "Cropping3D", "config": {"name": "cr3",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "cropping": [[1, 0], [0, 1], [1, 1]],
"data_format": "channels_last"}, "registered_name": null, "build_config": {"input_shape":
[null, 6, 6, 6, 2]}}, {"module": "keras.layers", "class_name": "UpSampling3D", "config":
{"name": "up3", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "size": [1, 2, 1], "data_format":
"channels_last"}, "registered_name": null, "build_config": {"input_shape": [null, 5, 5, 4,
2]}}, {"module": "keras.layers", "class_name": "GlobalAveragePooling3D", "config": {"name":
"gap3", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"keepdims": false}, "registered_name": null}], "build_input_shape": [null, 4, 4, 4, 2]},
"registered_name": null, "build_config": {"input_shape": [null, 4, 4, 4, 2]},
"compile_config": {}})json";
const std::vector<double> kGPred = {0.3859716057777405, 0.19301557540893555, 0.40208733081817627,
                                    0.20580893754959106};
// Keras: c3 kernel (2, 2, 2, 2, 3), bias (3); t3 kernel (2, 2, 2, 2, 3), bias (2).
const std::vector<std::vector<int64_t>> kGShapes = {{2, 2, 2, 2, 3}, {3}, {2, 2, 2, 2, 3}, {2}};

// Model H (Keras 3.15): x3 = Input((3, 3, 3, 2), name="vol"); keras.Model(x3,
// GlobalMaxPooling3D(keepdims=True, name="gmp3")(x3), name="fun_h"), predicted on
// cos_input({2, 3, 3, 3, 2}).
const char* const kHJson = R"json(
{"module": "keras.src.models.functional", "class_name": "Functional", "config": {"name":
"fun_h", "trainable": true, "layers": [{"module": "keras.layers", "class_name":
"InputLayer", "config": {"batch_shape": [null, 3, 3, 3, 2], "dtype": "float32", "sparse":
false, "ragged": false, "name": "vol", "optional": false}, "registered_name": null, "name":
"vol", "inbound_nodes": []}, {"module": "keras.layers", "class_name": "GlobalMaxPooling3D",
"config": {"name": "gmp3", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format":
"channels_last", "keepdims": true}, "registered_name": null, "name": "gmp3",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 3,
3, 3, 2], "dtype": "float32", "keras_history": ["vol", 0, 0]}}], "kwargs": {}}]}],
"input_layers": ["vol", 0, 0], "output_layers": ["gmp3", 0, 0]}, "registered_name":
"Functional", "build_config": {"input_shape": null}, "compile_config": {}})json";
const std::vector<double> kHPred = {1.0, 0.9950041770935059, 0.9965420961380005,
                                    0.9998586177825928};

const std::vector<std::vector<int64_t>> kNoShapes;
std::vector<KerasModel> keras_models() {
  return {{"E", kEJson, {2, 8, 3}, &kEPred, &kEShapes},
          {"F", kFJson, {2, 5, 5, 2}, &kFPred, &kFShapes},
          {"G", kGJson, {2, 4, 4, 4, 2}, &kGPred, &kGShapes},
          {"H", kHJson, {2, 3, 3, 3, 2}, &kHPred, &kNoShapes}};
}

struct ConfigCase {
  const char* class_name;
  K::Layer layer;
  const char* keras;  // Keras' get_config(), json.dumps
};

// A non-default configuration of each class, built in tapeflow, and Keras' get_config() of the
// same layer (keras.layers.X(...) as commented; I = keras.initializers, R = keras.regularizers).
std::vector<ConfigCase> config_cases() {
  return {
      // Conv1D(4, 3, strides=2, padding="same", activation="relu", use_bias=False,
      // kernel_initializer=I.HeNormal(seed=1), name="c").get_config()
      {"Conv1D",
       L::Conv1D(4, 3,
                 {.strides = 2,
                  .padding = "same",
                  .activation = "relu",
                  .use_bias = false,
                  .kernel_initializer = I::HeNormal(1),
                  .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 4, "kernel_size": [3],
"strides": [2], "padding": "same", "data_format": "channels_last", "dilation_rate": [1],
"groups": 1, "activation": "relu", "use_bias": false, "kernel_initializer": {"module":
"keras.initializers", "class_name": "HeNormal", "config": {"seed": 1, "input_axes": null,
"output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null})json"},
      // Conv1D(6, 2, padding="causal", dilation_rate=2, groups=3, bias_regularizer=R.L2(0.01),
      // name="c").get_config()
      {"Conv1D",
       L::Conv1D(6, 2,
                 {.padding = "causal",
                  .dilation_rate = 2,
                  .groups = 3,
                  .bias_regularizer = Rg::L2(0.01),
                  .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 6, "kernel_size": [2],
"strides": [1], "padding": "causal", "data_format": "channels_last", "dilation_rate": [2],
"groups": 3, "activation": "linear", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name":
null}, "kernel_regularizer": null, "bias_regularizer": {"module": "keras.regularizers",
"class_name": "L2", "config": {"l2": 0.01}, "registered_name": null},
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null})json"},
      // Conv2D(4, (3, 2), strides=(2, 1), padding="same", dilation_rate=1, groups=2,
      // activation="tanh", name="c").get_config()
      {"Conv2D",
       L::Conv2D(
           4, {3, 2},
           {.strides = {2, 1}, .padding = "same", .groups = 2, .activation = "tanh", .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 4, "kernel_size": [3,
2], "strides": [2, 1], "padding": "same", "data_format": "channels_last", "dilation_rate":
[1, 1], "groups": 2, "activation": "tanh", "use_bias": true, "kernel_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name":
null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null})json"},
      // Conv2DTranspose(3, (3, 2), strides=2, padding="same", output_padding=1,
      // activation="sigmoid", bias_initializer=I.Constant(0.5), name="c").get_config()
      {"Conv2DTranspose",
       L::Conv2DTranspose(3, {3, 2},
                          {.strides = 2,
                           .padding = "same",
                           .output_padding = Size2(1),
                           .activation = "sigmoid",
                           .bias_initializer = I::Constant(0.5),
                           .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 3, "kernel_size": [3,
2], "strides": [2, 2], "padding": "same", "output_padding": [1, 1], "data_format":
"channels_last", "dilation_rate": [1, 1], "activation": "sigmoid", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name":
null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Constant",
"config": {"value": 0.5}, "registered_name": null}, "kernel_regularizer": null,
"bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
"bias_constraint": null})json"},
      // Conv1DTranspose(3, 4, strides=1, dilation_rate=2, kernel_regularizer=R.L1(0.001),
      // name="c").get_config()
      {"Conv1DTranspose",
       L::Conv1DTranspose(3, 4,
                          {.dilation_rate = 2, .kernel_regularizer = Rg::L1(0.001), .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 3, "kernel_size": [4],
"strides": [1], "padding": "valid", "output_padding": null, "data_format":
"channels_last", "dilation_rate": [2], "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name":
null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros",
"config": {}, "registered_name": null}, "kernel_regularizer": {"module":
"keras.regularizers", "class_name": "L1", "config": {"l1": 0.0010000000474974513},
"registered_name": null}, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null})json"},
      // DepthwiseConv2D((3, 2), strides=(1, 2), padding="same", depth_multiplier=3, use_bias=False,
      // depthwise_initializer=I.RandomNormal(0.0, 0.1, seed=2), name="c").get_config()
      {"DepthwiseConv2D",
       L::DepthwiseConv2D({3, 2}, {.strides = {1, 2},
                                   .padding = "same",
                                   .depth_multiplier = 3,
                                   .use_bias = false,
                                   .depthwise_initializer = I::RandomNormal(0.0, 0.1, 2),
                                   .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "depth_multiplier": 3,
"kernel_size": [3, 2], "strides": [1, 2], "padding": "same", "data_format":
"channels_last", "dilation_rate": [1, 1], "activation": "linear", "use_bias": false,
"depthwise_initializer": {"module": "keras.initializers", "class_name": "RandomNormal",
"config": {"seed": 2, "mean": 0.0, "stddev": 0.1}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "depthwise_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "depthwise_constraint": null, "bias_constraint": null})json"},
      // SeparableConv2D(5, 3, dilation_rate=2, depth_multiplier=2, activation="relu",
      // pointwise_initializer=I.Ones(), pointwise_regularizer=R.L2(0.02), name="c").get_config()
      {"SeparableConv2D",
       L::SeparableConv2D(5, 3,
                          {.dilation_rate = 2,
                           .depth_multiplier = 2,
                           .activation = "relu",
                           .pointwise_initializer = I::Ones(),
                           .pointwise_regularizer = Rg::L2(0.02),
                           .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "depth_multiplier": 2, "filters":
5, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid", "data_format":
"channels_last", "dilation_rate": [2, 2], "activation": "relu", "use_bias": true,
"depthwise_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name":
null}, "pointwise_initializer": {"module": "keras.initializers", "class_name": "Ones",
"config": {}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"depthwise_regularizer": null, "pointwise_regularizer": {"module": "keras.regularizers",
"class_name": "L2", "config": {"l2": 0.02}, "registered_name": null}, "bias_regularizer":
null, "activity_regularizer": null, "depthwise_constraint": null, "pointwise_constraint":
null, "bias_constraint": null})json"},
      // DepthwiseConv1D(3, strides=2, padding="same", depth_multiplier=2,
      // depthwise_regularizer=R.L1L2(0.001, 0.002), name="c").get_config()
      {"DepthwiseConv1D",
       L::DepthwiseConv1D(3, {.strides = 2,
                              .padding = "same",
                              .depth_multiplier = 2,
                              .depthwise_regularizer = Rg::L1L2(0.001, 0.002),
                              .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "depth_multiplier": 2,
"kernel_size": [3], "strides": [2], "padding": "same", "data_format": "channels_last",
"dilation_rate": [1], "activation": "linear", "use_bias": true, "depthwise_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name":
null}, "depthwise_regularizer": {"module": "keras.regularizers", "class_name": "L1L2",
"config": {"l1": 0.001, "l2": 0.002}, "registered_name": null}, "bias_regularizer": null,
"activity_regularizer": null, "depthwise_constraint": null, "bias_constraint": null})json"},
      // SeparableConv1D(4, 2, strides=2, depth_multiplier=3, use_bias=False,
      // depthwise_initializer=I.GlorotNormal(seed=5), name="c").get_config()
      {"SeparableConv1D",
       L::SeparableConv1D(4, 2,
                          {.strides = 2,
                           .depth_multiplier = 3,
                           .use_bias = false,
                           .depthwise_initializer = I::GlorotNormal(5),
                           .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "depth_multiplier": 3, "filters":
4, "kernel_size": [2], "strides": [2], "padding": "valid", "data_format": "channels_last",
"dilation_rate": [1], "activation": "linear", "use_bias": false, "depthwise_initializer":
{"module": "keras.initializers", "class_name": "GlorotNormal", "config": {"seed": 5,
"input_axes": null, "output_axes": null}, "registered_name": null},
"pointwise_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name":
null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros",
"config": {}, "registered_name": null}, "depthwise_regularizer": null,
"pointwise_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"depthwise_constraint": null, "pointwise_constraint": null, "bias_constraint": null})json"},
      // MaxPooling1D(3, strides=1, padding="same", name="p").get_config()
      {"MaxPooling1D", L::MaxPooling1D(3, 1, "same", "p"),
       R"json(
{"name": "p", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "pool_size": [3], "padding":
"same", "strides": [1], "data_format": "channels_last"})json"},
      // AveragePooling1D(2, name="p").get_config()
      {"AveragePooling1D", L::AveragePooling1D(2, std::nullopt, "valid", "p"),
       R"json(
{"name": "p", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "pool_size": [2], "padding":
"valid", "strides": [2], "data_format": "channels_last"})json"},
      // GlobalAveragePooling1D(keepdims=True, name="g").get_config()
      {"GlobalAveragePooling1D",
       L::GlobalAveragePooling1D(L::GlobalPoolingOptions{.keepdims = true, .name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"keepdims": true})json"},
      // GlobalMaxPooling1D(data_format="channels_first", name="g").get_config()
      {"GlobalMaxPooling1D",
       L::GlobalMaxPooling1D(L::GlobalPoolingOptions{.data_format = "channels_first", .name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_first",
"keepdims": false})json"},
      // GlobalAveragePooling2D(name="g").get_config()
      {"GlobalAveragePooling2D", L::GlobalAveragePooling2D(L::GlobalPoolingOptions{.name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"keepdims": false})json"},
      // GlobalMaxPooling2D(keepdims=True, name="g").get_config()
      {"GlobalMaxPooling2D",
       L::GlobalMaxPooling2D(L::GlobalPoolingOptions{.keepdims = true, .name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"keepdims": true})json"},
      // UpSampling1D(3, name="u").get_config()
      {"UpSampling1D", L::UpSampling1D(3, "u"),
       R"json(
{"name": "u", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "size": 3})json"},
      // UpSampling2D((2, 3), name="u").get_config()
      {"UpSampling2D", L::UpSampling2D({2, 3}, "nearest", "u"),
       R"json(
{"name": "u", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "size": [2, 3], "data_format":
"channels_last", "interpolation": "nearest"})json"},
      // ZeroPadding1D((1, 2), name="z").get_config()
      {"ZeroPadding1D", L::ZeroPadding1D({1, 2}, "z"),
       R"json(
{"name": "z", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "padding": [1, 2], "data_format":
"channels_last"})json"},
      // ZeroPadding2D(((1, 2), (0, 3)), name="z").get_config()
      {"ZeroPadding2D", L::ZeroPadding2D(L::Sides2D({1, 2}, {0, 3}), "z"),
       R"json(
{"name": "z", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "padding": [[1, 2], [0, 3]],
"data_format": "channels_last"})json"},
      // Cropping1D((0, 2), name="z").get_config()
      {"Cropping1D", L::Cropping1D({0, 2}, "z"),
       R"json(
{"name": "z", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "cropping": [0, 2]})json"},
      // Cropping2D((1, 2), name="z").get_config()
      {"Cropping2D", L::Cropping2D(L::Sides2D(1, 2), "z"),
       R"json(
{"name": "z", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "cropping": [[1, 1], [2, 2]],
"data_format": "channels_last"})json"},
      // Permute((3, 1, 2), name="p").get_config()
      {"Permute", L::Permute({3, 1, 2}, "p"),
       R"json(
{"name": "p", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "dims": [3, 1, 2]})json"},
      // RepeatVector(4, name="r").get_config()
      {"RepeatVector", L::RepeatVector(4, "r"),
       R"json(
{"name": "r", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "n": 4})json"},
      // Rescaling(0.25, offset=-1.0, name="r").get_config()
      {"Rescaling", L::Rescaling(0.25, -1.0, "r"),
       R"json(
{"name": "r", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "scale": 0.25, "offset": -1.0})json"},
      // LeakyReLU(negative_slope=0.1, name="l").get_config()
      {"LeakyReLU", L::LeakyReLU(0.1, "l"),
       R"json(
{"name": "l", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "negative_slope": 0.1})json"},
      // ELU(alpha=0.5, name="e").get_config()
      {"ELU", L::ELU(0.5, "e"),
       R"json(
{"name": "e", "alpha": 0.5, "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}})json"},
      // PReLU(alpha_initializer=I.Constant(0.25), alpha_regularizer=R.L2(0.001), shared_axes=[1,
      // 2],
      // name="p").get_config()
      {"PReLU",
       L::PReLU({.alpha_initializer = I::Constant(0.25),
                 .alpha_regularizer = Rg::L2(0.001),
                 .shared_axes = {1, 2},
                 .name = "p"}),
       R"json(
{"name": "p", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "alpha_initializer": {"module":
"keras.initializers", "class_name": "Constant", "config": {"value": 0.25},
"registered_name": null}, "alpha_regularizer": {"module": "keras.regularizers",
"class_name": "L2", "config": {"l2": 0.001}, "registered_name": null}, "alpha_constraint":
null, "shared_axes": [1, 2]})json"},
      // SpatialDropout1D(0.3, seed=7, name="s").get_config()
      {"SpatialDropout1D", L::SpatialDropout1D(0.3, 7, "s"),
       R"json(
{"rate": 0.3, "seed": 7, "name": "s", "dtype": "float32"})json"},
      // SpatialDropout2D(0.4, name="s").get_config()
      {"SpatialDropout2D", L::SpatialDropout2D(0.4, std::nullopt, "s"),
       R"json(
{"rate": 0.4, "seed": null, "name": "s", "dtype": "float32", "data_format":
"channels_last"})json"},
      // SpatialDropout3D(0.25, seed=2, name="s").get_config()
      {"SpatialDropout3D", L::SpatialDropout3D(0.25, 2, "s"),
       R"json(
{"rate": 0.25, "seed": 2, "name": "s", "dtype": "float32", "data_format":
"channels_last"})json"},
      // GaussianNoise(0.2, seed=3, name="g").get_config()
      {"GaussianNoise", L::GaussianNoise(0.2, 3, "g"),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "stddev": 0.2, "seed": 3})json"},
      // GaussianDropout(0.35, name="g").get_config()
      {"GaussianDropout", L::GaussianDropout(0.35, std::nullopt, "g"),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "rate": 0.35, "seed": null})json"},
      // AlphaDropout(0.2, noise_shape=(None, 1, 4), seed=9, name="a").get_config()
      {"AlphaDropout", L::AlphaDropout(0.2, {0, 1, 4}, 9, "a"),
       R"json(
{"name": "a", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "rate": 0.2, "seed": 9,
"noise_shape": [null, 1, 4]})json"},
      // ActivityRegularization(l1=0.01, l2=0.002, name="a").get_config()
      {"ActivityRegularization", L::ActivityRegularization(0.01, 0.002, "a"),
       R"json(
{"name": "a", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "l1": 0.01, "l2": 0.002})json"},
      // GroupNormalization(groups=4, axis=2, epsilon=1e-4, center=False,
      // gamma_initializer=I.Constant(2.0), gamma_regularizer=R.L2(0.01), name="g").get_config()
      {"GroupNormalization",
       L::GroupNormalization({.groups = 4,
                              .axis = 2,
                              .epsilon = 1e-4,
                              .center = false,
                              .gamma_initializer = I::Constant(2.0),
                              .gamma_regularizer = Rg::L2(0.01),
                              .name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "groups": 4, "axis": 2,
"epsilon": 0.0001, "center": false, "scale": true, "beta_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"gamma_initializer": {"module": "keras.initializers", "class_name": "Constant", "config":
{"value": 2.0}, "registered_name": null}, "beta_regularizer": null, "gamma_regularizer":
{"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.01},
"registered_name": null}, "beta_constraint": null, "gamma_constraint": null})json"},
      // UnitNormalization(axis=[1, 2], name="u").get_config()
      {"UnitNormalization", L::UnitNormalization(std::vector<int>{1, 2}, "u"),
       R"json(
{"name": "u", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "axis": [1, 2]})json"},
      // UnitNormalization(axis=-2, name="u").get_config()
      {"UnitNormalization", L::UnitNormalization(-2, "u"),
       R"json(
{"name": "u", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "axis": -2})json"},
      // RMSNormalization(axis=-1, epsilon=1e-5, name="r").get_config()
      {"RMSNormalization", L::RMSNormalization(-1, 1e-5, "r"),
       R"json(
{"name": "r", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "axis": -1, "epsilon": 1e-05})json"},
      // Conv3D(4, (2, 3, 1), strides=(1, 2, 1), padding="same", data_format="channels_first",
      // groups=2, activation="relu", name="c").get_config()
      {"Conv3D",
       L::Conv3D(4, L::Size3(2, 3, 1),
                 {.strides = L::Size3(1, 2, 1),
                  .padding = "same",
                  .data_format = "channels_first",
                  .groups = 2,
                  .activation = "relu",
                  .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 4, "kernel_size": [2,
3, 1], "strides": [1, 2, 1], "padding": "same", "data_format": "channels_first",
"dilation_rate": [1, 1, 1], "groups": 2, "activation": "relu", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null}, "registered_name":
null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros",
"config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer":
null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null})json"},
      // Conv3DTranspose(2, 3, strides=2, padding="same", output_padding=(1, 0, 1), use_bias=False,
      // name="c").get_config()
      {"Conv3DTranspose",
       L::Conv3DTranspose(2, 3,
                          {.strides = 2,
                           .padding = "same",
                           .output_padding = L::Size3(1, 0, 1),
                           .use_bias = false,
                           .name = "c"}),
       R"json(
{"name": "c", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 2, "kernel_size": [3,
3, 3], "strides": [2, 2, 2], "padding": "same", "output_padding": [1, 0, 1],
"data_format": "channels_last", "dilation_rate": [1, 1, 1], "activation": "linear",
"use_bias": false, "kernel_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null,
"bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
"bias_constraint": null})json"},
      // MaxPooling3D((2, 2, 1), strides=1, padding="same", name="p").get_config()
      {"MaxPooling3D", L::MaxPooling3D(L::Size3(2, 2, 1), L::Size3(1), "same", "p"),
       R"json(
{"name": "p", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "pool_size": [2, 2, 1],
"padding": "same", "strides": [1, 1, 1], "data_format": "channels_last"})json"},
      // AveragePooling3D(3, name="p").get_config()
      {"AveragePooling3D", L::AveragePooling3D(3, std::nullopt, "valid", "p"),
       R"json(
{"name": "p", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "pool_size": [3, 3, 3],
"padding": "valid", "strides": [3, 3, 3], "data_format": "channels_last"})json"},
      // GlobalAveragePooling3D(keepdims=True, name="g").get_config()
      {"GlobalAveragePooling3D",
       L::GlobalAveragePooling3D(L::GlobalPoolingOptions{.keepdims = true, .name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"keepdims": true})json"},
      // GlobalMaxPooling3D(data_format="channels_first", name="g").get_config()
      {"GlobalMaxPooling3D",
       L::GlobalMaxPooling3D(L::GlobalPoolingOptions{.data_format = "channels_first", .name = "g"}),
       R"json(
{"name": "g", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_first",
"keepdims": false})json"},
      // UpSampling3D((1, 2, 3), name="u").get_config()
      {"UpSampling3D", L::UpSampling3D(L::Size3(1, 2, 3), "u"),
       R"json(
{"name": "u", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "size": [1, 2, 3], "data_format":
"channels_last"})json"},
      // ZeroPadding3D(((1, 0), (2, 2), (0, 1)), name="z").get_config()
      {"ZeroPadding3D", L::ZeroPadding3D(L::Sides3D({1, 0}, {2, 2}, {0, 1}), "z"),
       R"json(
{"name": "z", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "padding": [[1, 0], [2, 2], [0,
1]], "data_format": "channels_last"})json"},
      // Cropping3D(2, name="z").get_config()
      {"Cropping3D", L::Cropping3D(2, "z"),
       R"json(
{"name": "z", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "cropping": [[2, 2], [2, 2], [2,
2]], "data_format": "channels_last"})json"},
  };
}

}  // namespace

TEST_CASE(
    "serialization: get_config of the conv, pooling, activation, noise and normalization "
    "layers is Keras'",
    "[keras][serialization]") {
  for (const ConfigCase& c : config_cases()) {
    CAPTURE(c.class_name, c.keras);
    CHECK(c.layer.class_name() == c.class_name);
    const Config keras = Config::parse(c.keras);
    const Config ours = K::saving::get_config(c.layer);
    // The same keys in the same order with the same values.
    CHECK(ours.dump() == keras.dump());
    // Keras' config builds the same layer again.
    const K::Layer back = K::saving::from_config(c.class_name, keras);
    CHECK(back.class_name() == c.class_name);
    CHECK(back.name() == c.layer.name());
    CHECK(K::saving::get_config(back).dump() == keras.dump());
  }
}

TEST_CASE("serialization: Keras JSON of 1-D, 2-D and 3-D conv models predicts as Keras",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const KerasModel& m : keras_models()) {
      CAPTURE(device.to_string(), m.name);
      // The weights in Keras' order and shapes, and Keras' prediction.
      tf::testing::check_keras_prediction(m);
    }
  }
}

TEST_CASE("serialization: to_json of the Keras conv models writes the layer configs Keras wrote",
          "[keras][serialization]") {
  for (const KerasModel& m : keras_models()) {
    CAPTURE(m.name);
    const Config keras = Config::parse(m.json);
    K::Model model = K::models::model_from_json(m.json);
    const Config ours = Config::parse(K::models::to_json(model));
    CHECK(ours["class_name"] == keras["class_name"]);
    const auto theirs = layers_by_name(keras);
    const auto mine = layers_by_name(ours);
    CHECK(mine.size() == theirs.size());
    for (const auto& [name, layer] : theirs) {
      CAPTURE(name);
      if (layer["class_name"] == "InputLayer" && keras["class_name"] == "Sequential") {
        // tapeflow names a Sequential's input "input_layer" (Keras numbers them).
        const Config& first = ours["config"]["layers"][0];
        CHECK(first["class_name"] == "InputLayer");
        CHECK(first["config"]["batch_shape"] == layer["config"]["batch_shape"]);
        continue;
      }
      REQUIRE(mine.count(name) == 1);
      const Config& l = mine.at(name);
      CHECK(l["class_name"] == layer["class_name"]);
      CHECK(l["module"] == layer["module"]);
      CHECK(l["config"].dump() == layer["config"].dump());
      if (layer.contains("inbound_nodes")) CHECK(l["inbound_nodes"] == layer["inbound_nodes"]);
    }
    // tapeflow's JSON loads back into the same model.
    K::Model again = K::models::model_from_json(K::models::to_json(model));
    CHECK(K::models::to_json(again) == K::models::to_json(model));
  }
}

TEST_CASE("serialization: save_model and load_model round trip the Keras conv models",
          "[keras][serialization]") {
  TempDir dir;
  for (const KerasModel& m : keras_models()) {
    CAPTURE(m.name);
    K::Model model = K::models::model_from_json(m.json);
    set_formula_weights(model);
    const std::string path = dir / (std::string(m.name) + ".tfmodel");
    K::models::save_model(model, path);
    K::Model loaded = K::models::load_model(path);
    const tf::Tensor x = cos_input(m.input_shape);
    check_close(loaded(x, false), model(x, false), 0.0, 0.0);
    check_values(loaded(x, false), *m.pred, 2e-5, 2e-6);
    CHECK(loaded.to_json() == model.to_json());
  }
  // The weights sit under Keras' .weights.h5 paths, in Keras' creation order.
  K::safetensors::Reader reader(dir / "F.tfmodel");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> paths = {
      {"layers/sep2/vars/0", {3, 2, 6, 1}},  // depthwise_kernel
      {"layers/sep2/vars/1", {1, 1, 6, 4}},  // pointwise_kernel
      {"layers/sep2/vars/2", {4}},           // bias
      {"layers/gnorm/vars/0", {4}},          // gamma
      {"layers/rms/vars/0", {4}}};           // scale
  for (const auto& [path, shape] : paths) {
    CAPTURE(path);
    const auto* info = reader.find(path);
    REQUIRE(info != nullptr);
    CHECK(info->shape == tf::TensorShape(shape));
  }
}

TEST_CASE("serialization: a trained model of these layers round trips save_model",
          "[keras][serialization]") {
  TempDir dir;
  K::Sequential model(
      {L::Conv1D(4, 3, {.padding = "causal", .activation = "relu", .input_shape = {10, 2}}),
       L::SeparableConv1D(4, 2, {.depth_multiplier = 2}), L::PReLU(), L::GroupNormalization(2),
       L::MaxPooling1D(), L::SpatialDropout1D(0.2, 3), L::Conv1DTranspose(3, 2, {.strides = 2}),
       L::GlobalAveragePooling1D(), L::GaussianNoise(0.1, 5), L::Rescaling(2.0, 0.5)},
      "trained_conv");
  const tf::Tensor x = cos_input({6, 10, 2});
  const tf::Tensor y = tf::zeros({6, 3});
  model.compile(K::optimizers::SGD(0.05), "mse");
  model.fit(x, y, {.epochs = 1, .batch_size = 3, .verbose = 0});
  model.save(dir / "trained.tfmodel");
  K::Model loaded = K::models::load_model(dir / "trained.tfmodel");
  REQUIRE(loaded.variables().size() == model.variables().size());
  for (size_t i = 0; i < model.variables().size(); ++i)
    check_close(loaded.variables()[i].value(), model.variables()[i].value(), 0.0, 0.0);
  check_close(loaded(x, false), model(x, false), 0.0, 0.0);
}

TEST_CASE("serialization: bad configs of these layers name the class and the key",
          "[keras][serialization]") {
  auto config_of = [](const K::Layer& l) { return K::saving::get_config(l); };
  // Each: the class's config with one key changed, and the words its error must hold (the
  // class and the key first).
  std::vector<std::pair<Config, std::vector<std::string>>> bad;
  auto with = [&](const K::Layer& l, const char* key, Config value, const char* word) {
    Config c = config_of(l);
    c[key] = std::move(value);
    bad.push_back({c, {l.class_name(), key, word}});
  };
  with(L::Conv1D(2, 3), "data_format", "channels_middle", "channels_middle");
  with(L::DepthwiseConv2D(3), "data_format", "channels_middle", "channels_middle");
  with(L::SeparableConv2D(2, 3), "data_format", "channels_middle", "channels_middle");
  with(L::MaxPooling1D(), "data_format", "channels_middle", "channels_middle");
  with(L::MaxPooling3D(), "data_format", "channels_middle", "channels_middle");
  with(L::SpatialDropout2D(0.1), "data_format", "channels_middle", "channels_middle");
  with(L::SpatialDropout3D(0.1), "data_format", "channels_middle", "channels_middle");
  with(L::ZeroPadding2D(), "data_format", "channels_middle", "channels_middle");
  with(L::DepthwiseConv1D(3), "surprise", 1, "not supported");
  with(L::LeakyReLU(), "surprise", true, "not supported");
  with(L::Cropping1D(), "data_format", "channels_last", "not supported");  // Keras has none
  with(L::SeparableConv1D(2, 3), "kernel_size", "3", "integer");
  with(L::Conv2DTranspose(2, 3), "strides", Config::array({1, 2, 3}), "list of 2 integers");
  with(L::Conv3D(2, 3), "dilation_rate", Config::array({1, 0, 1}), ">= 1");
  with(L::Conv2D(2, 3), "padding", "causal", "causal");
  with(L::DepthwiseConv2D(3), "depthwise_constraint",
       Config::parse(R"({"module": "keras.constraints", "class_name": "UnitNorm", "config":
       {"axis": "0"}, "registered_name": null})"),
       "axis");
  with(L::Conv1DTranspose(2, 3), "kernel_constraint",
       Config::parse(R"({"module": "keras.constraints", "class_name": "Clip", "config": {},
       "registered_name": null})"),
       "\"Clip\"");
  with(L::SeparableConv2D(2, 3), "pointwise_initializer",
       Config::parse(R"({"module": "keras.initializers", "class_name": "VarianceScaling",
       "config": {"seed": null, "scale": -0.1}, "registered_name": null})"),
       "Argument `scale` must be positive float");
  with(L::Conv1D(2, 3), "activation", "swishy", "swishy");
  with(L::Conv3DTranspose(2, 3), "output_padding", Config::array({1, -1, 0}), ">= 0");
  with(L::MaxPooling1D(), "strides", Config::array({1, 2}), "list of 1 integers");
  with(L::UpSampling2D(), "interpolation", "spline", "spline");
  with(L::ZeroPadding2D(), "padding", Config::parse("[[1, -1], [0, 0]]"), ">= 0");
  with(L::Cropping3D(), "cropping", Config::array({1, 2}), "3 pairs");
  with(L::PReLU(), "alpha_constraint", Config::parse(R"({"class_name": "Clip"})"), "\"Clip\"");
  with(L::GroupNormalization(), "groups", "two", "integer");
  with(L::GroupNormalization(), "gamma_constraint",
       Config::parse(R"({"class_name": "MaxNorm", "config": {"max_value": -1}})"), "max_value");
  with(L::AlphaDropout(0.1), "noise_shape", Config::array({0, 2}), "null");
  with(L::GaussianNoise(0.1), "seed", 1.5, "integer");
  with(L::RMSNormalization(), "axis", "last", "list of integers");
  with(L::UnitNormalization(), "axis", Config::array(), "at least one axis");
  with(L::Rescaling(2.0), "scale", Config::array({1.0, 2.0}), "number");
  with(L::Permute({2, 1}), "dims", nullptr, "list of integers");
  with(L::GlobalAveragePooling2D(), "keepdims", "yes", "true or false");
  with(L::UpSampling3D(), "size", Config::array({2, 2}), "list of 3 integers");
  for (const auto& [config, words] : bad) {
    CAPTURE(words[0], config.dump());
    tf::testing::require_error([&] { K::saving::from_config(words[0], config); }, words);
  }
  // A required key missing.
  Config noise = config_of(L::GaussianNoise(0.1));
  noise.erase("stddev");
  tf::testing::require_error([&] { K::saving::from_config("GaussianNoise", noise); },
                             {"GaussianNoise", "stddev", "required"});
  // A wrong type inside a Keras model's JSON: the class and the key.
  std::string json = kEJson;
  const std::string from = "\"n\": 2";
  REQUIRE(json.find(from) != std::string::npos);
  json.replace(json.find(from), from.size(), "\"n\": \"2\"");
  tf::testing::require_error([&] { K::models::model_from_json(json); }, {"RepeatVector", "\"n\""});
  // A value the layer itself refuses: its class named.
  Config groups = config_of(L::Conv1D(4, 3));
  groups["groups"] = 3;
  tf::testing::require_error([&] { K::saving::from_config("Conv1D", groups); },
                             {"Conv1D", "groups"});
}
