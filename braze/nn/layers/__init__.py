"""All of braze.nn's layers (MLX's `mlx.nn.layers`)."""
from .activations import *  # noqa: F401,F403
from .base import Module  # noqa: F401
from .containers import Sequential  # noqa: F401
from .convolution import *  # noqa: F401,F403
from .distributed import *  # noqa: F401,F403
from .dropout import Dropout, Dropout2d, Dropout3d  # noqa: F401
from .embedding import Embedding  # noqa: F401
from .linear import Bilinear, Identity, Linear  # noqa: F401
from .normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm  # noqa: F401
from .pooling import *  # noqa: F401,F403
from .positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding  # noqa: F401
from .quantized import QQLinear, QuantizedEmbedding, QuantizedLinear, quantize  # noqa: F401
from .recurrent import GRU, LSTM, RNN  # noqa: F401
from .transformer import *  # noqa: F401,F403
from .upsample import Upsample, upsample_cubic, upsample_linear, upsample_nearest  # noqa: F401
