"""Sizes of the Llama-style decoder of `programs.py`, shared by the MLX-API and torch code."""

LLM_SIZES = {
    # dims, layers, heads, kv heads, hidden (SwiGLU), vocab
    "tiny": dict(dims=64, layers=2, heads=4, kv_heads=2, hidden=172, vocab=1024),
    "small": dict(dims=1024, layers=8, heads=16, kv_heads=4, hidden=2816, vocab=32000),
}
PREFILL, DECODE = 128, 128  # prompt tokens, generated tokens (16 with --quick)
QUICK_DECODE = 16
