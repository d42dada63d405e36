"""`mx.fft`: MLX's Fast Fourier Transform namespace (re-exported from braze._src.ops.fft)."""
from braze._src.ops.fft import (  # noqa: F401
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    irfft,
    irfft2,
    irfftn,
    istft,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
    stft,
)

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "ifft", "ifft2", "ifftn", "ifftshift",
           "irfft", "irfft2", "irfftn", "istft", "rfft", "rfft2", "rfftfreq", "rfftn", "stft"]
