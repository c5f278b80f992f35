// Adversarial inputs for tf::linalg's decompositions and the rest of the linear-algebra family,
// einsum and the scans: empty, scalar, non-square, mismatched and special-valued (NaN,
// infinities, zeros) matrices in several dtypes on every device under test, with gradients
// where the op is differentiable. A readable result or a tf::Error naming the op, nothing else.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::make;
using adversarial::on_every_device;
using adversarial::probe;
using adversarial::with_gradients;

namespace {

const std::vector<tf::TensorShape> kMatrices = {{},     {3},       {0, 0},    {1, 1},
                                                {3, 3}, {2, 3},    {3, 2},    {2, 0},
                                                {0, 3}, {2, 3, 3}, {0, 2, 2}, {2, 1, 4, 4}};
const std::vector<tf::DType> kDTypes = {tf::float32, tf::float64, tf::float16, tf::int32};

}  // namespace

TEST_CASE("adversarial: decompositions", "[adversarial]") {
  namespace la = tf::linalg;
  on_every_device([&] {
    for (const auto& s : kMatrices)
      for (tf::DType d : kDTypes)
        for (bool special : {false, true}) {
          const tf::Tensor a = make(s, d, special);
          const std::string what = describe(a) + (special ? " special" : "");
          // A symmetric version where the shape allows it (positive definite unless special).
          const tf::Tensor sym =
              s.rank() >= 2 && s[-1] == s[-2] && tf::is_floating(d)
                  ? tf::matmul(a, a, false, true) +
                        tf::cast(tf::eye(s[-1]), d) * tf::cast(tf::constant(0.5), d)
                  : a;
          probe("cholesky", what,
                [&] { return with_gradients({a}, [&] { return la::cholesky(sym); }); });
          probe("cholesky_solve", what, [&] { return la::cholesky_solve(a, a); });
          probe("logdet", what,
                [&] { return with_gradients({a}, [&] { return la::logdet(sym); }); });
          probe("eigh", what, [&] {
            return with_gradients({a}, [&]() -> std::vector<tf::Tensor> {
              const auto r = la::eigh(sym);
              return {r.eigenvalues, r.eigenvectors};
            });
          });
          probe("eigvalsh", what, [&] { return la::eigvalsh(a); });
          for (bool full : {false, true}) {
            probe("qr", what, [&] {
              return with_gradients({a}, [&]() -> std::vector<tf::Tensor> {
                const auto r = la::qr(a, full);
                return {r.q, r.r};
              });
            });
            for (bool uv : {true, false})
              probe("svd", what, [&] {
                return with_gradients({a}, [&]() -> std::vector<tf::Tensor> {
                  const auto r = la::svd(a, full, uv);
                  return {r.s, r.u, r.v};
                });
              });
          }
          for (double rcond : {-1.0, 0.0, 1e-3, 2.0})
            probe("pinv", what, [&] { return la::pinv(a, rcond); });
          for (const auto& sb : kMatrices) {
            const tf::Tensor b = make(sb, d, false, 2);
            const std::string wb = what + ", " + describe(b);
            for (bool fast : {true, false})
              probe("lstsq", wb, [&] {
                return with_gradients({a, b}, [&] { return la::lstsq(a, b, 0.1, fast); });
              });
            probe("triangular_solve", wb, [&] {
              return with_gradients({a, b}, [&] { return la::triangular_solve(a, b, true, true); });
            });
            probe("lu", wb + ", lu_solve", [&] {
              auto [lu, perm] = la::lu(a);
              return la::lu_solve(lu, perm, b);
            });
            probe("matvec", wb, [&] { return la::matvec(a, b, true); });
            probe("cross", wb, [&] { return la::cross(a, b); });
            probe("set_diag", wb, [&] { return la::set_diag(a, b, 1); });
            probe("tridiagonal_solve", wb, [&] { return la::tridiagonal_solve(a, b); });
            probe("tridiagonal_solve", wb + " matrix",
                  [&] { return la::tridiagonal_solve(a, b, "matrix", true, false); });
            probe("tensordot", wb, [&] { return la::tensordot(a, b, 1); });
            probe("tensordot", wb + " axes", [&] { return la::tensordot(a, b, {0, -1}, {5, 0}); });
            probe("einsum", wb, [&] { return tf::einsum("...ij,...jk->...ik", a, b); });
            probe("einsum", wb + " diagonal", [&] { return tf::einsum("ii,jk->ijk", a, b); });
          }
          probe("slogdet", what, [&] {
            return with_gradients({a}, [&]() -> std::vector<tf::Tensor> {
              auto [sign, logabs] = la::slogdet(a);
              return {sign, logabs};
            });
          });
          for (tf::DType idx : {tf::int32, tf::int64, tf::float32})
            probe("lu", what, [&] {
              auto [lu, perm] = la::lu(a, idx);
              return std::vector<tf::Tensor>{lu, perm, la::lu_matrix_inverse(lu, perm),
                                             la::lu_reconstruct(lu, perm)};
            });
          probe("lu_solve", what + ", bad perm",
                [&] { return la::lu_solve(a, make({3}, tf::int32, true), a); });
          for (int64_t k : std::vector<int64_t>{-(int64_t{1} << 40), -1, 0, 2, int64_t{1} << 40}) {
            probe("band_part", what, [&] { return la::band_part(a, k, -k); });
            probe("diag", what, [&] { return la::diag(a, k); });
            probe("diag_part", what, [&] { return la::diag_part(a, k); });
          }
          probe("trace", what, [&] { return la::trace(a); });
          probe("adjoint", what, [&] { return la::adjoint(a); });
          probe("expm", what, [&] { return with_gradients({a}, [&] { return la::expm(a); }); });
          for (int axis : {-3, -1, 0, 2})
            probe("l2_normalize", what, [&] { return la::l2_normalize(a, axis); });
          for (const char* eq : {"ij->ji", "ii->i", "ii", "...->...", "ij,->", "i j->", "ab->c",
                                 "a...b->b...a", "->", "iij->j"})
            probe("einsum", what + " " + eq, [&] { return tf::einsum(eq, a); });
          for (int axis : {-3, -1, 0, 1, 3})
            for (bool exclusive : {false, true}) {
              probe("cumsum", what, [&] {
                return with_gradients({a}, [&] { return tf::cumsum(a, axis, exclusive, true); });
              });
              probe("cumprod", what, [&] {
                return with_gradients({a}, [&] { return tf::cumprod(a, axis, exclusive); });
              });
            }
        }
  });
}
