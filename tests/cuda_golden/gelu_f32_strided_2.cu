// braze kernel CompiledMultiplyErfAddMultiplyMultiply_strided_2_VSS_i64 (IR key 1f4a98734920aaa8f6db69d25fa0f3a3)
//
//   in0: float32
//   in1: float32
//   c2: float32 = 1.0
//   in3: float32
//   t0: float32 = Multiply(in0, in1)
//   t1: float32 = Erf(t0)
//   t2: float32 = Add(t1, c2)
//   t3: float32 = Multiply(in0, in3)
//   t4: float32 = Multiply(t3, t2)
//   return t4
//   shape: broadcast of the input shapes
#include "braze/prelude.cuh"

namespace {

__device__ __forceinline__ void element(float x0, float x1, float x3, float& y0) {
  const float c2 = 1.0f;  // c2: float32 = 1.0
  const float t0 = (x0 * x1);  // t0: float32 = Multiply(in0, in1)
  const float t1 = erff(t0);  // t1: float32 = Erf(t0)
  const float t2 = (t1 + c2);  // t2: float32 = Add(t1, c2)
  const float t3 = (x0 * x3);  // t3: float32 = Multiply(in0, in3)
  const float t4 = (t3 * t2);  // t4: float32 = Multiply(t3, t2)
  y0 = t4;  // out0 <- t4
}

}  // namespace

extern "C" __global__ void CompiledMultiplyErfAddMultiplyMultiply_1f4a9873_strided_2_VSS_i64(
    const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in3,
    float* __restrict__ out0, const __grid_constant__ braze::Dims<int64_t, 2> shape,
    const __grid_constant__ braze::Dims<int64_t, 2> strides0, const int64_t size) {
  const float s1 = in1[0];  // in1: float32 scalar
  const float s3 = in3[0];  // in3: float32 scalar
  const int64_t i = int64_t(blockIdx.x) * int64_t(blockDim.x) + int64_t(threadIdx.x);
  if (i >= size) {
    return;
  }
  // each input's element offset, from the output's row-major index
  int64_t rest = i, p0 = 0;
#pragma unroll
  for (int d = 1; d >= 0; --d) {
    const int64_t q = rest % shape.d[d];
    rest /= shape.d[d];
    p0 += q * strides0.d[d];
  }
  element(in0[p0], s1, s3, out0[i]);
}
