"""Loss functions (MLX's `mlx.nn.losses`): formulas, defaults and `reduction=` exactly as MLX.

Every loss takes `reduction` in {"none", "mean", "sum"}; shape mismatches raise ValueError
naming the loss and both shapes.
"""
from __future__ import annotations

import math
from typing import Literal, Optional

import braze.core as mx

__all__ = ["cross_entropy", "binary_cross_entropy", "l1_loss", "mse_loss", "nll_loss",
           "gaussian_nll_loss", "kl_div_loss", "smooth_l1_loss", "triplet_loss", "hinge_loss",
           "huber_loss", "log_cosh_loss", "cosine_similarity_loss", "margin_ranking_loss"]

Reduction = Literal["none", "mean", "sum"]
_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction: Reduction = "none"):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"Invalid reduction. Must be one of {_REDUCTIONS}.")
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    return loss


def _same_shape(name, a, b, an="Predictions", bn="targets"):
    if a.shape != b.shape:
        raise ValueError(f"[{name}] {an} shape {a.shape} does not match {bn} shape {b.shape}.")


def _weighted(name, loss, weights):
    if weights is not None:
        if weights.shape != loss.shape:
            raise ValueError(f"[{name}] Weights with shape {weights.shape} is not the same as "
                             f"output loss with shape {loss.shape}.")
        loss = loss * weights
    return loss


def cross_entropy(logits: mx.array, targets: mx.array, weights: Optional[mx.array] = None,
                  axis: int = -1, label_smoothing: float = 0.0,
                  reduction: Reduction = "none") -> mx.array:
    """Cross entropy of `logits` against class indices (shape of logits without `axis`) or
    class probabilities (shape of logits), with optional label smoothing."""
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"[cross_entropy] Label smoothing must be in [0, 1), got "
                         f"{label_smoothing}.")
    probs = targets.ndim == logits.ndim
    dropped = list(logits.shape)
    if logits.ndim:
        dropped.pop(axis)
    if (probs and targets.shape != logits.shape) or (not probs and
                                                      targets.shape != tuple(dropped)):
        raise ValueError(f"[cross_entropy] Targets shape {targets.shape} does not match logits "
                         f"shape {logits.shape}.")
    logits = logits - mx.stop_gradient(mx.max(logits, axis=axis, keepdims=True))
    if probs:
        score = mx.sum(logits * targets, axis=axis)
    else:
        score = mx.take_along_axis(logits, mx.expand_dims(targets, axis), axis).squeeze(axis)
    lse = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        adjusted = (1 - label_smoothing) * score
        smoothed = -logits.mean(axis=axis) * label_smoothing
        loss = lse - adjusted + smoothed
    else:
        loss = lse - score
    return _reduce(_weighted("cross_entropy", loss, weights), reduction)


def binary_cross_entropy(inputs: mx.array, targets: mx.array, weights: Optional[mx.array] = None,
                         with_logits: bool = True, reduction: Reduction = "mean") -> mx.array:
    """Binary cross entropy of logits (default) or probabilities (`with_logits=False`, logs
    clipped at -100)."""
    _same_shape("binary_cross_entropy", inputs, targets, "Inputs")
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_p = mx.clip(mx.log(inputs), -100, None)
        log_1mp = mx.clip(mx.log(1 - inputs), -100, None)
        loss = -(targets * log_p + (1 - targets) * log_1mp)
    return _reduce(_weighted("binary_cross_entropy", loss, weights), reduction)


def l1_loss(predictions: mx.array, targets: mx.array, reduction: Reduction = "mean") -> mx.array:
    """|predictions - targets|."""
    _same_shape("l1_loss", predictions, targets)
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions: mx.array, targets: mx.array, reduction: Reduction = "mean") -> mx.array:
    """(predictions - targets)^2."""
    _same_shape("mse_loss", predictions, targets)
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs: mx.array, targets: mx.array, axis: int = -1,
             reduction: Reduction = "none") -> mx.array:
    """-inputs[target] along `axis` (inputs are log-probabilities)."""
    loss = -mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis).squeeze(axis)
    return _reduce(loss, reduction)


