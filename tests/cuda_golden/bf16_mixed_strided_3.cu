// braze kernel CompiledAsTypeSubtractAsTypeAsTypeMaximum_strided_3_VS_i32 (IR key a269ffa0448aa968e8725b7f4be97d4f)
//
//   in0: bfloat16
//   in1: float32
//   c2: float64 = float('-inf')
//   t0: float32 = AsType(dtype=braze.core.float32)(in0)
//   t1: float32 = Subtract(t0, in1)
//   t2: bfloat16 = AsType(dtype=braze.core.bfloat16)(t1)
//   t3: float64 = AsType(dtype=braze.core.float64)(in1)
//   t4: float64 = Maximum(t3, c2)
//   return t2, t4
//   shape: broadcast of the input shapes
#include "braze/half.cuh"

namespace {

__device__ __forceinline__ void element(__nv_bfloat16 x0, float x1, __nv_bfloat16& y0, double& y1) {
  const float v0 = braze::to_float(x0);  // in0: bfloat16
  const double c2 = __longlong_as_double(0xfff0000000000000ll);  // c2: float64 = float('-inf')
  const float t1 = (v0 - x1);  // t1: float32 = Subtract(t0, in1)
  const float t2 = braze::round_bf16(t1);  // t2: bfloat16 = AsType(dtype=braze.core.bfloat16)(t1)
  const double t3 = double(x1);  // t3: float64 = AsType(dtype=braze.core.float64)(in1)
  const double t4 = braze::max_f(t3, c2);  // t4: float64 = Maximum(t3, c2)
  y0 = braze::to_bf16(t2);  // out0 <- t2
  y1 = t4;  // out1 <- t4
}

}  // namespace

extern "C" __global__ void CompiledAsTypeSubtractAsTypeAsTypeMaximum_a269ffa0_strided_3_VS_i32(
    const __nv_bfloat16* __restrict__ in0, const float* __restrict__ in1,
    __nv_bfloat16* __restrict__ out0, double* __restrict__ out1,
    const __grid_constant__ braze::Dims<int32_t, 3> shape,
    const __grid_constant__ braze::Dims<int32_t, 3> strides0, const int32_t size) {
  const float s1 = in1[0];  // in1: float32 scalar
  const int32_t i = int32_t(blockIdx.x) * int32_t(blockDim.x) + int32_t(threadIdx.x);
  if (i >= size) {
    return;
  }
  // each input's element offset, from the output's row-major index
  int32_t rest = i, p0 = 0;
#pragma unroll
  for (int d = 2; d >= 0; --d) {
    const int32_t q = rest % shape.d[d];
    rest /= shape.d[d];
    p0 += q * strides0.d[d];
  }
  element(in0[p0], s1, out0[i], out1[i]);
}
