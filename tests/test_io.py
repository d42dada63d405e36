"""mx.save / mx.load / mx.save_gguf / safetensors / npz: round trips, open files, lazy reads,
corrupt files, atomic writes, and files exchanged with real MLX."""
import io
import os
import struct

import ml_dtypes
import numpy as np
import pytest

import braze.core as mx
from braze._src.io import _files

ALL = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
       "float16", "bfloat16", "float32", "float64", "complex64"]


def _sample(dt, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-20, 20, size=shape)
    if dt == "bool_":
        return mx.array(x > 0)
    if dt == "complex64":
        return mx.array((x + 1j * x[::-1]).astype(np.complex64))
    if dt.startswith("uint"):
        x = np.abs(x)
    return mx.array(x, dtype=getattr(mx, dt))


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    bits = [np.ascontiguousarray(np.asarray(x)).view(np.uint8) for x in (a, b)]
    assert np.array_equal(*bits)


@pytest.mark.parametrize("dt", ALL)
def test_npy_round_trip_every_dtype(tmp_path, dt):
    a = _sample(dt)
    mx.save(tmp_path / "a", a)  # ".npy" appended
    _same(mx.load(tmp_path / "a.npy"), a)
    if dt != "bfloat16":
        assert np.array_equal(np.load(tmp_path / "a.npy"), np.asarray(a))


def test_npy_open_files_and_numpy_files(tmp_path):
    a = _sample("float32", (2, 3, 5))
    buf = io.BytesIO()
    mx.save(buf, a)
    buf.seek(0)
    assert np.array_equal(np.load(buf), np.asarray(a))
    with open(tmp_path / "x.npy", "wb") as f:
        mx.save(f, a)
    with open(tmp_path / "x.npy", "rb") as f:
        back = mx.load(f)
    _same(back, a)  # read at once: the file is closed now
    # column-major and big-endian files written by NumPy
    x = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    np.save(tmp_path / "f.npy", x)
    assert np.array_equal(np.asarray(mx.load(tmp_path / "f.npy")), x)
    np.save(tmp_path / "be.npy", np.arange(5, dtype=">f4"))
    be = mx.load(tmp_path / "be.npy")
    assert be.dtype == mx.float32 and np.array_equal(np.asarray(be), np.arange(5))
    np.save(tmp_path / "d.npy", np.float64([0.1, 0.2]))
    assert mx.load(tmp_path / "d.npy").dtype == mx.float64


def test_npy_load_is_lazy_and_a_truncated_file_fails_at_eval(tmp_path):
    p = tmp_path / "t.npy"
    np.save(p, np.arange(16, dtype=np.float32))
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 8)
    out = mx.load(p, stream=mx.cpu)  # the header is fine: no error yet
    with pytest.raises(RuntimeError, match=r"\[load\].*truncated"):
        mx.eval(out)
    # a consumer of the failed load fails too, and a later good load still works
    with pytest.raises(RuntimeError):
        mx.eval(mx.load(p) + 1)
    np.save(p, np.ones(3, np.float32))
    assert mx.load(p).tolist() == [1.0, 1.0, 1.0]


def test_npy_bad_files(tmp_path):
    p = tmp_path / "bad.npy"
    p.write_bytes(b"not a numpy file at all")
    with pytest.raises(ValueError, match=r"\[load\] Invalid \.npy header"):
        mx.load(p)
    np.save(tmp_path / "c.npy", np.ones(2, np.complex128))
    with pytest.raises(ValueError, match=r"\[load\].*unsupported dtype '<c16'"):
        mx.load(tmp_path / "c.npy")
    with pytest.raises(FileNotFoundError, match=r"\[load\]"):
        mx.load(tmp_path / "missing.npy")
    with pytest.raises(ValueError, match=r"\[load\] Unknown file format 'txt'"):
        mx.load(tmp_path / "a.txt")
    with pytest.raises(ValueError, match=r"\[load\] Could not infer"):
        mx.load(tmp_path / "noext")
    with pytest.raises(ValueError, match=r"\[load\] Metadata is not supported"):
        mx.load(tmp_path / "c.npy", return_metadata=True)
    with pytest.raises(TypeError, match=r"\[save\] Expected an array"):
        mx.save(tmp_path / "x.npy", [1, 2])
    with pytest.raises(TypeError, match=r"\[load\] Expected a file path"):
        mx.load(3)


