"""MLX's in-place semantics: the array object takes the new value (every reference to it sees
it), while graph nodes built from it earlier keep the old value."""
import numpy as np

import braze.core as mx


def test_setitem_leaves_pending_consumers_on_the_old_value():
    a = mx.zeros((3,))
    c = a * 2
    d = [a + 1]
    a[0] = 5
    assert c.tolist() == [0, 0, 0] and d[0].tolist() == [1, 1, 1]
    assert a.tolist() == [5, 0, 0]


def test_inplace_operator_updates_aliases_not_consumers():
    a = mx.array([1.0, 2.0])
    alias = a
    before = a * 10
    a += 1
    assert alias is a and alias.tolist() == [2.0, 3.0]
    assert before.tolist() == [10.0, 20.0]


def test_value_computed_from_the_array_itself():
    a = mx.arange(6)
    a[0] = a[1] + a[5]
    assert a.tolist() == [6, 1, 2, 3, 4, 5]


def test_long_inplace_chain_without_eval_is_linear():
    x = mx.zeros((4,))
    for _ in range(2000):
        x += 1
    assert x.tolist() == [2000.0] * 4


def test_multi_output_sibling_overwritten():
    q, r = mx.divmod(mx.array([7, 9]), mx.array([2, 4]))
    q_plus = q + 0
    q += 10
    assert q.tolist() == [13, 12] and r.tolist() == [1, 1] and q_plus.tolist() == [3, 2]



def _quantized(w):
    return [np.array(t) for t in mx.quantize(w, bits=4, group_size=32)]


def test_overwritten_sibling_leaves_its_group_in_any_evaluation_order():
    # the object leaves the group; the group computes on, its other members untouched
    w = mx.random.normal((8, 64), key=mx.random.key(1))
    want = _quantized(w)
    for k in range(3):
        for order in ([0, 1, 2], [2, 1, 0], [k]):
            outs = list(mx.quantize(w, bits=4, group_size=32))
            kept = outs[k] * 1
            outs[k][0, 0] += 1  # an update of a lazy member
            for i in order:
                mx.eval(outs[i])
            for i in range(3):
                got = np.array(outs[i])
                ref = want[i].copy()
                if i == k:
                    ref[0, 0] += 1
                np.testing.assert_array_equal(got, ref)
            np.testing.assert_array_equal(np.array(kept), want[k])
    q, r = mx.divmod(mx.array([7, 9]), mx.array([2, 4]))
    r[1] = 5
    assert r.tolist() == [1, 5] and q.tolist() == [3, 2] and r._siblings is None

def test_numpy_view_of_old_buffer_survives_overwrite():
    a = mx.array(np.arange(4, dtype=np.float32))
    view = np.asarray(a)
    a += 1
    np.testing.assert_array_equal(view, [0, 1, 2, 3])  # the old buffer is never written
    assert a.tolist() == [1, 2, 3, 4]


def test_slice_update_behind_a_deep_value_needs_no_heap_search(monkeypatch):
    """`out[:, a:b] += w * frame`, frame a deep lazy graph (mlx-examples encodec's overlap-add
    of decoded frames): the update's own consumer of `out` (the slice read by `+=`) sits two
    nodes from the update and must be found there, not by a search of the whole heap (gc
    referrers: milliseconds a call). Values: NumPy."""
    from braze._src import array as A
    searches, search = [], A._repoint_consumers

    def counted(dst, old):
        searches.append(dst.shape)
        return search(dst, old)

    monkeypatch.setattr(A, "_repoint_consumers", counted)
    rng = np.random.default_rng(0)
    raw = [rng.standard_normal((1, 8, 2)).astype(np.float32) for _ in range(4)]
    frames = []
    for r in raw:  # 400 lazy nodes each
        f = mx.array(r)
        for _ in range(400):
            f = f * 1.0
        frames.append(f)
    out = mx.zeros((1, 8 + 3 * 4, 2))
    want = np.zeros((1, 20, 2), np.float32)
    for i, (f, r) in enumerate(zip(frames, raw)):
        out[:, 4 * i:4 * i + 8] += 0.5 * f
        want[:, 4 * i:4 * i + 8] += 0.5 * r
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert not searches
