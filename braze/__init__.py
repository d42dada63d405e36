"""braze: an MLX-compatible array framework with a JIT compiler. Use `import braze.core as mx`."""

__version__ = "0.1.0"
