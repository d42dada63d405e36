"""The device code the cuda kernels include: `braze/prelude.cuh`, and `braze/half.cuh` where a
kernel touches float16/bfloat16, handed to NVRTC as named headers (compiler.py), so a rendered
kernel reads as its own loop and element function only.

It holds what the op table (spell.py) calls beyond CUDA's math library: half-precision
conversions and rounding (`cuda_fp16.h` / `cuda_bf16.h`, computing in float), braze's
float -> integer casts (braze/_src/casts.py: x86-64 C conversions, where CUDA's own saturate),
integer arithmetic with wrap-around (signed overflow is undefined in C++, so signed ints are
computed in their unsigned type), Python's floor division and remainder signs, NumPy's shifts
and float remainder, integer powers, NaN-propagating extrema, logaddexp, sigmoid and MLX's
float erfinv; then the vector type of the contiguous kernels' 16-byte loads and stores and the
shape/stride arrays of the strided ones.
"""

NAME = "braze/prelude.cuh"
#: the half-precision part, included by kernels that read or write float16/bfloat16 only:
#: NVRTC parses cuda_fp16.h and cuda_bf16.h in 40-100 ms per program
HALF_NAME = "braze/half.cuh"

SOURCE = r"""// braze/prelude.cuh: what braze's generated CUDA kernels call (backends/cuda)
#pragma once

typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

namespace braze {

// -- integers: two's-complement wrap-around through the unsigned type -------------------------
template <typename T> struct Unsigned;
template <> struct Unsigned<int8_t> { typedef uint32_t type; };
template <> struct Unsigned<int16_t> { typedef uint32_t type; };
template <> struct Unsigned<int32_t> { typedef uint32_t type; };
template <> struct Unsigned<int64_t> { typedef uint64_t type; };
template <> struct Unsigned<uint8_t> { typedef uint32_t type; };
template <> struct Unsigned<uint16_t> { typedef uint32_t type; };
template <> struct Unsigned<uint32_t> { typedef uint32_t type; };
template <> struct Unsigned<uint64_t> { typedef uint64_t type; };

template <typename T> __device__ __forceinline__ T wadd(T a, T b) {
  typedef typename Unsigned<T>::type U;
  return T(U(a) + U(b));
}
template <typename T> __device__ __forceinline__ T wsub(T a, T b) {
  typedef typename Unsigned<T>::type U;
  return T(U(a) - U(b));
}
template <typename T> __device__ __forceinline__ T wmul(T a, T b) {
  typedef typename Unsigned<T>::type U;
  return T(U(a) * U(b));
}

// Python's a // b and a % b for signed integers (the remainder takes the divisor's sign);
// x // 0 == x % 0 == 0, MIN // -1 wraps to MIN
template <typename T> __device__ __forceinline__ T floordiv_i(T a, T b) {
  if (b == 0) return T(0);
  if (b == T(-1)) return wsub(T(0), a);
  T q = T(a / b);
  return ((a % b != 0) && ((a < 0) != (b < 0))) ? T(q - 1) : q;
}
template <typename T> __device__ __forceinline__ T rem_i(T a, T b) {
  if (b == 0 || b == T(-1)) return T(0);
  T r = T(a % b);
  return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
}
template <typename T> __device__ __forceinline__ T floordiv_u(T a, T b) {
  return b == 0 ? T(0) : T(a / b);
}
template <typename T> __device__ __forceinline__ T rem_u(T a, T b) {
  return b == 0 ? T(0) : T(a % b);
}

// NumPy's shifts: a shift by a negative amount or by >= the bit width gives 0
// (a right shift of a negative signed value: -1)
template <typename T> __device__ __forceinline__ T shl(T a, T b, int bits) {
  typedef typename Unsigned<T>::type U;
  return uint64_t(int64_t(b)) < uint64_t(bits) ? T(U(a) << int(b)) : T(0);
}
template <typename T> __device__ __forceinline__ T shr_i(T a, T b, int bits) {
  if (uint64_t(int64_t(b)) < uint64_t(bits)) return T(a >> int(b));
  return a < 0 ? T(-1) : T(0);
}
template <typename T> __device__ __forceinline__ T shr_u(T a, T b, int bits) {
  return uint64_t(b) < uint64_t(bits) ? T(a >> int(b)) : T(0);
}

// a ** b by repeated squaring with wrap-around; a negative exponent gives 0 (MLX)
template <typename T> __device__ __forceinline__ T ipow(T a, T b) {
  if (b < 0) return T(0);
  T r = T(1);
  for (T e = b; e > 0; e = T(e >> 1)) {
    if (e & 1) r = wmul(r, a);
    a = wmul(a, a);
  }
  return r;
}
template <typename T> __device__ __forceinline__ T upow(T a, T b) {
  T r = T(1);
  for (T e = b; e > 0; e = T(e >> 1)) {
    if (e & 1) r = wmul(r, a);
    a = wmul(a, a);
  }
  return r;
}

// -- braze's float -> integer casts (x86-64 C conversions; CUDA's own saturate) ---------------
template <typename F> __device__ __forceinline__ int64_t f_to_i64(F x) {
  const bool ok = x >= F(-9.223372036854775808e18) && x < F(9.223372036854775808e18);
  return ok ? int64_t(x) : int64_t(0x8000000000000000ull);
}
template <typename F> __device__ __forceinline__ int32_t f_to_i32(F x) {
  const bool ok = x >= F(-2147483648.0) && x < F(2147483648.0);
  return ok ? int32_t(x) : int32_t(0x80000000u);
}
template <typename F> __device__ __forceinline__ uint64_t f_to_u64(F x) {
  if (x >= F(9.223372036854775808e18)) {  // subtract 2**63, convert, set the top bit
    return uint64_t(f_to_i64(F(x - F(9.223372036854775808e18)))) ^ 0x8000000000000000ull;
  }
  return uint64_t(f_to_i64(x));
}

// -- floats --------------------------------------------------------------------------------
// np.maximum / np.minimum: a NaN propagates (the first), ties give the second operand
template <typename F> __device__ __forceinline__ F max_f(F a, F b) {
  return (a > b || a != a) ? a : b;
}
template <typename F> __device__ __forceinline__ F min_f(F a, F b) {
  return (a < b || a != a) ? a : b;
}
template <typename F> __device__ __forceinline__ bool nan_equal(F a, F b) {
  return a == b || (a != a && b != b);
}
// NumPy's float remainder: fmod moved to the divisor's sign; an exact zero takes its sign
__device__ __forceinline__ float rem_f(float a, float b) {
  const float m = fmodf(a, b);
  if (m == 0.0f) return copysignf(0.0f, b);
  return ((b < 0.0f) != (m < 0.0f)) ? m + b : m;
}
__device__ __forceinline__ double rem_f(double a, double b) {
  const double m = fmod(a, b);
  if (m == 0.0) return copysign(0.0, b);
  return ((b < 0.0) != (m < 0.0)) ? m + b : m;
}
// NumPy's npy_logaddexp
__device__ __forceinline__ float logaddexp_f(float x, float y) {
  if (x == y) return x + 0.6931471805599453f;
  const float d = x - y;
  if (d != d) return d;
  return (d > 0.0f ? x : y) + log1pf(expf(-fabsf(d)));
}
__device__ __forceinline__ double logaddexp_f(double x, double y) {
  if (x == y) return x + 0.6931471805599453;
  const double d = x - y;
  if (d != d) return d;
  return (d > 0.0 ? x : y) + log1p(exp(-fabs(d)));
}
// 1 / (1 + e**-x) from e = e**-|x|: never overflows, keeps the negative tail's precision
__device__ __forceinline__ float sigmoid_f(float x) {
  const float e = expf(-fabsf(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
__device__ __forceinline__ double sigmoid_f(double x) {
  const double e = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
// erfinv in single and half precision: MLX's float algorithm (as the reference backend's
// erfinv32: products exact, sums rounded to float)
__device__ __forceinline__ float mad_f(float a, float b, float c) {
  return float(double(a) * double(b) + double(c));
}
__device__ __forceinline__ float erfinv_mlx(float a) {
  const float t = float(log(double(mad_f(a, -a, 1.0f))));  // logf, correctly rounded
  float p;
  if (fabsf(t) > 6.125f) {
    p = 3.03697567e-10f;
    p = mad_f(p, t, 2.93243101e-8f);
    p = mad_f(p, t, 1.22150334e-6f);
    p = mad_f(p, t, 2.84108955e-5f);
    p = mad_f(p, t, 3.93552968e-4f);
    p = mad_f(p, t, 3.02698812e-3f);
    p = mad_f(p, t, 4.83185798e-3f);
    p = mad_f(p, t, -2.64646143e-1f);
    p = mad_f(p, t, 8.40016484e-1f);
  } else {
    p = 5.43877832e-9f;
    p = mad_f(p, t, 1.43285448e-7f);
    p = mad_f(p, t, 1.22774793e-6f);
    p = mad_f(p, t, 1.12963626e-7f);
    p = mad_f(p, t, -5.61530760e-5f);
    p = mad_f(p, t, -1.47697632e-4f);
    p = mad_f(p, t, 2.31468678e-3f);
    p = mad_f(p, t, 1.15392581e-2f);
    p = mad_f(p, t, -2.32015476e-1f);
    p = mad_f(p, t, 8.86226892e-1f);
  }
  return a * p;
}

// -- buffers ---------------------------------------------------------------------------------
// N elements of T loaded or stored as one aligned access (16 bytes for the widest buffer)
template <typename T, int N> struct alignas(sizeof(T) * N) Vec {
  T v[N];
};
template <int N, typename T, typename I>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p, I i) {
  return *reinterpret_cast<const Vec<T, N>*>(p + i);
}
template <int N, typename T, typename I>
__device__ __forceinline__ void store_vec(T* p, I i, const Vec<T, N>& x) {
  *reinterpret_cast<Vec<T, N>*>(p + i) = x;
}
// a strided kernel's shape, or one input's element strides, passed by value as a kernel argument
template <typename I, int N> struct Dims {
  I d[N];
};

}  // namespace braze
"""

HALF_SOURCE = r"""// braze/half.cuh: float16 / bfloat16 for braze's generated CUDA kernels
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "braze/prelude.cuh"

namespace braze {

// -- half precision: stored as __half / __nv_bfloat16, computed in float ----------------------
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ __half to_f16(float x) { return __float2half_rn(x); }
__device__ __forceinline__ __nv_bfloat16 to_bf16(float x) { return __float2bfloat16_rn(x); }
// a float rounded to the nearest float16 / bfloat16 (ties to even), kept as float
__device__ __forceinline__ float round_f16(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

}  // namespace braze
"""

#: every header a kernel may include, by the name it includes
HEADERS = {NAME: SOURCE, HALF_NAME: HALF_SOURCE}
