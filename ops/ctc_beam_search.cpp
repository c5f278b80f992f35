// tf.nn.ctc_beam_search_decoder (ops/nn_more.h): TF's prefix beam search with its default
// scorer, on the host, in the inputs' precision.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "ops/factory.h"
#include "ops/nn_more.h"
#include "ops/unary.h"

namespace tapeflow::nn {

namespace {

template <class T>
class BeamSearch {
 public:
  static constexpr T kLogZero = -std::numeric_limits<T>::infinity();

  BeamSearch(int classes, int beam_width) : classes_(classes), beam_width_(beam_width) {}

  // Starts a new sequence: the empty prefix, with probability 1.
  void reset() {
    entries_.clear();
    leaves_.clear();
    Entry& root = entries_.emplace_back(nullptr, -1, classes_ - 1);
    root.newp.total = 0;
    root.newp.blank = 0;
    leaves_.push_back(&root);
  }

  void step(const T* x) {
    // Each frame's scores are normalised by its log-sum-exp (TF 2.21's results: the inputs'
    // log-softmax), which ranks and prunes the prefixes as the raw inputs would.
    const T top = *std::max_element(x, x + classes_);
    T sum = 0;
    for (int c = 0; c < classes_; ++c) sum += std::exp(x[c] - top);
    const T log_norm = top + std::log(sum);
    const int blank = classes_ - 1;
    const std::vector<Entry*> branches = sorted_leaves();
    leaves_.clear();
    for (Entry* b : branches) b->oldp = b->newp;
    // The prefixes already in the beam: extended by a repeat of their last label or a blank.
    for (Entry* b : branches) {
      if (b->parent != nullptr) {
        if (b->parent->active()) {
          // A repeated label needs a blank between; another label follows either ending.
          const T previous =
              b->label == b->parent->label ? b->parent->oldp.blank : b->parent->oldp.total;
          b->newp.label = log_sum_exp(b->newp.label, previous);
        }
        b->newp.label += x[b->label] - log_norm;
      }
      b->newp.blank = b->oldp.total + x[blank] - log_norm;
      b->newp.total = log_sum_exp(b->newp.blank, b->newp.label);
      push(b);
    }
    // New prefixes: each beam's prefix plus one more label, when it beats the weakest leaf.
    for (Entry* b : branches) {
      if (!is_candidate(b->oldp.total)) continue;
      for (int label = 0; label < classes_ - 1; ++label) {
        Entry* c = b->children[static_cast<size_t>(label)];
        if (c != nullptr && c->active()) continue;
        const T previous = label == b->label ? b->oldp.blank : b->oldp.total;
        const T score = x[label] - log_norm + previous;
        if (is_candidate(score)) {
          if (static_cast<int>(leaves_.size()) == beam_width_) bottom()->newp.reset();
          if (c == nullptr) {
            c = &entries_.emplace_back(b, label, classes_ - 1);
            b->children[static_cast<size_t>(label)] = c;
          }
          c->newp.blank = kLogZero;
          c->newp.label = score;
          c->newp.total = score;
          push(c);
        } else if (c != nullptr) {
          c->oldp.reset();
          c->newp.reset();
        }
      }
    }
  }

  // The best n prefixes (labels, log probability), best first; false when the beam holds fewer.
  bool top_paths(int n, bool merge_repeated, std::vector<std::vector<int64_t>>& paths,
                 std::vector<T>& scores) const {
    if (static_cast<int>(leaves_.size()) < n) return false;
    const std::vector<Entry*> best = sorted_leaves();
    paths.clear();
    scores.clear();
    for (int i = 0; i < n; ++i) {
      const Entry* e = best[static_cast<size_t>(i)];
      std::vector<int64_t> labels;
      int previous = -1;
      for (const Entry* c = e; c->parent != nullptr; c = c->parent) {
        if (!merge_repeated || c->label != previous) labels.push_back(c->label);
        previous = c->label;
      }
      std::reverse(labels.begin(), labels.end());
      paths.push_back(std::move(labels));
      scores.push_back(e->newp.total);
    }
    return true;
  }

 private:
  struct Probability {
    T total = kLogZero, blank = kLogZero, label = kLogZero;
    void reset() { total = blank = label = kLogZero; }
  };
  struct Entry {
    Entry(Entry* p, int l, int labels) : parent(p), label(l), children(labels, nullptr) {}
    Entry* parent;
    int label;
    std::vector<Entry*> children;  // made when first entered into the beam
    Probability oldp, newp;        // at the previous and the current frame
    bool active() const { return newp.total != kLogZero; }
  };

  static T log_sum_exp(T a, T b) {
    if (a == kLogZero) return b;
    if (b == kLogZero) return a;
    return a > b ? a + std::log1p(std::exp(b - a)) : b + std::log1p(std::exp(a - b));
  }

