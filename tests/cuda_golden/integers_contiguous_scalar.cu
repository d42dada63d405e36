// braze kernel CompiledFloorDivideRemainderLeftShiftRightShiftPowerAsTypeAsTypeAsTypeSubtract_contiguous_VSV_v1_i64 (IR key 882265feb72bfaf66cc5f5db8ed4e05c)
//
//   in0: int32
//   in1: int32
//   in2: float64
//   c3: int64 = -9223372036854775808
//   t0: int32 = FloorDivide(in0, in1)
//   t1: int32 = Remainder(in0, in1)
//   t2: int32 = LeftShift(t0, in1)
//   t3: int32 = RightShift(t1, in1)
//   t4: int32 = Power(t2, t3)
//   t5: uint64 = AsType(dtype=braze.core.uint64)(in2)
//   t6: uint32 = AsType(dtype=braze.core.uint32)(in2)
//   t7: int64 = AsType(dtype=braze.core.int64)(in2)
//   t8: int64 = Subtract(t7, c3)
//   return t4, t5, t6, t8
//   shape: broadcast of the input shapes
#include "braze/prelude.cuh"

namespace {

__device__ __forceinline__ void element(
    int32_t x0, int32_t x1, double x2, int32_t& y0, uint64_t& y1, uint32_t& y2, int64_t& y3) {
  const int64_t c3 = int64_t(0x8000000000000000ull);  // c3: int64 = -9223372036854775808
  const int32_t t0 = braze::floordiv_i<int32_t>(x0, x1);  // t0: int32 = FloorDivide(in0, in1)
  const int32_t t1 = braze::rem_i<int32_t>(x0, x1);  // t1: int32 = Remainder(in0, in1)
  const int32_t t2 = braze::shl<int32_t>(t0, x1, 32);  // t2: int32 = LeftShift(t0, in1)
  const int32_t t3 = braze::shr_i<int32_t>(t1, x1, 32);  // t3: int32 = RightShift(t1, in1)
  const int32_t t4 = braze::ipow<int32_t>(t2, t3);  // t4: int32 = Power(t2, t3)
  const uint64_t t5 = braze::f_to_u64(x2);  // t5: uint64 = AsType(dtype=braze.core.uint64)(in2)
  const uint32_t t6 = uint32_t(braze::f_to_i64(x2));  // t6: uint32 = AsType(dtype=braze.core.uint32)(in2)
  const int64_t t7 = braze::f_to_i64(x2);  // t7: int64 = AsType(dtype=braze.core.int64)(in2)
  const int64_t t8 = braze::wsub<int64_t>(t7, c3);  // t8: int64 = Subtract(t7, c3)
  y0 = t4;  // out0 <- t4
  y1 = t5;  // out1 <- t5
  y2 = t6;  // out2 <- t6
  y3 = t8;  // out3 <- t8
}

}  // namespace

extern "C" __global__ void CompiledFloorDivideRemainderLeftShiftRightShiftPowerAsTypeAsType_882265fe_contiguous_VSV_v1_i64(
    const int32_t* __restrict__ in0, const int32_t* __restrict__ in1,
    const double* __restrict__ in2, int32_t* __restrict__ out0, uint64_t* __restrict__ out1,
    uint32_t* __restrict__ out2, int64_t* __restrict__ out3, const int64_t size) {
  const int32_t s1 = in1[0];  // in1: int32 scalar
  const int64_t i = int64_t(blockIdx.x) * int64_t(blockDim.x) + int64_t(threadIdx.x);
  if (i < size) {
    element(in0[i], s1, in2[i], out0[i], out1[i], out2[i], out3[i]);
  }
}
