// CudaBackend's GEMMs (cuBLASLt, backend/cublaslt.hpp) in every precision against a host reference
// in double on the same fp32 inputs: the four transpositions, odd shapes (M, N, K from 1, 7, 33,
// 257), beta 0 and nonzero, leading dimensions wider than the rows, operands at addresses that are
// not 256-byte aligned, strided batches against the reference and against a loop of single GEMMs,
// double GEMMs (cuBLAS), run-to-run bit equality, and a cache that stops growing once every shape
// has run. The padding of C beyond its N columns must come back untouched.
//
// Tolerance (llm.c's |device - reference| <= tol + eps x): x is the sum of the absolute terms,
// |alpha| sum_k |op(A)_mk op(B)_kn| + |beta c|, not |reference|, because a dot product's rounding
// error scales with its terms and cancellation can make the result itself small. With inputs
// rounded to a format of unit roundoff u_in and fp32 accumulation (u = 2^-24), the worst case is
// (2 u_in + (K + 1) u) x. eps is twice the input term, leaving room for a conversion that truncates
// rather than rounds, plus the K-dependent accumulation term:
//   fp32  u_in = 0       eps = (K + 2) 2^-24      (6.0e-8 at K = 1, 1.5e-5 at K = 257)
//   tf32  u_in = 2^-11   eps = 2^-9 + (K + 2) 2^-24  (about 2.0e-3)
//   bf16  u_in = 2^-8    eps = 2^-6 + (K + 2) 2^-24  (about 1.6e-2)
// The input term does not grow with K relative to x; only the accumulation term does (relative to
// |reference|, random-sign errors grow like sqrt(K)). The layout, transposition and beta paths are
// the same code in every precision and are held to fp32's bound; tf32 and bf16 show that the
// precision reaches cuBLASLt (on a GPU with bf16 tensor cores the largest bf16 product must differ
// from the fp32 one) and stays within its bound. bf16 runs in each of its forms (cublaslt.hpp):
// fp32 operands converted inside cuBLASLt ("fast"), operands rounded into packed bf16 copies first
// ("packed"), and packed single products with fast batches ("packed-single"); all round each input
// once, so all are held to the same bound, and the packed forms' odd shapes, leading dimensions
// and unaligned operands exercise the packing.
//
// Exit 77 (ctest: skipped) without a usable CUDA device.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "loopscale/train/backend/cuda.hpp"

namespace {

using loopscale::train::CudaBackend;
using loopscale::train::Precision;
using loopscale::train::precision_name;
namespace lt = loopscale::train::cublaslt;
using int64 = std::int64_t;

int failures = 0, checks = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    std::printf("FAIL %s\n", what.c_str());
    ++failures;
  }
}

template <class T>
std::vector<T> random(std::size_t n, std::uint64_t seed) {
  std::vector<T> v(n);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (T& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = static_cast<T>(static_cast<double>(s >> 40) / static_cast<double>(1 << 24) * 2.0 - 1.0);
  }
  return v;
}

template <class T>
CudaBackend::buffer<T> up(const std::vector<T>& h) {
  CudaBackend::buffer<T> d(h.size());
  CudaBackend::upload(d.data(), h.data(), static_cast<int64>(h.size()));
  return d;
}
template <class T>
std::vector<T> down(const CudaBackend::buffer<T>& d) {
  std::vector<T> h(d.size());
  CudaBackend::download(h.data(), d.data(), static_cast<int64>(h.size()));
  return h;
}

double eps_of(Precision p, int64 K) {
  const double u_in = p == Precision::bf16 ? 0x1p-8 : p == Precision::tf32 ? 0x1p-11 : 0.0;
  return 2 * (2 * u_in) + static_cast<double>(K + 2) * 0x1p-24;
}

// One batched problem in host memory: count products, each X_i at X + off + i * strideX.
template <class T>
struct Problem {
  bool ta, tb;
  int64 M, N, K, lda, ldb, ldc, strideA, strideB, strideC, count, offA, offB, offC;
  T alpha, beta;
  std::vector<T> A, B, C;  // C: the input C (beta C), padding included

