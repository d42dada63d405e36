"""Type aliases of the public ops' signatures (MLX's stubs spell them the same way)."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from ..array import array
from ..device import Device, Stream
from ..dtypes import Dtype

__all__ = ["ArrayLike", "Axes", "Dtype", "Scalar", "Shape", "StreamOrDevice", "array"]

#: a Python scalar, as the ops accept in place of an array (it takes the array's dtype)
Scalar = Union[bool, int, float, complex]
#: what an op converts with `mx.array(...)`: an array, a scalar, a NumPy array, nested lists
ArrayLike = Union[array, Scalar, np.ndarray, list, tuple]
#: `stream=`: a stream, a device (its default stream) or None (the default stream)
StreamOrDevice = Union[Stream, Device, None]
#: an axis, several axes, or None (all of them)
Axes = Union[int, Sequence[int], None]
#: a shape: a sequence of ints (an int where the op accepts one)
Shape = Union[int, Sequence[int]]
