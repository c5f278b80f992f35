// TF2's functional API guide, "Models with multiple inputs and outputs", in C++: the ticket
// ranking model (inputs title, body and tags; outputs priority and department), compiled with a
// loss per output and loss weights, trained on lists and on maps keyed by the layer names.
//   build/samples/multi_io [epochs [max_loss_ratio]]
// The guide trains on random data; here the targets follow the tags (priority: the first tag;
// department: the first of tags 0..3 that is set), so the model can learn them. Exits 1 unless
// the last epoch's loss is below max_loss_ratio times the first epoch's.
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;

int main(int argc, char** argv) {
  samples::Args args(argc, argv,
                     "TF2's functional API guide: a model with three inputs and two outputs.");
  const int epochs = args.epochs(8);
  const double max_ratio =
      args.real("max_loss_ratio", 0.9, 0, 1, "exit 1 unless last loss < this * first loss");
  args.done();
  tf::random::set_seed(42);

  // The guide's sizes, smaller: 12 tags, 1000 words, 4 departments.
  const int64_t num_tags = 12, num_words = 1000, num_departments = 4, samples = 512;
  const K::KerasTensor title_input = K::Input({tf::None}, tf::int32, "title");
  const K::KerasTensor body_input = K::Input({tf::None}, tf::int32, "body");
  const K::KerasTensor tags_input = K::Input({num_tags}, tf::float32, "tags");
  K::KerasTensor title_features = L::Embedding(num_words, 16)(title_input);
  K::KerasTensor body_features = L::Embedding(num_words, 16)(body_input);
  title_features = L::LSTM(32)(title_features);
  body_features = L::LSTM(8)(body_features);
  const K::KerasTensor x = L::Concatenate()({title_features, body_features, tags_input});
  const K::KerasTensor priority_pred = L::Dense(1, {.name = "priority"})(x);
  const K::KerasTensor department_pred = L::Dense(num_departments, {.name = "department"})(x);
  K::Model model({title_input, body_input, tags_input}, {priority_pred, department_pred});
  model.summary();

  model.compile(K::optimizers::RMSprop(1e-3),
                {K::losses::BinaryCrossentropy(true), K::losses::CategoricalCrossentropy(true)},
                {1.0, 0.2}, {{"mae"}, {"accuracy"}});

  const tf::Tensor title_data =
      tf::random::uniform({samples, 10}, 0, static_cast<double>(num_words), tf::int32);
  const tf::Tensor body_data =
      tf::random::uniform({samples, 20}, 0, static_cast<double>(num_words), tf::int32);
  const tf::Tensor tags_data = tf::round(tf::random::uniform({samples, num_tags}));
  const tf::Tensor priority_targets = tf::slice(tags_data, {0, 0}, {samples, 1});
  const tf::Tensor department_targets = tf::one_hot(
      tf::argmax(tf::slice(tags_data, {0, 0}, {samples, num_departments}), 1), num_departments);

  // model.fit({"title": ..., "body": ..., "tags": ...}, {"priority": ..., "department": ...})
  const K::History history = model.fit(
      std::map<std::string, tf::Tensor>{
          {"title", title_data}, {"body", body_data}, {"tags", tags_data}},
      std::map<std::string, tf::Tensor>{{"priority", priority_targets},
                                        {"department", department_targets}},
      {.epochs = epochs, .batch_size = 32, .verbose = 2, .validation_split = 0.2});

  // The same model on lists, in model.inputs' order; predict returns one tensor per output.
  const std::vector<double> scores = model.evaluate(
      {title_data, body_data, tags_data}, {priority_targets, department_targets}, {.verbose = 0});
  const std::vector<std::string> names = model.metrics_names();
  for (size_t i = 0; i < names.size(); ++i) std::printf("%s: %.4f\n", names[i].c_str(), scores[i]);
  const std::vector<tf::Tensor> predictions = model.predict({title_data, body_data, tags_data});
  std::printf("predictions: priority %s, department %s\n",
              predictions[0].shape().to_string().c_str(),
              predictions[1].shape().to_string().c_str());

  const std::vector<double>& loss = history.history.at("loss");
  if (!(loss.back() < max_ratio * loss.front())) {
    std::fprintf(stderr, "the loss went from %.4f to %.4f: not below %.2f times the first\n",
                 loss.front(), loss.back(), max_ratio);
    return 1;
  }
  return 0;
}
