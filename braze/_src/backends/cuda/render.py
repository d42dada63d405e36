"""The `cuda` renderer: a KernelIR + variant -> the CUDA C++ source of one kernel.

`render_kernel(ir, variant)` is the one entry; the variant picks the loop strategy, and every
strategy calls the region's element function (body.py). A contiguous kernel for `exp(x) * 2`
on float32 (4 elements per thread, 32-bit indices) reads::

    extern "C" __global__ void CompiledExpMultiply_1a2b3c4d_contiguous_V_v4_i32(
        const float* __restrict__ in0, float* __restrict__ out0, const int32_t size) {
      const int32_t i = (int32_t(blockIdx.x) * int32_t(blockDim.x) + int32_t(threadIdx.x)) * 4;
      if (i + 4 <= size) {  // a full vector: one 16-byte load and store per buffer
        const braze::Vec<float, 4> a0 = braze::load_vec<4>(in0, i);
        braze::Vec<float, 4> b0;
    #pragma unroll
        for (int j = 0; j < 4; ++j) {
          element(a0.v[j], b0.v[j]);
        }
        braze::store_vec<4>(out0, i, b0);
      } else {  // the tail
        for (int32_t k = i; k < size; ++k) {
          element(in0[k], out0[k]);
        }
      }
    }

Variants (`CudaVariant`), MLX's set:

- `contiguous`: every non-scalar input has the output's shape and the same dense layout; each
  thread computes `vector` consecutive elements (16 bytes of the widest buffer, so 4 float32,
  8 float16; every buffer must then be aligned to `vector` of its elements, which the launcher
  checks, else `vector == 1`);
- `strided` with `ndim` collapsed dimensions: one element per thread, unravelled from its
  row-major output index; the shape and each input's element strides (0 on broadcast
  dimensions, negative allowed) are `__grid_constant__` arguments, and input pointers point at
  each input's first element, so one kernel serves every shape of a rank.

Both are specialised on which inputs are *scalars* (`S`: read once per thread from element 0)
and on the index type (`index` 32 or 64 bits: int32 arithmetic is cheaper; the launcher picks
64 when the size, plus one block of vectors, does not fit in int32). `alias` names the (output,
input) pairs where an output is written into a donated input: that output is stored through
the input's own pointer, never a separate argument, as pointer arguments are `__restrict__`
(docs/kernels.md, "No-alias arguments").

Arguments, in order: one pointer per run-time input (`const T* __restrict__`, writable when
aliased), one per output not aliased, then (strided) `shape` and `strides{k}` per array input,
then `size`, the number of output elements.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..base import Variant
from ..spelling import Unsupported
from .body import Body, signature

#: the bytes one thread moves per buffer in a contiguous kernel
VECTOR_BYTES = 16


@dataclass(frozen=True)
class CudaVariant(Variant):
    """A `Variant` plus the scalar inputs ("S"/"V" per run-time input), donated outputs
    ((output j, input k) pairs), elements per thread (contiguous) and the index width."""

    scalars: str = ""
    alias: tuple = ()
    vector: int = 1
    index: int = 32

    @property
    def suffix(self) -> str:
        base = "_contiguous" if self.kind == "contiguous" else f"_strided_{self.ndim}"
        base += f"_{self.scalars}" if self.scalars else ""
        base += "".join(f"_o{j}in{k}" for j, k in self.alias)
        if self.kind == "contiguous":
            base += f"_v{self.vector}"
        return base + f"_i{self.index}"


def vector_width(ir) -> int:
    """Elements per thread of the contiguous variant: 16 bytes of the widest buffer."""
    sizes = [ir.inputs[k].dtype.np_dtype.itemsize for k in range(ir.n_inputs)
             if not ir.inputs[k].const]
    sizes += [ir.dtype_of(r).np_dtype.itemsize for r in ir.outputs]
    return max(1, VECTOR_BYTES // max(sizes, default=1))


def kernel_name(ir, variant) -> str:
    """`CompiledExpMultiply_1a2b3c4d_contiguous_V_v4_i32`: MLX's region name (cut to 64
    characters), the IR key's first 8 digits, the variant."""
    return f"{ir.name[:64]}_{ir.key[:8]}{variant.suffix}"


def render_kernel(ir, variant: CudaVariant) -> str:
    """The source of the kernel's translation unit for `ir` and `variant`."""
    if ir.reduce_ndim or variant.kind not in ("contiguous", "strided"):
        raise Unsupported("no cuda row kernels yet")
    return _Elementwise(ir, variant).module()