def gaussian_nll_loss(inputs: mx.array, targets: mx.array, vars: mx.array, full: bool = False,
                      eps: float = 1e-6, reduction: Reduction = "mean") -> mx.array:
    """Negative Gaussian log likelihood with predicted means `inputs` and variances `vars`."""
    _same_shape("gaussian_nll_loss", inputs, targets, "Inputs")
    _same_shape("gaussian_nll_loss", inputs, vars, "Inputs", "vars")
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(inputs: mx.array, targets: mx.array, axis: int = -1,
                reduction: Reduction = "none") -> mx.array:
    """sum(exp(targets) * (targets - inputs)) along `axis`; both are log-probabilities."""
    loss = mx.sum(mx.exp(targets) * (targets - inputs), axis)
    return _reduce(loss, reduction)


def smooth_l1_loss(predictions: mx.array, targets: mx.array, beta: float = 1.0,
                   reduction: Reduction = "mean") -> mx.array:
    """0.5 d^2 / beta where d = |p - t| < beta, else d - 0.5 beta."""
    _same_shape("smooth_l1_loss", predictions, targets)
    diff = mx.abs(predictions - targets)
    loss = mx.where(diff < beta, 0.5 * mx.square(diff) / beta, mx.abs(diff) - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(anchors: mx.array, positives: mx.array, negatives: mx.array, axis: int = -1,
                 p: int = 2, margin: float = 1.0, eps: float = 1e-6,
                 reduction: Reduction = "none") -> mx.array:
    """max(||a - p||_p - ||a - n||_p + margin, 0)."""
    pos = mx.power(mx.power(mx.abs(anchors - positives), p).sum(axis) + eps, 1.0 / p)
    neg = mx.power(mx.power(mx.abs(anchors - negatives), p).sum(axis) + eps, 1.0 / p)
    return _reduce(mx.maximum(pos - neg + margin, 0), reduction)


def hinge_loss(inputs: mx.array, targets: mx.array, reduction: Reduction = "none") -> mx.array:
    """max(1 - inputs * targets, 0)."""
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(inputs: mx.array, targets: mx.array, delta: float = 1.0,
               reduction: Reduction = "none") -> mx.array:
    """0.5 e^2 for |e| <= delta, delta (|e| - 0.5 delta) beyond."""
    errors = inputs - targets
    abs_errors = mx.abs(errors)
    quadratic = mx.minimum(abs_errors, delta)
    linear = abs_errors - quadratic
    return _reduce(0.5 * quadratic**2 + delta * linear, reduction)


def log_cosh_loss(inputs: mx.array, targets: mx.array, reduction: Reduction = "none") -> mx.array:
    """log(cosh(inputs - targets))."""
    errors = inputs - targets
    return _reduce(mx.logaddexp(errors, -errors) - math.log(2), reduction)


def cosine_similarity_loss(x1: mx.array, x2: mx.array, axis: int = 1, eps: float = 1e-8,
                           reduction: Reduction = "none") -> mx.array:
    """Cosine similarity of x1 and x2 along `axis` (MLX returns the similarity itself)."""
    n1 = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    n2 = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(n1 * n2, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(inputs1: mx.array, inputs2: mx.array, targets: mx.array,
                        margin: float = 0.0, reduction: Reduction = "none") -> mx.array:
    """max(0, -targets * (inputs1 - inputs2) + margin)."""
    if not inputs1.shape == inputs2.shape == targets.shape:
        raise ValueError(f"[margin_ranking_loss] The shapes of the arguments do not match. The "
                         f"provided shapes are inputs1.shape={inputs1.shape}, "
                         f"inputs2.shape={inputs2.shape}, and targets.shape={targets.shape}.")
    return _reduce(mx.maximum(0, -targets * (inputs1 - inputs2) + margin), reduction)
