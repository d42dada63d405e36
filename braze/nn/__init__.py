"""braze.nn: MLX's `mlx.nn` (Module, layers, losses, init, value_and_grad).

    import braze.nn as nn      # was: import mlx.nn as nn
"""
from . import init, losses  # noqa: F401
from .layers import *  # noqa: F401,F403
from .layers.base import Module  # noqa: F401
from .utils import average_gradients, checkpoint, value_and_grad  # noqa: F401
