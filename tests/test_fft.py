"""mx.fft: bad input (types and messages as MLX's), MLX's behaviours (dtypes, empty axes,
shapes), transforms of the FFT primitive (grad, jvp, vmap on odd irfft sizes), compile.

Values are checked by the op table (tests/op_table/fft.py) against NumPy and MLX."""
import numpy as np
import pytest

import braze.core as mx

try:
    import mlx.core as mlx_core
except ImportError:  # MLX is optional: the expected messages below are written out
    mlx_core = None


def _x(lib, shape=(3, 4), dtype=None):
    return lib.zeros(shape, dtype=dtype or lib.float32)


# (id, call(lib), MLX's exception type, MLX's message); braze raises the same message, as a
# ValueError (axis errors: AxisError, both ValueError and IndexError)
BAD = [
    ("0d_fftn", lambda m: m.fft.fftn(m.array(3.0)), ValueError,
     "[fftn] Requires array with at least one dimension."),
    ("0d_irfftn", lambda m: m.fft.irfftn(m.array(3.0)), ValueError,
     "[fftn] Requires array with at least one dimension."),
    ("0d_fft_n", lambda m: m.fft.fft(m.array(3.0), n=2), ValueError,
     "[fftn] Requires array with at least one dimension."),
    ("empty_axis", lambda m: m.fft.fft(m.zeros((0,))), ValueError,
     "[fftn] Invalid FFT output size requested (0)"),
    ("n0", lambda m: m.fft.fft(_x(m), n=0), ValueError,
     "[fftn] Invalid FFT output size requested (0)"),
    ("n_neg", lambda m: m.fft.rfft(_x(m), n=-1), ValueError,
     "[fftn] Invalid FFT output size requested (-1)"),
    ("irfft_one_bin", lambda m: m.fft.irfft(_x(m, (3, 1))), ValueError,
     "[fftn] Invalid FFT output size requested (0)"),
    ("s_zero", lambda m: m.fft.fftn(_x(m), s=[0, 4], axes=[0, 1]), ValueError,
     "[fftn] Invalid FFT output size requested (0,4)"),
    ("dup_axes", lambda m: m.fft.fftn(_x(m), axes=[0, 0]), ValueError,
     "[fftn] Duplicated axis received (0,0)"),
    ("dup_neg_axes", lambda m: m.fft.ifftn(_x(m), axes=[1, -1]), ValueError,
     "[fftn] Duplicated axis received (1,-1)"),
    ("s_axes_len", lambda m: m.fft.fftn(_x(m), s=[3], axes=[0, 1]), ValueError,
     "[fftn] Shape and axes have different sizes."),
    ("axis_range_n", lambda m: m.fft.fft(_x(m), n=4, axis=2), IndexError,
     "[fftn] Invalid axis received for array with 2 dimensions."),
    ("axes_range_s", lambda m: m.fft.rfftn(_x(m), s=[4], axes=[-3]), IndexError,
     "[fftn] Invalid axis received for array with 2 dimensions."),
    ("s_without_axes", lambda m: m.fft.fftn(_x(m), s=[3, 4]), ValueError,
     "[fftn] `axes` should not be `None` if `s` is not `None`."),
    ("s_without_axes2", lambda m: m.fft.irfft2(_x(m), s=[3, 4], axes=None), ValueError,
     "[irfft2] `axes` should not be `None` if `s` is not `None`."),
    ("norm", lambda m: m.fft.fft(_x(m), norm="invalid"), ValueError,
     "[fft] Invalid norm. Expected one of {'backward', 'ortho', 'forward'}."),
    ("norm2", lambda m: m.fft.rfft2(_x(m), norm="Ortho"), ValueError,
     "[rfft2] Invalid norm. Expected one of {'backward', 'ortho', 'forward'}."),
    ("fftshift_axis", lambda m: m.fft.fftshift(_x(m), axes=[2]), IndexError,
     "[fftshift] Invalid axis 2 for array with 2 dimensions."),
    ("ifftshift_axis", lambda m: m.fft.ifftshift(_x(m), axes=-3), IndexError,
     "[ifftshift] Invalid axis -3 for array with 2 dimensions."),
    ("fftshift_0d", lambda m: m.fft.fftshift(m.array(1.0), axes=[0]), IndexError,
     "[fftshift] Invalid axis 0 for array with 0 dimensions."),
    ("fftfreq_n0", lambda m: m.fft.fftfreq(0), ValueError,
     "[fftfreq] `n` must be greater than 0."),
    ("fftfreq_d0", lambda m: m.fft.fftfreq(4, d=0.0), ValueError,
     "[fftfreq] `d` must be non-zero."),
    ("rfftfreq_n", lambda m: m.fft.rfftfreq(-1), ValueError,
     "[rfftfreq] `n` must be greater than 0."),
    ("rfftfreq_d0", lambda m: m.fft.rfftfreq(4, 0), ValueError,
     "[rfftfreq] `d` must be non-zero."),
    ("stft_0d", lambda m: m.fft.stft(m.array(1.0), n_fft=4), ValueError,
     "[stft] Input must have at least one dimension."),
    ("stft_n_fft", lambda m: m.fft.stft(_x(m), n_fft=0), ValueError,
     "[stft] n_fft must be positive."),
    ("stft_hop", lambda m: m.fft.stft(_x(m, (2, 20)), n_fft=3), ValueError,
     "[stft] hop_length must be positive."),
    ("stft_win", lambda m: m.fft.stft(_x(m, (2, 20)), n_fft=4, win_length=5), ValueError,
     "[stft] window length must not exceed n_fft."),
    ("stft_window_2d", lambda m: m.fft.stft(_x(m, (2, 20)), n_fft=4, window=m.ones((2, 2))),
     ValueError, "[stft] window must be a one-dimensional array."),
    ("stft_short", lambda m: m.fft.stft(_x(m, (2, 20)), n_fft=32, center=False), ValueError,
     "[stft] Input is too short for the given n_fft."),
    ("stft_norm", lambda m: m.fft.stft(_x(m, (2, 20)), n_fft=4, norm="x"), ValueError,
     "[stft] Invalid norm. Expected one of {'backward', 'ortho', 'forward'}."),
    ("istft_1d", lambda m: m.fft.istft(m.zeros((9,), dtype=m.complex64)), ValueError,
     "[istft] Input must have at least two dimensions (freq, frames)."),
    ("istft_one_bin", lambda m: m.fft.istft(m.zeros((1, 5), dtype=m.complex64)), ValueError,
     "[istft] n_fft must be positive."),
    ("istft_hop", lambda m: m.fft.istft(m.zeros((9, 5), dtype=m.complex64), hop_length=0),
     ValueError, "[istft] hop_length must be positive."),
    ("istft_win", lambda m: m.fft.istft(m.zeros((9, 5), dtype=m.complex64), win_length=17),
     ValueError, "[istft] window length must not exceed n_fft."),
]

