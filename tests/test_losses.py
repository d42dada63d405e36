"""nn.losses against NumPy references (float64), every reduction, and bad input."""
import math

import numpy as np
import pytest

import braze.core as mx
import braze.nn as nn

L = nn.losses
RNG = np.random.default_rng(0)
LOGITS = (RNG.standard_normal((6, 5)) * 2).astype(np.float32)
IDX = RNG.integers(0, 5, 6).astype(np.int32)
PRED = RNG.standard_normal((6, 5)).astype(np.float32)
TGT = (RNG.standard_normal((6, 5)) * 1.5).astype(np.float32)
PROB = RNG.uniform(0.05, 0.95, (6, 5)).astype(np.float32)
BIN = (RNG.random((6, 5)) > 0.5).astype(np.float32)


def A(x):
    return mx.array(x)


def D(x):
    return np.asarray(x, dtype=np.float64)


def red(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def log_softmax(x, axis=-1):
    x = D(x)
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def close(got, want, tol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_class_indices(reduction):
    want = -log_softmax(LOGITS)[np.arange(6), IDX]
    close(L.cross_entropy(A(LOGITS), A(IDX), reduction=reduction), red(want, reduction))


def test_cross_entropy_default_reduction_is_none_and_axis():
    assert L.cross_entropy(A(LOGITS), A(IDX)).shape == (6,)
    want = -log_softmax(LOGITS.T, axis=0)[IDX, np.arange(6)]
    close(L.cross_entropy(A(LOGITS.T), A(IDX), axis=0), want)


@pytest.mark.parametrize("ls", [0.1, 0.4])
def test_cross_entropy_label_smoothing(ls):
    # smoothed target: (1 - ls) one-hot + ls / K uniform
    K = 5
    onehot = np.eye(K)[IDX]
    target = (1 - ls) * onehot + ls / K
    want = -(target * log_softmax(LOGITS)).sum(-1)
    close(L.cross_entropy(A(LOGITS), A(IDX), label_smoothing=ls), want)


def test_cross_entropy_probability_targets_and_weights():
    probs = np.exp(log_softmax(PRED))
    want = -(probs * log_softmax(LOGITS)).sum(-1)
    close(L.cross_entropy(A(LOGITS), A(probs.astype(np.float32))), want)
    w = RNG.random(6).astype(np.float32)
    close(L.cross_entropy(A(LOGITS), A(IDX), weights=A(w), reduction="sum"),
          (w * -log_softmax(LOGITS)[np.arange(6), IDX]).sum())
    # label smoothing with probability targets: (1 - ls) * CE(p) + ls * mean(-log_softmax)
    ls = 0.3
    want = (1 - ls) * (-(probs * log_softmax(LOGITS)).sum(-1)) + ls * \
        (-log_softmax(LOGITS)).mean(-1)
    close(L.cross_entropy(A(LOGITS), A(probs.astype(np.float32)), label_smoothing=ls), want)


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    g = mx.grad(lambda z: L.cross_entropy(z, A(IDX), reduction="sum"))(A(LOGITS))
    close(g, np.exp(log_softmax(LOGITS)) - np.eye(5)[IDX])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    z = D(LOGITS)
    p = 1 / (1 + np.exp(-z))
    want = -(BIN * np.log(p) + (1 - BIN) * np.log(1 - p))
    close(L.binary_cross_entropy(A(LOGITS), A(BIN), reduction=reduction), red(want, reduction),
          tol=1e-4)
    want = -(BIN * np.log(D(PROB)) + (1 - BIN) * np.log(1 - D(PROB)))
    close(L.binary_cross_entropy(A(PROB), A(BIN), with_logits=False, reduction=reduction),
          red(want, reduction), tol=1e-4)


def test_binary_cross_entropy_defaults_clipping_and_weights():
    assert L.binary_cross_entropy(A(LOGITS), A(BIN)).shape == ()  # default: mean
    # log(0) is clipped at -100
    got = L.binary_cross_entropy(A(np.array([0.0, 1.0], np.float32)),
                                 A(np.array([1.0, 0.0], np.float32)), with_logits=False,
                                 reduction="none")
    close(got, [100.0, 100.0])
    w = RNG.random((6, 5)).astype(np.float32)
    z = D(LOGITS)
    want = (w * (np.log1p(np.exp(z)) - z * BIN)).mean()
    close(L.binary_cross_entropy(A(LOGITS), A(BIN), weights=A(w)), want, tol=1e-4)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction):
    d = D(PRED) - D(TGT)
    ad = np.abs(d)
    cases = {
        "mse_loss": (L.mse_loss, d**2, "mean"),
        "l1_loss": (L.l1_loss, ad, "mean"),
        "smooth_l1_loss": (L.smooth_l1_loss, np.where(ad < 1, 0.5 * d**2, ad - 0.5), "mean"),
        "huber_loss": (L.huber_loss, np.where(ad <= 1, 0.5 * d**2, ad - 0.5), "none"),
        "log_cosh_loss": (L.log_cosh_loss, np.log(np.cosh(d)), "none"),
    }
    for name, (fn, want, default) in cases.items():
        close(fn(A(PRED), A(TGT), reduction=reduction), red(want, reduction), tol=1e-5)
        assert fn(A(PRED), A(TGT)).shape == red(want, default).shape, name


def test_smooth_l1_beta_and_huber_delta():
    d = D(PRED) - D(TGT)
    ad = np.abs(d)
    close(L.smooth_l1_loss(A(PRED), A(TGT), beta=0.5, reduction="none"),
          np.where(ad < 0.5, 0.5 * d**2 / 0.5, ad - 0.25))
    close(L.huber_loss(A(PRED), A(TGT), delta=0.7),
          np.where(ad <= 0.7, 0.5 * d**2, 0.7 * (ad - 0.35)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_and_kl_div(reduction):
    lp = log_softmax(LOGITS)
    close(L.nll_loss(A(lp.astype(np.float32)), A(IDX), reduction=reduction),
          red(-lp[np.arange(6), IDX], reduction))
    lq = log_softmax(PRED)
    # KL(q || p) with both given as log-probabilities (inputs = log p, targets = log q)
    want = (np.exp(lq) * (lq - lp)).sum(-1)
    close(L.kl_div_loss(A(lp.astype(np.float32)), A(lq.astype(np.float32)),
                        reduction=reduction), red(want, reduction))


def test_other_losses():
    var = D(PROB)
    d = D(TGT) - D(PRED)
    close(L.gaussian_nll_loss(A(PRED), A(TGT), A(PROB), reduction="none"),
          0.5 * (np.log(var) + d**2 / var), tol=1e-4)
    close(L.gaussian_nll_loss(A(PRED), A(TGT), A(PROB), full=True),
          (0.5 * (np.log(var) + d**2 / var) + 0.5 * math.log(2 * math.pi)).mean(), tol=1e-4)
    neg = RNG.standard_normal((6, 5)).astype(np.float32)
    pos_d = np.sqrt(((D(PRED) - D(TGT)) ** 2).sum(-1) + 1e-6)
    neg_d = np.sqrt(((D(PRED) - D(neg)) ** 2).sum(-1) + 1e-6)
    close(L.triplet_loss(A(PRED), A(TGT), A(neg)), np.maximum(pos_d - neg_d + 1, 0), tol=1e-4)
    y = np.sign(RNG.standard_normal((6, 5))).astype(np.float32)
    close(L.hinge_loss(A(PRED), A(y)), np.maximum(1 - D(PRED) * y, 0))
    cos = (D(PRED) * D(TGT)).sum(1) / (np.linalg.norm(PRED, axis=1) * np.linalg.norm(TGT,
                                                                                      axis=1))
    close(L.cosine_similarity_loss(A(PRED), A(TGT)), cos, tol=1e-5)
    close(L.margin_ranking_loss(A(PRED), A(TGT), A(y), margin=0.2),
          np.maximum(0, -y * (D(PRED) - D(TGT)) + 0.2))


BAD = [
    (lambda: L.cross_entropy(A(LOGITS), A(IDX[:4])), "Targets shape (4,)"),
    (lambda: L.cross_entropy(A(LOGITS), A(IDX), label_smoothing=1.0), "smoothing"),
    (lambda: L.cross_entropy(A(LOGITS), A(IDX), weights=A(np.ones(3, np.float32))),
     "Weights with shape (3,)"),
    (lambda: L.mse_loss(A(PRED), A(TGT[:2])), "(6, 5)"),
    (lambda: L.l1_loss(A(PRED), A(TGT[:2])), "l1_loss"),
    (lambda: L.binary_cross_entropy(A(PRED), A(TGT[:, :2])), "binary_cross_entropy"),
    (lambda: L.smooth_l1_loss(A(PRED), A(TGT.T)), "smooth_l1_loss"),
    (lambda: L.mse_loss(A(PRED), A(TGT), reduction="avg"), "Invalid reduction"),
    (lambda: L.margin_ranking_loss(A(PRED), A(TGT), A(IDX)), "do not match"),
]


@pytest.mark.parametrize("fn,needle", BAD)
def test_bad_input(fn, needle):
    with pytest.raises(ValueError) as e:
        fn()
    assert needle in str(e.value)