def test_save_is_atomic_when_interrupted(tmp_path, monkeypatch):
    """Ctrl-C (or a full disk) while writing leaves the old file whole and no temporary."""
    p = tmp_path / "w.npy"
    mx.save(p, mx.arange(4))

    def interrupted(f, x, allow_pickle):
        f.write(b"\x93NUMPY partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np.lib.format, "write_array", interrupted)
    with pytest.raises(KeyboardInterrupt):
        mx.save(p, mx.zeros(1000))
    monkeypatch.undo()
    assert mx.load(p).tolist() == [0, 1, 2, 3]
    assert sorted(os.listdir(tmp_path)) == ["w.npy"]


def test_safetensors_open_files_fp8_and_lazy(tmp_path):
    arrays = {"a": _sample("bfloat16"), "b": _sample("int64", (5,)),
              "c": mx.broadcast_to(mx.array([1, 2]), (4, 2)), "e": mx.zeros((0, 3))}
    with open(tmp_path / "m.safetensors", "wb") as f:
        mx.save_safetensors(f, arrays, {"format": "mlx"})
    with open(tmp_path / "m.safetensors", "rb") as f:
        back, meta = mx.load(f, return_metadata=True)
    assert meta == {"format": "mlx"}
    for k in arrays:
        _same(back[k], arrays[k])
    lazy = mx.load(tmp_path / "m.safetensors")
    assert lazy["a"]._prim is not None and type(lazy["a"]._prim).__name__ == "Load"
    for k in arrays:
        _same(lazy[k], arrays[k])
    with pytest.raises(TypeError, match="Metadata must map strings"):
        mx.save_safetensors(tmp_path / "x.safetensors", {"a": mx.ones(2)}, {"n": 0})
    # fp8 tensors load as their bytes (uint8), as in MLX
    header = b'{"t":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[0,3]}}'
    header += b" " * (-(8 + len(header)) % 8)
    raw = struct.pack("<Q", len(header)) + header + bytes([0x00, 0x7E, 0xB6])
    (tmp_path / "f8.safetensors").write_bytes(raw)
    t = mx.load(tmp_path / "f8.safetensors")["t"]
    assert t.dtype == mx.uint8 and t.tolist() == [0, 0x7E, 0xB6]


def test_safetensors_corrupt_files(tmp_path):
    p = tmp_path / "c.safetensors"
    p.write_bytes(b"\x05")
    with pytest.raises(ValueError, match="too short"):
        mx.load(p)
    p.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="exceeds the file size"):
        mx.load(p)
    header = b'{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
    p.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(ValueError, match="do not match its shape"):
        mx.load(p)


def test_npz_open_files(tmp_path):
    buf = io.BytesIO()
    mx.savez(buf, _sample("float16"), w=_sample("bfloat16"))
    buf.seek(0)
    buf.name = "x.npz"
    back = mx.load(buf)
    _same(back["arr_0"], _sample("float16"))
    _same(back["w"], _sample("bfloat16"))
    with pytest.raises(ValueError, match="Cannot use un-named variables"):
        mx.savez_compressed(tmp_path / "z", mx.ones(1), arr_0=mx.ones(1))


@pytest.mark.parametrize("dt", ["float32", "float16", "int8", "int16", "int32"])
def test_gguf_round_trip(tmp_path, dt):
    arrays = {"w": _sample(dt, (4, 6, 3)), "v": _sample(dt, (1,)),
              "t": mx.arange(6).reshape(2, 3).T.astype(getattr(mx, dt))}
    mx.save_gguf(tmp_path / "m", arrays)  # ".gguf" appended
    back = mx.load(tmp_path / "m.gguf")
    assert sorted(back) == sorted(arrays)
    for k in arrays:
        _same(back[k], arrays[k])


def test_gguf_metadata(tmp_path):
    p = tmp_path / "m.gguf"
    meta = {"s": "text", "l": ["a", "bc", ""], "i": mx.array([1, 2, 3]),
            "f": mx.array(1.5), "u": mx.array(7, mx.uint64), "b": mx.array([True, False])}
    mx.save_gguf(p, {"x": mx.ones((2, 2), mx.int32)}, meta)
    arrays, back = mx.load(p, return_metadata=True)
    assert arrays["x"].tolist() == [[1, 1], [1, 1]]
    assert back["s"] == "text" and back["l"] == ["a", "bc", ""]
    for k in ("i", "f", "u", "b"):
        assert back[k].dtype == meta[k].dtype and back[k].shape == meta[k].shape
        assert mx.array_equal(back[k], meta[k])
    for bad in (mx.array(1, mx.float16), mx.array([1.0], mx.bfloat16), mx.zeros((2, 2)),
                mx.zeros((0,))):
        with pytest.raises(ValueError, match=r"\[save_gguf\]"):
            mx.save_gguf(p, {}, {"m": bad})
    with pytest.raises(ValueError, match=r"\[save_gguf\].*dtype float64 is not supported"):
        mx.save_gguf(p, {"x": mx.zeros(2, mx.float64)})