# MLX raises these with an uninformative message (a C++ container's); braze names the op
BAD_OTHER_MESSAGE = [
    ("0d_fft", lambda m: m.fft.fft(m.array(3.0)), IndexError,
     "[fft] Invalid axis -1 for array with 0 dimensions."),
    ("axis_range", lambda m: m.fft.fft(_x(m), axis=2), IndexError,
     "[fft] Invalid axis 2 for array with 2 dimensions."),
    ("fft2_1d", lambda m: m.fft.fft2(m.zeros((4,))), IndexError,
     "[fft2] Invalid axis -2 for array with 1 dimensions."),
    ("stft_pad_mode", lambda m: m.fft.stft(_x(m, (2, 20)), n_fft=4, pad_mode="wrap"),
     ValueError, "[pad] Invalid padding mode 'wrap'"),
]

# argument types MLX's bindings refuse (TypeError)
BAD_TYPES = [
    ("list_input", lambda m: m.fft.fft([1.0, 2.0])),
    ("numpy_input", lambda m: m.fft.rfft(np.ones(4, np.float32))),
    ("float_n", lambda m: m.fft.fft(_x(m), n=3.0)),
    ("float_axis", lambda m: m.fft.fft(_x(m), axis=0.0)),
    ("int_axes", lambda m: m.fft.fftn(_x(m), axes=0)),
    ("float_s", lambda m: m.fft.fftn(_x(m), s=[3.0, 3], axes=(0, 1))),
    ("none_norm", lambda m: m.fft.fft(_x(m), norm=None)),
    ("float_freq_n", lambda m: m.fft.fftfreq(3.0)),
    ("shift_list", lambda m: m.fft.fftshift([1.0, 2.0])),
]


def _raises(call, lib):
    with pytest.raises(Exception) as info:
        r = call(lib)
        lib.eval(r)
    return info.value


@pytest.mark.parametrize("call,etype,msg", [pytest.param(*c[1:], id=c[0]) for c in BAD])
def test_bad_input(call, etype, msg):
    e = _raises(call, mx)
    assert isinstance(e, etype) and isinstance(e, ValueError), repr(e)
    assert str(e) == msg
    if mlx_core is not None:  # the message is MLX's own
        m = _raises(call, mlx_core)
        assert isinstance(m, etype) and str(m) == msg, repr(m)


