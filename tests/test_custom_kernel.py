"""mx.fast.metal_kernel / cuda_kernel as MLX has them on a machine without that back-end."""
import pytest

import braze.core as mx

SOURCE = "uint elem = thread_position_in_grid.x; out[elem] = a[elem];"


def _kernel(**kw):
    return mx.fast.metal_kernel(name="copy", input_names=["a"], output_names=["out"],
                                source=SOURCE, **kw)


def _call(kernel, a, stream=mx.gpu):
    return kernel(inputs=[a], grid=(a.size, 1, 1), threadgroup=(min(a.size, 256), 1, 1),
                  output_shapes=[a.shape], output_dtypes=[a.dtype], stream=stream)[0]


def test_running_a_kernel_says_there_is_no_back_end():
    k = _kernel(compile_options={"math_mode": "safe"})
    a = mx.zeros((2, 2))
    for stream in (mx.gpu, mx.cpu, None):
        with pytest.raises(RuntimeError, match=r"\[metal_kernel\] No Metal back-end"):
            _call(k, a, stream)
    with pytest.raises(RuntimeError, match="No Metal back-end"):
        mx.eval(mx.compile(lambda x: _call(k, x))(a))
    with pytest.raises(ValueError, match=r"\[metal_kernel\] Only supports the GPU"):
        mx.compile(lambda x: _call(k, x, mx.cpu))(a)
    cuda = mx.fast.cuda_kernel(name="c", input_names=["a"], output_names=["out"], source="")
    with pytest.raises(RuntimeError, match=r"\[cuda_kernel\] No CUDA back-end"):
        _call(cuda, a)


def test_kernels_export_and_fail_when_run(tmp_path):
    k = _kernel()
    a = mx.zeros((3,))
    for shapeless in (False, True):
        path = tmp_path / f"k{shapeless}.mlxfn"
        mx.export_function(str(path), lambda x: _call(k, x), a, shapeless=shapeless)
        assert path.exists()
    imported = mx.import_function(str(tmp_path / "kFalse.mlxfn"))
    (out,) = imported(a)
    assert out.shape == (3,) and out.dtype == mx.float32
    with pytest.raises(RuntimeError, match="No Metal back-end"):
        mx.eval(out)


def test_bad_kernel_arguments():
    with pytest.raises(TypeError, match=r"\[metal_kernel\] input_names"):
        mx.fast.metal_kernel(name="k", input_names="a", output_names=["o"], source="")
    with pytest.raises(TypeError, match=r"\[metal_kernel\] compile_options"):
        _kernel(compile_options=[1])
    k = _kernel()
    a = mx.zeros((2,))
    with pytest.raises(ValueError, match=r"\[metal_kernel\] Expected 1 inputs, got 2"):
        k(inputs=[a, a], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(2,)],
          output_dtypes=[mx.float32])
    with pytest.raises(ValueError, match=r"\[metal_kernel\] grid"):
        k(inputs=[a], grid=(0, 1), threadgroup=(1, 1, 1), output_shapes=[(2,)],
          output_dtypes=[mx.float32])
    with pytest.raises(ValueError, match=r"\[metal_kernel\] Expected 1 output shapes"):
        k(inputs=[a], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(2,), (2,)],
          output_dtypes=[mx.float32])


def test_same_errors_as_mlx():
    mlx = pytest.importorskip("mlx.core")
    k = mlx.fast.metal_kernel(name="copy", input_names=["a"], output_names=["out"],
                              source=SOURCE)
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\] No Metal back-end"):
        _call(k, mlx.zeros((2, 2)), mlx.gpu)
