"""Function transformations: vjp, jvp, grad, value_and_grad (autodiff.py) and vmap (vmap.py)."""