@pytest.mark.parametrize("call,etype,msg",
                         [pytest.param(*c[1:], id=c[0]) for c in BAD_OTHER_MESSAGE])
def test_bad_input_braze_message(call, etype, msg):
    e = _raises(call, mx)
    assert isinstance(e, etype) and isinstance(e, ValueError), repr(e)  # both, like AxisError
    assert str(e).startswith(msg)
    if mlx_core is not None:
        assert isinstance(_raises(call, mlx_core), etype)


@pytest.mark.parametrize("call", [pytest.param(c[1], id=c[0]) for c in BAD_TYPES])
def test_bad_argument_types(call):
    e = _raises(call, mx)
    assert isinstance(e, TypeError) and str(e).startswith("[")
    if mlx_core is not None:
        assert isinstance(_raises(call, mlx_core), TypeError)


# -- MLX's behaviours ---------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float64", "int64", "uint8", "bool_"])
def test_dtypes_promote_to_complex64(dt):
    a = mx.ones((4,), dtype=getattr(mx, dt))
    assert mx.fft.fft(a).dtype == mx.complex64
    assert mx.fft.rfft(a).dtype == mx.complex64
    assert mx.fft.irfft(a).dtype == mx.float32
    assert mx.fft.irfft(a).shape == (6,)


def test_rfft_drops_the_imaginary_part():
    z = mx.array(np.array([1 + 5j, 2 - 1j, 3 + 2j, 0.5j], np.complex64))
    np.testing.assert_allclose(mx.fft.rfft(z), np.fft.rfft([1.0, 2.0, 3.0, 0.0]), atol=1e-6)


def test_empty_axes_return_the_input():
    a = mx.arange(12).reshape(3, 4)
    for f in (mx.fft.fftn, mx.fft.ifftn, mx.fft.rfftn, mx.fft.irfftn):
        out = f(a, axes=[])
        assert out is a and out.dtype == mx.int32
    assert mx.fft.fftshift(a, axes=[]) is a
    s = mx.array(1.0)
    assert mx.fft.fftshift(s) is s


def test_default_axes_and_sizes():
    a = mx.zeros((2, 4, 6))
    assert mx.fft.fft2(a).shape == (2, 4, 6)
    assert mx.fft.rfft2(a).shape == (2, 4, 4)
    assert mx.fft.rfftn(a).shape == (2, 4, 4)
    assert mx.fft.fft2(a, axes=None).shape == (2, 4, 6)  # every axis, as fftn
    assert mx.fft.fft2(a, s=(3, 5)).shape == (2, 3, 5)
    assert mx.fft.fft2(a, axes=(0, 1, 2)).shape == (2, 4, 6)  # fft2 takes any number of axes
    assert mx.fft.irfftn(mx.zeros((3, 4), dtype=mx.complex64)).shape == (3, 6)
    assert mx.fft.irfftn(mx.zeros((3, 4)), s=[2, 3], axes=[0, 1]).shape == (2, 3)
    assert mx.fft.fftn(a, s=(3,), axes=np.array([1])).shape == (2, 3, 6)


def test_norms_scale_like_numpy():
    r = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    for norm in ("backward", "ortho", "forward"):
        np.testing.assert_allclose(mx.fft.irfftn(mx.fft.rfftn(mx.array(r), norm=norm),
                                                 norm=norm), r, atol=1e-5)
        np.testing.assert_allclose(mx.fft.fft2(mx.array(r), norm=norm),
                                   np.fft.fft2(r, norm=norm), rtol=1e-5, atol=1e-5)


def test_fftfreq_matches_mlx_bit_for_bit():
    for n, d in [(1, 1.0), (4, 0.5), (5, 0.25), (8, -0.5), (7, 0.3), (6, 1)]:
        out = mx.fft.fftfreq(n, d)
        assert out.dtype == mx.float32
        np.testing.assert_array_equal(out, np.fft.fftfreq(n, d).astype(np.float32))
        np.testing.assert_array_equal(mx.fft.rfftfreq(n, d),
                                      np.fft.rfftfreq(n, d).astype(np.float32))


def test_fftshift_duplicate_axes_shift_twice():
    a = mx.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(mx.fft.fftshift(a, axes=[0, 0]), np.roll(np.arange(12).reshape(
        3, 4), 2, axis=0))
    np.testing.assert_array_equal(mx.fft.ifftshift(mx.arange(5)), [2, 3, 4, 0, 1])


