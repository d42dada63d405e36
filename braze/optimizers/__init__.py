"""`braze.optimizers`: MLX's `mlx.optimizers` (optimizers, schedules, clip_grad_norm)."""
from braze.optimizers.optimizers import *  # noqa: F401,F403
from braze.optimizers.optimizers import __all__ as _opt_all
from braze.optimizers.schedulers import *  # noqa: F401,F403
from braze.optimizers.schedulers import __all__ as _sched_all

__all__ = list(_opt_all) + list(_sched_all)
