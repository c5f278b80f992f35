// Extra inputs and outputs of a layer call that Layer::operator()(x, training) cannot carry: a
// recurrent layer's initial and final states (call_with_state), an attention layer's value, key,
// masks and scores. The caller opens a Scope with a request for the layer; the layer's build
// and call, further down the same thread, find it by layer. One stack per thread, so replica
// threads may call one layer at once; nested calls find the innermost request.
#pragma once

#include <vector>

namespace tapeflow::keras::detail {

class LayerImpl;

// Request: a struct with the fields `const LayerImpl* layer` and `bool served`.
template <class Request>
class CallRequests {
 public:
  class Scope {
   public:
    explicit Scope(Request* r) { stack().push_back(r); }
    ~Scope() { stack().pop_back(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // The innermost unserved request for `layer` on this thread, or null (a plain call).
  static Request* peek(const LayerImpl* layer) {
    const std::vector<Request*>& s = stack();
    for (auto it = s.rbegin(); it != s.rend(); ++it)
      if ((*it)->layer == layer && !(*it)->served) return *it;
    return nullptr;
  }
  // peek(), marked served: the call's (peek() is the build's).
  static Request* take(const LayerImpl* layer) {
    Request* r = peek(layer);
    if (r != nullptr) r->served = true;
    return r;
  }

 private:
  static std::vector<Request*>& stack() {
    thread_local std::vector<Request*> s;
    return s;
  }
};

}  // namespace tapeflow::keras::detail
