// Matrix products through the thread pool, beside a float64 reference of the same weights.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {

// BF16 weights take the BF16 products in Fast precision (activations rounded to BF16) and the
// float conversion in Exact precision; both against double sums of the float-converted operands.
TEST(Matmul, Bf16WeightsFastAndExactMatchADoubleReference) {
  const size_t rows = 37, cols = 70, n_tok = 70;  // odd row tile, token tile past kTokenTile, odd cols
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> w(rows * cols);
  for (uint16_t& v : w) v = float_to_bf16(dist(rng));
  std::vector<float> x(n_tok * cols);
  for (float& v : x) v = dist(rng);
  const WeightView view{&quant_traits(QuantType::BF16), reinterpret_cast<const uint8_t*>(w.data()), rows,
                        cols};
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (MatmulPrecision precision : {MatmulPrecision::Fast, MatmulPrecision::Exact}) {
      std::vector<float> y(n_tok * rows);
      matmul(view, x.data(), n_tok, y.data(), pool, precision);
      for (size_t t = 0; t < n_tok; ++t)
        for (size_t r = 0; r < rows; ++r) {
          double want = 0.0;
          for (size_t k = 0; k < cols; ++k) {
            const float xk = precision == MatmulPrecision::Fast
                                 ? bf16_to_float(float_to_bf16(x[t * cols + k]))
                                 : x[t * cols + k];
            want += double{bf16_to_float(w[r * cols + k])} * xk;
          }
          ASSERT_NEAR(y[t * rows + r], want, 1e-4) << t << "," << r << " threads " << threads;
        }
    }
  }
}

}  // namespace
}  // namespace ts
