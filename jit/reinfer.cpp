#include "jit/reinfer.h"

namespace tapeflow::jit {

void reinfer(Graph& g, const std::vector<TensorMeta>& inputs) {
  g.inputs = inputs;
  std::vector<std::vector<Tensor>> values(g.nodes.size());
  std::vector<Tensor> in;
  std::vector<TensorMeta> metas;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Graph::Node& n = g.nodes[i];
    in.clear();
    for (const Graph::Ref& r : n.inputs) {
      switch (r.source) {
        case Graph::Source::Input:
          in.push_back(detail::symbolic(g.inputs[r.index].shape, g.inputs[r.index].dtype,
                                        g.input_devices[r.index]));
          break;
        case Graph::Source::Constant:
          in.push_back(g.constants[r.index]);
          break;
        case Graph::Source::Node:
          in.push_back(values[r.index][r.output]);
          break;
      }
    }
    metas.assign(n.outputs.size(), TensorMeta{});
    n.prim->infer(in, metas);
    n.outputs = metas;
    for (const TensorMeta& m : metas)
      values[i].push_back(detail::symbolic(m.shape, m.dtype, n.device));
  }
}

}  // namespace tapeflow::jit
