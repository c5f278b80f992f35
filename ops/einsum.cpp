#include "ops/einsum.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"

namespace tapeflow {

namespace {

// In the parsed subscripts "..." is one character, as in TF's parser; after the shapes are known
// it becomes one label per broadcast dimension, numbered from kEllipsisLabel.
constexpr char kEllipsis = '0';
constexpr int kEllipsisLabel = 256;

template <class... Args>
[[noreturn]] void fail(const std::string& equation, fmt::format_string<Args...> f, Args&&... args) {
  throw InvalidArgumentError(fmt::format("[einsum] equation \"{}\": ", equation) +
                             fmt::format(f, std::forward<Args>(args)...));
}

bool is_label(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string shown(std::string s) {  // subscripts as written, "..." restored
  std::string out;
  for (char c : s) out += c == kEllipsis ? std::string("...") : std::string(1, c);
  return out;
}

struct Subscripts {
  std::vector<std::string> inputs;
  std::string output;
};

// TF's parser (special_math_ops._einsum_v2_parse_and_resolve_equation): spaces dropped, "..."
// one label, implicit output = the labels (the ellipsis included, sorting first) that appear
// exactly once over all inputs, sorted.
Subscripts parse(const std::string& equation, size_t num_inputs) {
  std::string eq;
  for (char c : equation) {
    if (c == ' ') continue;
    if (!is_label(c) && c != ',' && c != '-' && c != '>' && c != '.')
      fail(equation,
           "invalid character '{}' (subscripts are letters a-z and A-Z, \"...\", ',' "
           "and one \"->\")",
           c);
    eq += c;
  }
  std::string resolved;
  for (size_t i = 0; i < eq.size(); ++i) {
    if (eq.compare(i, 3, "...") == 0) {
      resolved += kEllipsis;
      i += 2;
    } else if (eq[i] == '.') {
      fail(equation, "a '.' that is not part of \"...\"");
    } else {
      resolved += eq[i];
    }
  }
  const size_t arrow = resolved.find("->");
  const bool explicit_mode = arrow != std::string::npos;
  const std::string lhs = explicit_mode ? resolved.substr(0, arrow) : resolved;
  const std::string rhs = explicit_mode ? resolved.substr(arrow + 2) : std::string();
  const auto bad_char = [](char c) { return c == '-' || c == '>'; };
  if (std::any_of(lhs.begin(), lhs.end(), bad_char) ||
      std::any_of(rhs.begin(), rhs.end(), bad_char))
    fail(equation, "malformed: at most one \"->\", between the inputs and the output");
  if (rhs.find(',') != std::string::npos)
    fail(equation, "malformed: the output subscripts \"{}\" contain a ','", shown(rhs));

  Subscripts s;
  size_t start = 0;
  for (;;) {
    const size_t comma = lhs.find(',', start);
    s.inputs.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (s.inputs.size() != num_inputs)
    fail(equation, "has {} operand(s), got {} tensor(s)", s.inputs.size(), num_inputs);
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (std::count(s.inputs[i].begin(), s.inputs[i].end(), kEllipsis) > 1)
      fail(equation, "operand {} has more than one \"...\" in \"{}\"", i, shown(s.inputs[i]));
  }
  if (std::count(rhs.begin(), rhs.end(), kEllipsis) > 1)
    fail(equation, "the output has more than one \"...\"");

  if (explicit_mode) {
    s.output = rhs;
  } else {
    std::map<char, int> counts;  // ordered: '0' (the ellipsis) < 'A' < 'a', as TF sorts
    for (const std::string& in : s.inputs)
      for (char c : in) ++counts[c];
    for (const auto& [c, n] : counts)
      if (n == 1) s.output += c;
  }
  for (size_t i = 0; i < s.output.size(); ++i) {
    const char c = s.output[i];
    if (c == kEllipsis) continue;
    if (s.output.find(c, i + 1) != std::string::npos)
      fail(equation, "output index {} appears more than once in \"{}\"", c, shown(s.output));
    bool found = false;
    for (const std::string& in : s.inputs) found = found || in.find(c) != std::string::npos;
    if (!found) fail(equation, "output index {} does not appear in any input", c);
  }
  return s;
}

// A tensor and the label of each of its axes.
struct Term {
  Tensor t;
  std::vector<int> labels;
};

bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

Tensor transposed(const Tensor& t, const std::vector<int>& perm) {
  return is_identity(perm) ? t : transpose(t, perm);
}

// The axes of `term` (by position) whose labels are in `which`, in `which`'s order.
std::vector<int> axes_of(const Term& term, const std::vector<int>& which) {
  std::vector<int> axes;
  for (int l : which) {
    const auto it = std::find(term.labels.begin(), term.labels.end(), l);
    axes.push_back(static_cast<int>(it - term.labels.begin()));
  }
  return axes;
}

// Replaces each pair of axes with the same label by their diagonal (last axis): the pair moved
// last, flattened to n*n, padded by n and read as [n, n + 1], whose first column is the diagonal.
Term diagonals(Term term) {
  for (;;) {
    size_t p = 0, q = 0;
    for (p = 0; p < term.labels.size(); ++p) {
      q = std::find(term.labels.begin() + static_cast<std::ptrdiff_t>(p) + 1, term.labels.end(),
                    term.labels[p]) -
          term.labels.begin();
      if (q < term.labels.size()) break;
    }
    if (p == term.labels.size()) return term;
    const int label = term.labels[p];
    std::vector<int> perm, labels;
    std::vector<int64_t> lead;
    for (size_t i = 0; i < term.labels.size(); ++i) {
      if (i == p || i == q) continue;
      perm.push_back(static_cast<int>(i));
      labels.push_back(term.labels[i]);
      lead.push_back(term.t.shape()[static_cast<int>(i)]);
    }
    perm.push_back(static_cast<int>(p));
    perm.push_back(static_cast<int>(q));
    labels.push_back(label);
    const int64_t n = term.t.shape()[static_cast<int>(p)];
    auto with = [&](std::vector<int64_t> tail) {
      std::vector<int64_t> d = lead;
      d.insert(d.end(), tail.begin(), tail.end());
      return d;
    };
    Tensor t = reshape(transposed(term.t, perm), TensorShape(with({n * n})));
    std::vector<std::pair<int64_t, int64_t>> paddings(lead.size() + 1, {0, 0});
    paddings.back().second = n;
    t = reshape(pad(t, paddings), TensorShape(with({n, n + 1})));
    std::vector<int64_t> begin(lead.size() + 2, 0), size = with({n, 1});
    t = reshape(slice(t, begin, size), TensorShape(with({n})));
    term = {t, labels};
  }
}

// Sums out the axes whose labels `keep` rejects.
template <class Keep>
Term sum_out(Term term, const Keep& keep) {
  std::vector<int> axes, labels;
  for (size_t i = 0; i < term.labels.size(); ++i) {
    if (keep(term.labels[i]))
      labels.push_back(term.labels[i]);
    else
      axes.push_back(static_cast<int>(i));
  }
  if (axes.empty()) return term;
  return {reduce_sum(term.t, axes, false), labels};
}

bool has(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// a and b have distinct labels each; labels in both are batch dimensions when kept, summed
// otherwise (through one matmul); the others are kept (sum_out dropped the rest before).
// Result labels: batch, a's own, b's own.
Term contract(const Term& a, const Term& b, const std::set<int>& keep) {
  std::vector<int> batch, summed, a_own, b_own;
  for (int l : a.labels) {
    if (!has(b.labels, l))
      a_own.push_back(l);
    else if (keep.count(l))
      batch.push_back(l);
    else
      summed.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) b_own.push_back(l);
  auto cat = [](std::vector<int> x, const std::vector<int>& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  const bool batched = !batch.empty();
  // The operands as [B, M, K] (3 groups of axes merged; [M, K] without batch labels): the
  // merged sizes come from the operand when the op runs, so a graph traced for None
  // dimensions (a batch among M's axes) serves every size.
  auto groups3 = [&](size_t r, size_t c) {
    return batched ? std::vector<int>{static_cast<int>(batch.size()), static_cast<int>(r),
                                      static_cast<int>(c)}
                   : std::vector<int>{static_cast<int>(r), static_cast<int>(c)};
  };
  Tensor product_t;
  if (summed.empty()) {
    // No summed index: a broadcasting product [B, M, 1] * [B, 1, N].
    const Tensor ta = detail::merge_axes(transposed(a.t, axes_of(a, cat(batch, a_own))),
                                         groups3(a_own.size(), 0));
    const Tensor tb = detail::merge_axes(transposed(b.t, axes_of(b, cat(batch, b_own))),
                                         groups3(0, b_own.size()));
    product_t = multiply(ta, tb);
  } else {
    // One matmul [B, M, K] x [B, K, N]; each operand is read transposed when that saves a
    // transpose, and the summed indices take a's or b's order, whichever moves less.
    auto moves = [](const std::vector<int>& perm) { return is_identity(perm) ? 0 : 1; };
    int best = 99;
    std::vector<int> perm_a, perm_b;
    bool ta_flag = false, tb_flag = false;
    for (const std::vector<int>& order :
         {summed, std::vector<int>(b.labels.begin(), b.labels.end())}) {
      std::vector<int> s;
      for (int l : order)
        if (has(summed, l)) s.push_back(l);
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const auto pa = axes_of(a, ta ? cat(cat(batch, s), a_own) : cat(cat(batch, a_own), s));
          const auto pb = axes_of(b, tb ? cat(cat(batch, b_own), s) : cat(cat(batch, s), b_own));
          const int cost = moves(pa) + moves(pb);
          if (cost < best) {
            best = cost;
            perm_a = pa;
            perm_b = pb;
            ta_flag = ta;
            tb_flag = tb;
          }
        }
      }
    }
    const size_t m = a_own.size(), n = b_own.size(), k = summed.size();
    const Tensor ta =
        detail::merge_axes(transposed(a.t, perm_a), ta_flag ? groups3(k, m) : groups3(m, k));
    const Tensor tb =
        detail::merge_axes(transposed(b.t, perm_b), tb_flag ? groups3(n, k) : groups3(k, n));
    product_t = matmul(ta, tb, ta_flag, tb_flag);
  }
  // Back to one axis per label, each size read from the operand that has the label.
  const std::vector<int> out_labels = cat(cat(batch, a_own), b_own);
  std::vector<std::pair<int, int>> parts;
  for (int l : out_labels) {
    const auto ia = std::find(a.labels.begin(), a.labels.end(), l);
    if (ia != a.labels.end()) {
      parts.emplace_back(0, static_cast<int>(ia - a.labels.begin()));
    } else {
      const auto ib = std::find(b.labels.begin(), b.labels.end(), l);
      parts.emplace_back(1, static_cast<int>(ib - b.labels.begin()));
    }
  }
  return {detail::reshape_from(product_t, {a.t, b.t}, parts), out_labels};
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& inputs) {
  const Subscripts subs = parse(equation, inputs.size());
  const size_t num = inputs.size();

  for (size_t i = 0; i < num; ++i) {
    if (!inputs[i].defined()) fail(equation, "operand {} is an undefined tensor", i);
    const DType d = inputs[i].dtype();
    if (!(is_floating(d) || d == int32 || d == int64))
      fail(equation,
           "does not support dtype {} (expected float16, bfloat16, float32, float64, "
           "int32 or int64)",
           dtype_name(d));
    if (d != inputs[0].dtype())
      fail(equation, "operands have different dtypes: {} (operand 0) and {} (operand {})",
           dtype_name(inputs[0].dtype()), dtype_name(d), i);
    if (!inputs[i].shape().is_fully_defined())
      fail(equation, "operand {} has shape {}: einsum needs known dimensions", i,
           inputs[i].shape().to_string());
  }

  // Ranks against the subscripts; the dimensions "..." stands for broadcast as numpy's.
  std::vector<int> ellipsis_rank(num, 0);
  int ell = 0;
  for (size_t i = 0; i < num; ++i) {
    const std::string& in = subs.inputs[i];
    const int rank = inputs[i].rank();
    const bool has_ell = in.find(kEllipsis) != std::string::npos;
    const int named = static_cast<int>(in.size()) - (has_ell ? 1 : 0);
    if (has_ell ? rank < named : rank != named)
      fail(equation, "operand {} has subscripts \"{}\" ({}{} dimensions) but shape {}", i,
           shown(in), has_ell ? "at least " : "", named, inputs[i].shape().to_string());
    ellipsis_rank[i] = rank - named;
    ell = std::max(ell, ellipsis_rank[i]);
  }
  std::vector<int64_t> ell_dims(static_cast<size_t>(ell), 1);
  std::vector<int> ell_from(static_cast<size_t>(ell), -1);  // the operand that set each size
  std::vector<Term> terms(num);
  std::map<int, std::pair<int64_t, std::pair<size_t, int>>> sizes;  // label: size, operand, axis
  for (size_t i = 0; i < num; ++i) {
    const std::string& in = subs.inputs[i];
    const TensorShape& shape = inputs[i].shape();
    int axis = 0;
    for (char c : in) {
      if (c == kEllipsis) {
        for (int j = 0; j < ellipsis_rank[i]; ++j, ++axis) {
          const size_t e = static_cast<size_t>(ell - ellipsis_rank[i] + j);
          const int64_t d = shape[axis];
          if (d != 1 && ell_dims[e] != 1 && d != ell_dims[e]) {
            // ell_from[e] is set: an earlier operand had a size other than 1 there.
            fail(equation,
                 "the dimensions of \"...\" do not broadcast: size {} in operand {} (shape {}) "
                 "and size {} in operand {} (shape {})",
                 ell_dims[e], ell_from[e],
                 inputs[static_cast<size_t>(ell_from[e])].shape().to_string(), d, i,
                 shape.to_string());
          }
          if (d != 1) {
            ell_dims[e] = d;
            ell_from[e] = static_cast<int>(i);
          }
          terms[i].labels.push_back(kEllipsisLabel + static_cast<int>(e));
        }
        continue;
      }
      const int64_t d = shape[axis];
      const auto it = sizes.find(c);
      if (it == sizes.end()) {
        sizes[c] = {d, {i, axis}};
      } else if (it->second.first != d) {
        fail(equation,
             "index {} has size {} in operand {} (axis {}) but size {} in operand {} (axis {})", c,
             it->second.first, it->second.second.first, it->second.second.second, d, i, axis);
      }
      terms[i].labels.push_back(c);
      ++axis;
    }
  }
  std::vector<int> out_labels;
  for (char c : subs.output) {
    if (c == kEllipsis) {
      for (int e = 0; e < ell; ++e) out_labels.push_back(kEllipsisLabel + e);
    } else {
      out_labels.push_back(c);
    }
  }
  if (ell > 0 && subs.output.find(kEllipsis) == std::string::npos)
    fail(equation,
         "the inputs' \"...\" stands for {} dimension(s) but the output has no \"...\" (TF "
         "requires one; the implicit output has it only when one operand has \"...\")",
         ell);

  // An operand's broadcast (size-1) ellipsis dimension is dropped: the label's other operands
  // carry its size, and a label missing from an operand broadcasts.
  for (size_t i = 0; i < num; ++i) {
    Term& term = terms[i];
    term.t = inputs[i];
    std::vector<int64_t> dims;
    std::vector<int> labels;
    for (size_t a = 0; a < term.labels.size(); ++a) {
      const int l = term.labels[a];
      const int64_t d = inputs[i].shape()[static_cast<int>(a)];
      if (l >= kEllipsisLabel && d == 1 && ell_dims[static_cast<size_t>(l - kEllipsisLabel)] != 1)
        continue;
      dims.push_back(d);
      labels.push_back(l);
    }
    if (labels.size() != term.labels.size()) {
      term.t = reshape(term.t, TensorShape(dims));
      term.labels = labels;
    }
    term = diagonals(std::move(term));
  }

  // Left to right: each step keeps the labels of the output and of the operands still to come.
  std::vector<std::set<int>> needed(num);
  std::set<int> acc(out_labels.begin(), out_labels.end());
  for (size_t i = num; i-- > 0;) {
    needed[i] = acc;
    acc.insert(terms[i].labels.begin(), terms[i].labels.end());
  }
  Term cur = sum_out(terms[0], [&](int l) { return needed[0].count(l) > 0; });
  for (size_t i = 1; i < num; ++i) {
    const Term b =
        sum_out(terms[i], [&](int l) { return needed[i].count(l) || has(cur.labels, l); });
    cur = contract(cur, b, needed[i]);
  }
  TF_ASSERT(cur.labels.size() == out_labels.size());
  return transposed(cur.t, axes_of(cur, out_labels));
}

Tensor einsum(const std::string& equation, const Tensor& a) {
  return einsum(equation, std::vector<Tensor>{a});
}

Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b) {
  return einsum(equation, std::vector<Tensor>{a, b});
}

}  // namespace tapeflow