def test_stft_istft_round_trip_and_shapes():
    x = np.random.default_rng(1).standard_normal((2, 50)).astype(np.float32)
    s = mx.fft.stft(mx.array(x), n_fft=16)
    assert s.shape == (2, 9, 13) and s.dtype == mx.complex64
    assert mx.fft.stft(mx.array(x), n_fft=16, onesided=False).shape == (2, 16, 13)
    assert mx.fft.stft(mx.array(x + 0j), n_fft=16).shape == (2, 16, 13)  # complex: two-sided
    y = mx.fft.istft(s, n_fft=16)
    assert y.shape == (2, 48) and y.dtype == mx.float32
    np.testing.assert_allclose(y, x[:, :48], atol=1e-5)
    np.testing.assert_allclose(mx.fft.istft(s, length=50)[:, :48], x[:, :48], atol=1e-5)
    assert mx.fft.istft(s, length=60).shape == (2, 60)
    assert mx.fft.istft(s, length=-1).shape == (2, 0)
    assert mx.fft.istft(s, window=mx.ones(16, dtype=mx.float64)).dtype == mx.float64
    # uncovered samples (hop > n_fft, a zero window) come out 0, not NaN
    assert not np.isnan(np.array(mx.fft.istft(s, hop_length=20))).any()
    np.testing.assert_array_equal(mx.fft.istft(s, window=mx.zeros(16)), np.zeros((2, 48)))


# -- transforms ---------------------------------------------------------------------------
def test_grad_matches_mlx_convention():
    """Complex cotangents are dL/dRe + i dL/dIm (MLX's): grad of sum |fft(z)|^2 is 2 N z."""
    z = np.array([1 + 2j, 3 - 1j, 0.5j, -2], np.complex64)
    g = mx.grad(lambda z: (mx.abs(mx.fft.fft(z)) ** 2).sum())(mx.array(z))
    assert g.dtype == mx.complex64
    np.testing.assert_allclose(g, 2 * 4 * z, rtol=1e-5)
    x = np.arange(5, dtype=np.float32)
    g = mx.grad(lambda x: mx.real(mx.fft.fft(x, n=7) * mx.array(np.arange(7) + 1j)).sum())(
        mx.array(x))
    w = np.arange(7) + 1j
    want = np.real(np.fft.fft(np.eye(7)[:5], axis=1) @ w)  # the real-linear map's transpose
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_irfft_odd_size_under_jvp_and_vmap():
    """MLX's jvp and vmap of irfft assume an even output (2 (m - 1)); braze keeps `n`."""
    rng = np.random.default_rng(2)
    z = mx.array((rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)))
                 .astype(np.complex64))
    f = lambda v: mx.fft.irfft(v, n=7)  # noqa: E731
    out, (t,) = mx.jvp(f, [z], [z])
    assert out[0].shape == t.shape == (3, 7)
    np.testing.assert_allclose(t, f(z), rtol=1e-6, atol=1e-6)
    v = mx.vmap(f)(z)
    np.testing.assert_allclose(v, np.stack([np.array(f(z[i])) for i in range(3)]), atol=1e-6)


def test_vmap_shifts_the_transformed_axes():
    a = mx.array(np.random.default_rng(3).standard_normal((3, 4, 6)).astype(np.float32))
    for axis in (0, 1):
        f = lambda x, ax=axis: mx.fft.rfftn(x, axes=(1 - ax, ax))  # noqa: E731
        want = np.stack([np.array(f(a[:, i])) for i in range(4)], axis=1)
        np.testing.assert_allclose(mx.vmap(f, in_axes=1, out_axes=1)(a), want, atol=1e-5)


def test_compile():
    def f(x):
        return mx.abs(mx.fft.irfft(mx.fft.rfft(x * 2.0) * 0.5, n=x.shape[-1])) + 1.0

    x = mx.array(np.random.default_rng(4).standard_normal((3, 9)).astype(np.float32))
    np.testing.assert_allclose(mx.compile(f)(x), f(x), rtol=1e-6, atol=1e-6)
    g = mx.compile(mx.grad(lambda x: mx.fft.fft(x).real.sum()))(x)
    want = np.zeros((3, 9), np.float32)
    want[:, 0] = 9.0  # d/dx sum_k Re F(x)_k = sum_k cos(2 pi k j / n) = n [j == 0]
    np.testing.assert_allclose(g, want, atol=1e-5)


def test_fft_names_are_not_top_level():
    import braze.core.fft as ns
    for name in ns.__all__:
        assert name == "fft" or not hasattr(mx, name), name
    assert mx.fft is ns


def test_shapeless_compile_is_refused_as_in_mlx():
    """FFT's sizes are baked at trace time (cut/pad, irfft's n); MLX refuses it shapeless too."""
    f = mx.compile(lambda x: mx.fft.fft(x) * 2, shapeless=True)
    with pytest.raises(ValueError, match="FFT"):
        f(mx.arange(4.0))