  // The leaf of the lowest probability (the beam is full when asked): kept by push(), so that
  // the search's innermost loop asks in constant time. Leaves do not change their scores while
  // the beam is full but for bottom()'s reset, after which push() replaces it.
  Entry* bottom() const { return leaves_[weakest_]; }
  bool is_candidate(T total) const {
    return total > kLogZero &&
           (static_cast<int>(leaves_.size()) < beam_width_ || total > bottom()->newp.total);
  }
  // Keeps the beam_width most probable leaves: a new one replaces the weakest when it beats it.
  void push(Entry* e) {
    if (static_cast<int>(leaves_.size()) < beam_width_) {
      leaves_.push_back(e);
      if (static_cast<int>(leaves_.size()) == beam_width_) find_weakest();
      return;
    }
    if (e->newp.total > bottom()->newp.total) {
      leaves_[weakest_] = e;
      find_weakest();
    }
  }
  // The first leaf of the lowest probability.
  void find_weakest() {
    weakest_ = static_cast<size_t>(std::min_element(leaves_.begin(), leaves_.end(),
                                                    [](const Entry* a, const Entry* b) {
                                                      return a->newp.total < b->newp.total;
                                                    }) -
                                   leaves_.begin());
  }
  std::vector<Entry*> sorted_leaves() const {
    std::vector<Entry*> out = leaves_;
    std::stable_sort(out.begin(), out.end(),
                     [](const Entry* a, const Entry* b) { return a->newp.total > b->newp.total; });
    return out;
  }

  int classes_, beam_width_;
  std::deque<Entry> entries_;  // every prefix of this sequence (stable addresses)
  std::vector<Entry*> leaves_;
  size_t weakest_ = 0;  // bottom()'s position in leaves_, once the beam is full
};

template <class T>
CtcBeamDecoded decode(const Tensor& inputs, const std::vector<int64_t>& lengths, int beam_width,
                      int top_paths, bool merge_repeated) {
  const int64_t frames = inputs.shape()[0], batch = inputs.shape()[1];
  const int classes = static_cast<int>(inputs.shape()[2]);
  const std::vector<T> x = inputs.numpy<T>();
  std::vector<std::vector<int64_t>> decoded(static_cast<size_t>(top_paths),
                                            std::vector<int64_t>(batch * frames, -1));
  std::vector<T> log_probs(static_cast<size_t>(batch * top_paths));
  BeamSearch<T> search(classes, beam_width);
  std::vector<std::vector<int64_t>> paths;
  std::vector<T> scores;
  for (int64_t b = 0; b < batch; ++b) {
    search.reset();
    for (int64_t t = 0; t < lengths[static_cast<size_t>(b)]; ++t)
      search.step(x.data() + (t * batch + b) * classes);
    TF_CHECK_ARG(search.top_paths(top_paths, merge_repeated, paths, scores),
                 "ctc_beam_search_decoder",
                 "Less leaves in the beam search than requested: batch entry {} ({} frames) "
                 "leaves fewer than top_paths = {} prefixes",
                 b, lengths[static_cast<size_t>(b)], top_paths);
    for (int k = 0; k < top_paths; ++k) {
      const auto& path = paths[static_cast<size_t>(k)];
      std::copy(path.begin(), path.end(),
                decoded[static_cast<size_t>(k)].begin() + static_cast<ptrdiff_t>(b * frames));
      log_probs[static_cast<size_t>(b * top_paths + k)] = scores[static_cast<size_t>(k)];
    }
  }
  CtcBeamDecoded out;
  for (auto& d : decoded) out.decoded.push_back(convert_to_tensor(d, {batch, frames}));
  out.log_probabilities = convert_to_tensor(log_probs, {batch, int64_t{top_paths}});
  return out;
}

}  // namespace

CtcBeamDecoded ctc_beam_search_decoder(const Tensor& inputs, const Tensor& sequence_length,
                                       int beam_width, int top_paths, bool merge_repeated) {
  const char* op = "ctc_beam_search_decoder";
  TF_CHECK_ARG(inputs.defined() && sequence_length.defined(), op,
               "an input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(inputs.dtype() == float32 || inputs.dtype() == float64, op,
               "inputs must be float32 or float64 (TF's kernels), got {}",
               dtype_name(inputs.dtype()));
  TF_CHECK_ARG(inputs.rank() == 3, op, "inputs must be (frames, batch, classes), got shape {}",
               inputs.shape().to_string());
  const TensorShape& s = inputs.shape();
  TF_CHECK_ARG(sequence_length.dtype() == int32 || sequence_length.dtype() == int64, op,
               "sequence_length must be int32 or int64, got {}",
               dtype_name(sequence_length.dtype()));
  TF_CHECK_ARG(sequence_length.shape() == TensorShape{s[1]}, op,
               "sequence_length must be (batch,) = ({},), got shape {}", s[1],
               sequence_length.shape().to_string());
  TF_CHECK_ARG(s[2] >= 1, op, "inputs must have at least one class (the blank), got shape {}",
               s.to_string());
  TF_CHECK_ARG(beam_width >= 1, op, "beam_width must be >= 1, got {}", beam_width);
  TF_CHECK_ARG(top_paths >= 1 && top_paths <= beam_width, op,
               "top_paths must be in [1, beam_width = {}], got {}", beam_width, top_paths);
  TF_CHECK_ARG(!inputs.is_symbolic() && !sequence_length.is_symbolic(), op,
               "runs eagerly (a host search); inside tf::function call it through "
               "tf::py_function");
  const std::vector<int64_t> lengths = cast(sequence_length, int64).numpy<int64_t>();
  for (size_t b = 0; b < lengths.size(); ++b)
    TF_CHECK_ARG(lengths[b] >= 0 && lengths[b] <= s[0], op,
                 "sequence_length[{}] = {} is outside [0, {}] (the frame count)", b, lengths[b],
                 s[0]);
  DeviceScope place(inputs.placement());  // the results go where the inputs live
  return inputs.dtype() == float32
             ? decode<float>(inputs, lengths, beam_width, top_paths, merge_repeated)
             : decode<double>(inputs, lengths, beam_width, top_paths, merge_repeated);
}

}  // namespace tapeflow::nn