  Problem(bool ta_, bool tb_, int64 M_, int64 N_, int64 K_, int64 pad, int64 count_, int64 off, T beta_, std::uint64_t seed,
          bool aligned_c = false)
      : ta(ta_), tb(tb_), M(M_), N(N_), K(K_), count(count_), offA(off), offB(2 * off), offC(3 * off), alpha(T(0.75)), beta(beta_) {
    lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + 2 * pad, ldc = N + pad;
    // Strides of a whole matrix plus an odd number of elements, so batch members after the first
    // are not 256-byte aligned either. aligned_c: C's rounded up to 64 values instead, so with
    // off 0 every member of C is 256-byte aligned, as the model's are (cuBLASLt may have no
    // bf16 x bf16 kernel for a C only 4-byte aligned).
    strideA = (ta ? K : M) * lda + 7, strideB = (tb ? N : K) * ldb + 5, strideC = aligned_c ? (M * ldc + 63) / 64 * 64 : M * ldc + 3;
    A = random<T>(static_cast<std::size_t>(offA + count * strideA), seed);
    B = random<T>(static_cast<std::size_t>(offB + count * strideB), seed + 1);
    C = random<T>(static_cast<std::size_t>(offC + count * strideC), seed + 2);
  }
  std::string name() const {
    const auto n = [](int64 v) { return std::to_string(v); };
    return std::string("ta ") + (ta ? "T" : "N") + " tb " + (tb ? "T" : "N") + " M " + n(M) + " N " + n(N) + " K " + n(K) + " lda " + n(lda) +
           " ldb " + n(ldb) + " ldc " + n(ldc) + " beta " + std::to_string(beta) + " offsets " + n(offA) + "," + n(offB) + "," + n(offC) +
           (count > 1 ? " count " + n(count) + " strideC " + n(strideC) : "");
  }
  // The reference in double and the sum of absolute terms, at every element of C.
  void reference(std::vector<double>& ref, std::vector<double>& mag) const {
    ref.assign(C.begin(), C.end());
    mag.assign(C.size(), 0.0);
    for (int64 b = 0; b < count; ++b) {
      const T* a = A.data() + offA + b * strideA;
      const T* bb = B.data() + offB + b * strideB;
      for (int64 m = 0; m < M; ++m)
        for (int64 n = 0; n < N; ++n) {
          double s = 0, abs = 0;
          for (int64 k = 0; k < K; ++k) {
            const double t = static_cast<double>(ta ? a[k * lda + m] : a[m * lda + k]) * static_cast<double>(tb ? bb[n * ldb + k] : bb[k * ldb + n]);
            s += t, abs += std::abs(t);
          }
          const std::size_t i = static_cast<std::size_t>(offC + b * strideC + m * ldc + n);
          const double c = C[i];
          ref[i] = static_cast<double>(alpha) * s + static_cast<double>(beta) * c;
          mag[i] = std::abs(static_cast<double>(alpha)) * abs + std::abs(static_cast<double>(beta) * c);
        }
    }
  }
  // Runs the device GEMM(s) on fresh copies of the inputs: one gemm_batched, or (loop) count gemms.
  std::vector<T> device(bool loop) const {
    auto dA = up(A), dB = up(B), dC = up(C);
    const T* a = dA.data() + offA;
    const T* b = dB.data() + offB;
    T* c = dC.data() + offC;
    if (count == 1)
      CudaBackend::gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (!loop)
      CudaBackend::gemm_batched(ta, tb, M, N, K, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC, count);
    else
      for (int64 i = 0; i < count; ++i)
        CudaBackend::gemm(ta, tb, M, N, K, alpha, a + i * strideA, lda, b + i * strideB, ldb, beta, c + i * strideC, ldc);
    return down(dC);
  }
};

// Whether every element of C is within tol + eps x of the reference, and every element outside
// the products (padding, the gaps between batch members) is the input's, bit for bit.
template <class T>
bool within(const Problem<T>& p, const std::vector<T>& dev, double eps, std::string& worst) {
  std::vector<double> ref, mag;
  p.reference(ref, mag);
  std::vector<bool> inside(p.C.size(), false);
  for (int64 b = 0; b < p.count; ++b)
    for (int64 m = 0; m < p.M; ++m)
      for (int64 n = 0; n < p.N; ++n) inside[static_cast<std::size_t>(p.offC + b * p.strideC + m * p.ldc + n)] = true;
  constexpr double tol = 1e-6;
  double excess = -1;
  bool ok = true;
  for (std::size_t i = 0; i < dev.size(); ++i) {
    if (!inside[i]) {
      if (std::memcmp(&dev[i], &p.C[i], sizeof(T)) != 0) {
        worst = "element " + std::to_string(i) + " outside the product changed";
        return false;
      }
      continue;
    }
    const double e = std::abs(static_cast<double>(dev[i]) - ref[i]) - (tol + eps * mag[i]);
    if (e > excess) {
      excess = e;
      worst = "worst [" + std::to_string(i) + "] reference " + std::to_string(ref[i]) + " device " + std::to_string(dev[i]) + " bound " +
              std::to_string(tol + eps * mag[i]);
    }
    ok = ok && e <= 0;
  }
  return ok;
}

}  // namespace