class _Elementwise:
    def __init__(self, ir, variant: CudaVariant):
        self.ir, self.v = ir, variant
        self.body = Body(ir)
        self.run = self.body.run
        if len(variant.scalars) != len(self.run):
            raise ValueError("variant scalars do not match the region's inputs")
        if variant.index not in (32, 64):
            raise ValueError(f"index width {variant.index}")
        self.I = f"int{variant.index}_t"
        self.vec = [k for k, c in zip(self.run, variant.scalars) if c == "V"]
        self.target = {j: f"in{k}" for j, k in variant.alias}  # output -> the buffer it is in

    def out(self, j: int) -> str:
        return self.target.get(j, f"out{j}")

    def params(self) -> list:
        ir, donors = self.ir, {k for _, k in self.v.alias}
        ps = []
        for k in self.run:
            const = "" if k in donors else "const "
            ps.append(f"{const}{self.body.storage(k)}* __restrict__ in{k}")
        ps += [f"{self.body.storage(r)}* __restrict__ out{j}" for j, r in enumerate(ir.outputs)
               if j not in self.target]
        if self.v.kind == "strided":
            dims = f"braze::Dims<{self.I}, {self.v.ndim}>"
            ps.append(f"const __grid_constant__ {dims} shape")
            ps += [f"const __grid_constant__ {dims} strides{k}" for k in self.vec]
        return ps + [f"const {self.I} size"]

    def module(self) -> str:
        ir, v = self.ir, self.v
        name = kernel_name(ir, v)
        lines = signature(f'extern "C" __global__ void {name}(', self.params())
        for k, c in zip(self.run, v.scalars):
            if c == "S":
                lines.append(f"  const {self.body.storage(k)} s{k} = in{k}[0];"
                             f"  // in{k}: {ir.inputs[k].dtype.name} scalar")
        loop = self._strided() if v.kind == "strided" else self._contiguous()
        lines += ["  " + ln if ln and not ln.startswith("#") else ln for ln in loop] + ["}"]
        return self.body.module(f"braze kernel {ir.name}{v.suffix}", lines)

    def _call(self, arg) -> str:
        """`element(...)`: array input k's element is `arg(k, name)`, scalars are `s{k}`."""
        ins = [arg(k) if k in self.vec else f"s{k}" for k in self.run]
        outs = [arg(None, j) for j in range(len(self.ir.outputs))]
        return f"element({', '.join(ins + outs)});"

    def _contiguous(self) -> list:
        I, n = self.I, self.v.vector
        tid = f"{I}(blockIdx.x) * {I}(blockDim.x) + {I}(threadIdx.x)"
        if n == 1:
            call = self._call(lambda k, j=None: f"in{k}[i]" if k is not None else
                              f"{self.out(j)}[i]")
            return [f"const {I} i = {tid};", "if (i < size) {", "  " + call, "}"]
        ir = self.ir
        lines = [f"const {I} i = ({tid}) * {n};",
                 f"if (i + {n} <= size) {{  // a full vector: one aligned access per buffer"]
        for k in self.vec:
            T = self.body.storage(k)
            lines.append(f"  const braze::Vec<{T}, {n}> a{k} = braze::load_vec<{n}>(in{k}, i);")
        for j, r in enumerate(ir.outputs):
            lines.append(f"  braze::Vec<{self.body.storage(r)}, {n}> b{j};")
        call = self._call(lambda k, j=None: f"a{k}.v[j]" if k is not None else f"b{j}.v[j]")
        lines += ["#pragma unroll", f"  for (int j = 0; j < {n}; ++j) {{", "    " + call, "  }"]
        lines += [f"  braze::store_vec<{n}>({self.out(j)}, i, b{j});"
                  for j in range(len(ir.outputs))]
        call = self._call(lambda k, j=None: f"in{k}[k]" if k is not None else
                          f"{self.out(j)}[k]")
        lines += ["} else {  // the tail", f"  for ({I} k = i; k < size; ++k) {{",
                  "    " + call, "  }", "}"]
        return lines

    def _strided(self) -> list:
        I, nd = self.I, self.v.ndim
        lines = [f"const {I} i = {I}(blockIdx.x) * {I}(blockDim.x) + {I}(threadIdx.x);",
                 "if (i >= size) {", "  return;", "}"]
        if self.vec:
            lines.append("// each input's element offset, from the output's row-major index")
            lines.append(f"{I} rest = i, " + ", ".join(f"p{k} = 0" for k in self.vec) + ";")
            lines += ["#pragma unroll", f"for (int d = {nd - 1}; d >= 0; --d) {{",
                      f"  const {I} q = rest % shape.d[d];", "  rest /= shape.d[d];"]
            lines += [f"  p{k} += q * strides{k}.d[d];" for k in self.vec]
            lines.append("}")
        call = self._call(lambda k, j=None: f"in{k}[p{k}]" if k is not None else
                          f"{self.out(j)}[i]")
        return lines + [call]
