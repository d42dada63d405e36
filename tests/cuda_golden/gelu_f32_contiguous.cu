// braze kernel CompiledMultiplyErfAddMultiplyMultiply_contiguous_VSS_v4_i32 (IR key 1f4a98734920aaa8f6db69d25fa0f3a3)
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

extern "C" __global__ void CompiledMultiplyErfAddMultiplyMultiply_1f4a9873_contiguous_VSS_v4_i32(
    const float* __restrict__ in0, const float* __restrict__ in1, const float* __restrict__ in3,
    float* __restrict__ out0, const int32_t size) {
  const float s1 = in1[0];  // in1: float32 scalar
  const float s3 = in3[0];  // in3: float32 scalar
  const int32_t i = (int32_t(blockIdx.x) * int32_t(blockDim.x) + int32_t(threadIdx.x)) * 4;
  if (i + 4 <= size) {  // a full vector: one aligned access per buffer
    const braze::Vec<float, 4> a0 = braze::load_vec<4>(in0, i);
    braze::Vec<float, 4> b0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      element(a0.v[j], s1, s3, b0.v[j]);
    }
    braze::store_vec<4>(out0, i, b0);
  } else {  // the tail
    for (int32_t k = i; k < size; ++k) {
      element(in0[k], s1, s3, out0[k]);
    }
  }
}