int main() {
  if (!CudaBackend::available()) {
    std::printf("no CUDA device usable: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s (compute capability %d.%d)\n", prop.name, prop.major, prop.minor);
  expect(CudaBackend::precision() == Precision::bf16, "the default precision is bf16");
  try {
    lt::Engine::get();  // reads LOOPSCALE_BF16_OPERANDS: a bad value is a failed check, not an abort
  } catch (const std::runtime_error& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  if (!std::getenv("LOOPSCALE_BF16_OPERANDS"))
    expect(lt::Engine::get().bf16_operands() == lt::Bf16Operands::fast, "bf16 products convert inside cuBLASLt unless asked otherwise");

  const int64 shapes[][3] = {{1, 1, 1}, {1, 7, 33}, {7, 33, 257}, {33, 257, 1}, {257, 33, 7}, {7, 1, 257}, {257, 257, 257}};
  std::vector<float> fp32_large;  // the largest product in fp32, for the precision-took-effect check
  struct Form {
    Precision precision;
    lt::Bf16Operands operands;
  };
  for (const Form form : {Form{Precision::fp32, lt::Bf16Operands::fast}, Form{Precision::tf32, lt::Bf16Operands::fast},
                          Form{Precision::bf16, lt::Bf16Operands::fast}, Form{Precision::bf16, lt::Bf16Operands::packed},
                          Form{Precision::bf16, lt::Bf16Operands::packed_single}}) {
    const Precision precision = form.precision;
    CudaBackend::set_precision(precision);
    lt::Engine::get().set_bf16_operands(form.operands);
    const std::string prec =
        std::string(precision_name(precision)) + (precision == Precision::bf16 ? std::string(" ") + lt::bf16_operands_name(form.operands) : "");
    int cases = 0;
    std::size_t plans_after_first_pass = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& s : shapes)
        for (int t = 0; t < 4; ++t)
          for (const float beta : {0.0f, -0.5f}) {
            const int64 off = (t + (beta != 0)) % 3;  // 0, 1 or 2 elements: 4- and 8-byte aligned operands too
            const Problem<float> p(t & 1, t & 2, s[0], s[1], s[2], t == 0 ? 0 : 3, 1, off, beta, 17 * static_cast<std::uint64_t>(s[2]) + t);
            const std::vector<float> dev = p.device(false);
            if (pass == 1) {  // the second pass only checks that nothing new is planned and the bits repeat
              if (p.M == 257 && p.N == 257 && t == 0 && beta == 0) {
                if (precision == Precision::fp32) fp32_large = dev;
                if (precision == Precision::bf16 && prop.major >= 8)
                  expect(dev != fp32_large, prec + ": the 257 x 257 x 257 product differs from fp32's (bf16 tensor cores are used)");
              }
              continue;
            }
            std::string worst;
            const double eps = eps_of(precision, p.K);
            expect(within(p, dev, eps, worst), prec + " gemm " + p.name() + ": " + worst);
            expect(dev == p.device(false), prec + " gemm " + p.name() + ": two runs give the same bits");
            ++cases;
          }
      if (pass == 0) plans_after_first_pass = lt::Engine::get().plans();
    }
    expect(lt::Engine::get().plans() == plans_after_first_pass,
           prec + ": repeating every call plans nothing new (" + std::to_string(lt::Engine::get().plans()) + " plans)");

    // Strided batches: against the reference, against a loop of single GEMMs, and run to run.
    for (int t = 0; t < 4; ++t)
      for (const auto& s : {std::array<int64, 3>{7, 33, 257}, std::array<int64, 3>{33, 1, 7}, std::array<int64, 3>{1, 1, 1}}) {
        const Problem<float> p(t & 1, t & 2, s[0], s[1], s[2], 2, 5, t % 2, t < 2 ? 0.0f : 1.0f, 101 + t);
        const std::vector<float> batched = p.device(false), looped = p.device(true);
        std::string worst;
        expect(within(p, batched, eps_of(precision, p.K), worst), prec + " gemm_batched " + p.name() + ": " + worst);
        expect(within(p, looped, eps_of(precision, p.K), worst), prec + " gemm loop " + p.name() + ": " + worst);
        expect(batched == p.device(false), prec + " gemm_batched " + p.name() + ": two runs give the same bits");
        ++cases;
      }
    std::printf("%s: %d cases, %zu plans cached\n", prec.c_str(), cases, lt::Engine::get().plans());
  }
  // Odd shapes (K = 1, a single row) may have no bf16 x bf16 kernel and run the fast form; said,
  // not failed. Shapes like the model's must run packed, or bench_gemm's packed rows would
  // measure the fast form: a 256-multiple product and attention's strided batch of head slices,
  // whose C members are 256-byte aligned as the model's are. The same batch with C members only
  // 4-byte aligned (an odd stride) must still compute right; whether it runs packed is said.
  std::printf("bf16 packed: %zu packed plans of the odd shapes above (both packed forms) ran the fast form\n",
              lt::Engine::get().packed_fallbacks());
  if (prop.major >= 8) {
    CudaBackend::set_precision(Precision::bf16);
    lt::Engine::get().set_bf16_operands(lt::Bf16Operands::packed);
    const std::size_t before = lt::Engine::get().packed_fallbacks();
    const Problem<float> square(false, true, 256, 512, 256, 0, 1, 0, 0.0f, 41), heads(false, true, 64, 64, 32, 96, 4, 0, 0.0f, 43, true),
        heads_odd_c(false, true, 64, 64, 32, 96, 4, 0, 0.0f, 43);
    std::string worst;
    expect(within(square, square.device(false), eps_of(Precision::bf16, square.K), worst), "bf16 packed " + square.name() + ": " + worst);
    expect(within(heads, heads.device(false), eps_of(Precision::bf16, heads.K), worst), "bf16 packed " + heads.name() + ": " + worst);
    expect(lt::Engine::get().packed_fallbacks() == before,
           "bf16 packed: model-like products run bf16 x bf16, not the fast form (" +
               std::to_string(lt::Engine::get().packed_fallbacks() - before) + " fell back)");
    const std::size_t aligned = lt::Engine::get().packed_fallbacks();
    expect(within(heads_odd_c, heads_odd_c.device(false), eps_of(Precision::bf16, heads_odd_c.K), worst),
           "bf16 packed " + heads_odd_c.name() + ": " + worst);
    std::printf("bf16 packed: %zu plans of the head batch with C members 4-byte aligned ran the fast form\n",
                lt::Engine::get().packed_fallbacks() - aligned);
    lt::Engine::get().set_bf16_operands(lt::Bf16Operands::fast);
  }
  lt::Engine::get().set_bf16_operands(lt::Bf16Operands::fast);

  // K = 0: C = beta C, batched too; double through cuBLAS, single and batched, whatever the precision.
  {
    const Problem<float> p(false, true, 7, 33, 0, 1, 3, 1, 0.5f, 7);
    std::string worst;
    expect(within(p, p.device(false), 0, worst), "K = 0, batched: C = beta C, " + worst);
  }
  for (int t = 0; t < 4; ++t) {
    const Problem<double> one(t & 1, t & 2, 33, 7, 257, 1, 1, 1, 0.25, 3), many(t & 1, t & 2, 7, 33, 33, 2, 4, 1, 1.0, 5);
    std::string worst;
    expect(within(one, one.device(false), 1e-13, worst), "double gemm " + one.name() + ": " + worst);
    expect(within(many, many.device(false), 1e-13, worst), "double gemm_batched " + many.name() + ": " + worst);
  }

  // A failure names the call and the shapes: lda 0 is no layout of a 7 x 33 A, in fp32 (cuBLASLt
  // refuses it) and with packed bf16 operands (the engine refuses it before packing).
  const auto lda_zero_message = [](Precision precision, lt::Bf16Operands operands) {
    CudaBackend::set_precision(precision);
    lt::Engine::get().set_bf16_operands(operands);
    CudaBackend::buffer<float> a(7 * 33), b(33 * 5), c(7 * 5);
    std::string message;
    try {
      CudaBackend::gemm(false, false, 7, 5, 33, 1.0f, a.data(), 0, b.data(), 5, 0.0f, c.data(), 5);
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    lt::Engine::get().set_bf16_operands(lt::Bf16Operands::fast);
    std::printf("lda 0, %s%s: %s\n", precision_name(precision), precision == Precision::bf16 ? " packed" : "", message.c_str());
    return message;
  };
  const std::string packed_message = lda_zero_message(Precision::bf16, lt::Bf16Operands::packed);
  expect(packed_message.find("lda 0 is below A's 33 stored columns") != std::string::npos &&
             packed_message.find("M 7 N 5 K 33 lda 0") != std::string::npos,
         "packed bf16: a bad leading dimension throws naming it and the shapes");
  const std::string message = lda_zero_message(Precision::fp32, lt::Bf16Operands::fast);
  expect(message.find("cublasLt") != std::string::npos && message.find("M 7 N 5 K 33 lda 0") != std::string::npos,
         "a bad leading dimension throws std::runtime_error naming the call and the shapes");

  std::printf("%d of %d checks failed\n", failures, checks);
  return failures == 0 ? 0 : 1;
}
