"""Recurrent layers RNN, GRU and LSTM over (..., L, features) inputs (MLX's parameter names,
shapes, gate order and initialisation U(-1/sqrt(hidden), 1/sqrt(hidden)))."""
from __future__ import annotations

import math
from typing import Callable, Optional

import braze.core as mx

from .. import _random
from .activations import tanh
from .base import Module
from .linear import check_features

__all__ = ["RNN", "GRU", "LSTM"]


def _u(scale, shape):
    return _random.uniform(-scale, scale, shape)


class RNN(Module):
    """Elman RNN: h_t = nonlinearity(x_t Wxh^T + h_{t-1} Whh^T + bias)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: Optional[Callable] = None):
        super().__init__()
        self.nonlinearity = nonlinearity or tanh
        if not callable(self.nonlinearity):
            raise ValueError(f"Nonlinearity must be callable. Current value: {nonlinearity}.")
        s = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _u(s, (hidden_size, input_size))
        self.Whh = _u(s, (hidden_size, hidden_size))
        self.bias = _u(s, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
                f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}")

    def __call__(self, x, hidden=None):
        check_features("RNN", x, self.Wxh.shape[1], "input_size")
        x = mx.addmm(self.bias, x, self.Wxh.T) if self.bias is not None else x @ self.Wxh.T
        out = []
        for t in range(x.shape[-2]):
            h = x[..., t, :]
            if hidden is not None:
                h = mx.addmm(h, hidden, self.Whh.T)
            hidden = self.nonlinearity(h)
            out.append(hidden)
        return mx.stack(out, axis=-2)


class GRU(Module):
    """Gated recurrent unit (gates r, z, n in that order in Wx / Wh)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        s = 1.0 / math.sqrt(hidden_size)
        self.Wx = _u(s, (3 * hidden_size, input_size))
        self.Wh = _u(s, (3 * hidden_size, hidden_size))
        self.b = _u(s, (3 * hidden_size,)) if bias else None
        self.bhn = _u(s, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self.b is not None}")

    def __call__(self, x, hidden=None):
        check_features("GRU", x, self.Wx.shape[1], "input_size")
        H = self.hidden_size
        x = mx.addmm(self.b, x, self.Wx.T) if self.b is not None else x @ self.Wx.T
        x_rz, x_n = x[..., :-H], x[..., -H:]
        out = []
        for t in range(x.shape[-2]):
            rz = x_rz[..., t, :]
            if hidden is not None:
                hp = hidden @ self.Wh.T
                hp_rz, hp_n = hp[..., :-H], hp[..., -H:]
                if self.bhn is not None:
                    hp_n = hp_n + self.bhn
                rz = rz + hp_rz
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            n = x_n[..., t, :]
            if hidden is not None:
                n = n + r * hp_n
            elif self.bhn is not None:
                n = n + r * self.bhn
            n = mx.tanh(n)
            hidden = (1 - z) * n + z * hidden if hidden is not None else (1 - z) * n
            out.append(hidden)
        return mx.stack(out, axis=-2)


class LSTM(Module):
    """Long short-term memory (gates i, f, g, o in that order); returns (hidden, cell) for
    every step."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        s = 1.0 / math.sqrt(hidden_size)
        self.Wx = _u(s, (4 * hidden_size, input_size))
        self.Wh = _u(s, (4 * hidden_size, hidden_size))
        self.bias = _u(s, (4 * hidden_size,)) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self.bias is not None}")

    def __call__(self, x, hidden=None, cell=None):
        check_features("LSTM", x, self.Wx.shape[1], "input_size")
        x = mx.addmm(self.bias, x, self.Wx.T) if self.bias is not None else x @ self.Wx.T
        hs, cs = [], []
        for t in range(x.shape[-2]):
            ifgo = x[..., t, :]
            if hidden is not None:
                ifgo = mx.addmm(ifgo, hidden, self.Wh.T)
            i, f, g, o = mx.split(ifgo, 4, axis=-1)
            i, f, g, o = mx.sigmoid(i), mx.sigmoid(f), mx.tanh(g), mx.sigmoid(o)
            cell = f * cell + i * g if cell is not None else i * g
            hidden = o * mx.tanh(cell)
            hs.append(hidden)
            cs.append(cell)
        return mx.stack(hs, axis=-2), mx.stack(cs, axis=-2)