def _write_gguf(path, gtype, dims, blocks, kv=b"", n_kv=0):
    name = b"blk.weight"
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, n_kv) + kv)
        f.write(struct.pack("<Q", len(name)) + name)
        f.write(struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, gtype, 0))
        f.write(b"\0" * (-f.tell() % 32))
        f.write(blocks.tobytes())


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0"])
def test_gguf_quantized_tensors_load_as_affine(tmp_path, qtype):
    rows, cols = 3, 64
    nb = rows * cols // 32
    rng = np.random.default_rng(1)
    # powers of two and quarters: every dequantized value is exact in float16
    d = rng.choice([0.125, 0.25, 0.5], (nb, 1)).astype(np.float16)
    m = (rng.integers(-8, 8, (nb, 1)) / 4).astype(np.float16)
    q4 = rng.integers(0, 16, (nb, 32)).astype(np.uint8)
    q8 = rng.integers(-128, 128, (nb, 32)).astype(np.int8)
    nibbles = (q4[:, :16] | (q4[:, 16:] << 4)).astype(np.uint8)
    f32 = d.astype(np.float32)
    gtype, bits, blocks, want = {
        "Q4_0": (2, 4, np.hstack([d.view(np.uint8), nibbles]), f32 * (q4 - 8.0)),
        "Q4_1": (3, 4, np.hstack([d.view(np.uint8), m.view(np.uint8), nibbles]),
                 f32 * q4 + m.astype(np.float32)),
        "Q8_0": (8, 8, np.hstack([d.view(np.uint8), q8.view(np.uint8)]), f32 * q8),
    }[qtype]
    _write_gguf(tmp_path / "q.gguf", gtype, (cols, rows), blocks)
    out = mx.load(tmp_path / "q.gguf")
    assert out["blk.weight"].dtype == mx.uint32
    assert out["blk.scales"].shape == out["blk.biases"].shape == (rows, cols // 32)
    deq = mx.dequantize(out["blk.weight"], out["blk.scales"], out["blk.biases"],
                        group_size=32, bits=bits)
    assert np.array_equal(np.asarray(deq.astype(mx.float32)), want.reshape(rows, cols))


def test_gguf_corrupt_and_unsupported(tmp_path):
    p = tmp_path / "c.gguf"
    p.write_bytes(b"GGML" + b"\0" * 40)
    with pytest.raises(ValueError, match="not a GGUF file"):
        mx.load(p)
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 0))
    with pytest.raises(ValueError, match="ends inside its header"):
        mx.load(p)
    _write_gguf(p, 12, (256, 1), np.zeros(10, np.uint8))  # Q4_K: not supported (as MLX)
    with pytest.raises(ValueError, match="GGML type 12"):
        mx.load(p)
    _write_gguf(p, 0, (64, 2), np.zeros(10, np.float32))  # too little data
    with pytest.raises(ValueError, match="extends past the end"):
        mx.load(p)


def test_gguf_alignment_key(tmp_path):
    """A file that sets general.alignment has its data section there."""
    key = b"general.alignment"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, 64)
    name = b"x"
    p = tmp_path / "a.gguf"
    with open(p, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv)
        f.write(struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, 4, 0, 0))
        f.write(b"\0" * (-f.tell() % 64))
        f.write(np.arange(4, dtype=np.float32).tobytes())
    assert mx.load(p)["x"].tolist() == [0, 1, 2, 3]


def test_lazy_read_helper_reads_big_endian(tmp_path):
    p = tmp_path / "raw"
    p.write_bytes(np.arange(3, dtype=">i4").tobytes())
    x = _files.lazy_read(str(p), 0, (3,), mx.int32, swap=True)
    assert x.tolist() == [0, 1, 2]
    assert ml_dtypes  # bfloat16 available for the dtype list above


# -- files exchanged with real MLX --------------------------------------------------------------
mlx = pytest.importorskip("mlx.core")


@pytest.mark.parametrize("fmt", ["npy", "safetensors", "gguf", "npz"])
def test_files_exchange_with_mlx(tmp_path, fmt):
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    ours, theirs = tmp_path / f"b.{fmt}", tmp_path / f"m.{fmt}"
    b, m = mx.array(x), mlx.array(x)
    save_b = {"npy": lambda p: mx.save(p, b), "npz": lambda p: mx.savez(p, w=b),
              "safetensors": lambda p: mx.save_safetensors(p, {"w": b}, {"k": "v"}),
              "gguf": lambda p: mx.save_gguf(p, {"w": b}, {"k": "v", "n": mx.array([1, 2])})}
    save_m = {"npy": lambda p: mlx.save(str(p), m), "npz": lambda p: mlx.savez(str(p), w=m),
              "safetensors": lambda p: mlx.save_safetensors(str(p), {"w": m}, {"k": "v"}),
              "gguf": lambda p: mlx.save_gguf(str(p), {"w": m},
                                              {"k": "v", "n": mlx.array([1, 2])})}
    save_b[fmt](ours)
    save_m[fmt](theirs)
    meta = fmt in ("safetensors", "gguf")
    from_mlx = mx.load(theirs, return_metadata=meta)
    from_braze = mlx.load(str(ours), return_metadata=meta)
    if meta:
        (from_mlx, meta_b), (from_braze, meta_m) = from_mlx, from_braze
        assert meta_b["k"] == meta_m["k"] == "v"
    get = (lambda d: d) if fmt == "npy" else (lambda d: d["w"])
    assert np.array_equal(np.asarray(get(from_mlx)), x)
    assert np.array_equal(np.array(get(from_braze)), x)
