// braze kernel CompiledExpMultiplyMaximumAsTypeAddAsType_contiguous_VV_o0in0_v8_i32 (IR key 05effed1b2706718d31315cdaea25b77)
//
//   in0: float16
//   in1: float16
//   c2: float16 = float('inf')
//   c3: float32 = float('nan')
//   t0: float16 = Exp(in0)
//   t1: float16 = Multiply(t0, in1)
//   t2: float16 = Maximum(t1, c2)
//   t3: float32 = AsType(dtype=braze.core.float32)(t2)
//   t4: float32 = Add(t3, c3)
//   t5: int8 = AsType(dtype=braze.core.int8)(t4)
//   return t2, t5
//   shape: broadcast of the input shapes
#include "braze/half.cuh"

namespace {

__device__ __forceinline__ void element(__half x0, __half x1, __half& y0, int8_t& y1) {
  const float v0 = braze::to_float(x0);  // in0: float16
  const float v1 = braze::to_float(x1);  // in1: float16
  const float c2 = __uint_as_float(0x7f800000u);  // c2: float16 = float('inf')
  const float c3 = __uint_as_float(0x7fc00123u);  // c3: float32 = float('nan')
  const float t0 = braze::round_f16(expf(v0));  // t0: float16 = Exp(in0)
  const float t1 = braze::round_f16((t0 * v1));  // t1: float16 = Multiply(t0, in1)
  const float t2 = braze::max_f(t1, c2);  // t2: float16 = Maximum(t1, c2)
  const float t4 = (t2 + c3);  // t4: float32 = Add(t3, c3)
  const int8_t t5 = int8_t(braze::f_to_i32(t4));  // t5: int8 = AsType(dtype=braze.core.int8)(t4)
  y0 = braze::to_f16(t2);  // out0 <- t2
  y1 = t5;  // out1 <- t5
}

}  // namespace

extern "C" __global__ void CompiledExpMultiplyMaximumAsTypeAddAsType_05effed1_contiguous_VV_o0in0_v8_i32(
    __half* __restrict__ in0, const __half* __restrict__ in1, int8_t* __restrict__ out1,
    const int32_t size) {
  const int32_t i = (int32_t(blockIdx.x) * int32_t(blockDim.x) + int32_t(threadIdx.x)) * 8;
  if (i + 8 <= size) {  // a full vector: one aligned access per buffer
    const braze::Vec<__half, 8> a0 = braze::load_vec<8>(in0, i);
    const braze::Vec<__half, 8> a1 = braze::load_vec<8>(in1, i);
    braze::Vec<__half, 8> b0;
    braze::Vec<int8_t, 8> b1;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      element(a0.v[j], a1.v[j], b0.v[j], b1.v[j]);
    }
    braze::store_vec<8>(in0, i, b0);
    braze::store_vec<8>(out1, i, b1);
  } else {  // the tail
    for (int32_t k = i; k < size; ++k) {
      element(in0[k], in1[k], in0[k], out1[k]);
    }
  }
}
