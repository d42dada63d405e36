"""Train an MLP (or `--model cnn`) on scikit-learn's 8x8 handwritten digits with a compiled
training step. This is README's demo: the code lives in braze/demo.py so that
`python -m braze.demo` runs it from an installed braze; this file runs the same thing.

    python examples/mnist_digits.py [--model cnn] [--epochs N] [--plot loss.png]
"""
from braze.demo import main

if __name__ == "__main__":
    main()
