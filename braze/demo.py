"""braze's demo: train a classifier on scikit-learn's handwritten digits with a compiled step.

Run with `python -m braze.demo` (needs the `demo` extra: `pip install -e ".[demo]"`).

The script is an MLX training script with the imports changed (`import braze.core as mx`,
`import braze.nn as nn`, `import braze.optimizers as optim`). The training step -- forward pass
with Dropout, backward pass with `nn.value_and_grad`, optimizer update -- is compiled with
`partial(mx.compile, inputs=state, outputs=state)`, where
`state = [model.state, optimizer.state, mx.random.state]`: the model's parameters, the
optimizer's moments and step count, and the random key (which Dropout draws from) are read
and written by the compiled graph on every call.

The data is the 8x8 digits set that ships inside scikit-learn (1797 images, no download).
After training the script prints the test accuracy, then times the compiled and the plain
(uncompiled) step on the same batches after a warm-up and prints the speed-up.

Options: `--model cnn` (a small convolutional net instead of the MLP), `--epochs N`,
`--quick` (fewer epochs and timing rounds, for tests), `--plot out.png` (loss curves, needs
matplotlib), `--seed N`, `--blas-threads N`.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from functools import partial

import numpy as np

import braze.core as mx
import braze.nn as nn
import braze.optimizers as optim
from braze.utils import tree_flatten

# --------------------------------------------------------------------------- data


def load_digits_split(seed: int = 0, test_fraction: float = 0.2):
    """scikit-learn's 8x8 digits, pixels scaled to [0, 1], shuffled and split (stratified by
    class so the test set has every digit in proportion)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit(
            "The demo trains on the handwritten digits that ship with scikit-learn. Install it "
            "with:  pip install -e \".[demo]\"   (or: pip install scikit-learn)") from None
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # (1797, 64), pixel values 0..16
    y = digits.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    train_idx, test_idx = [], []
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(len(idx) * test_fraction))
        test_idx.extend(idx[:n_test])
        train_idx.extend(idx[n_test:])
    train_idx = rng.permutation(np.array(train_idx))
    test_idx = np.sort(np.array(test_idx))
    return x[train_idx], y[train_idx], x[test_idx], y[test_idx]


def batches(x, y, batch_size, rng):
    """Shuffled full batches (a fixed batch shape means one compiled trace)."""
    perm = rng.permutation(len(x))
    for i in range(0, len(x) - batch_size + 1, batch_size):
        idx = perm[i:i + batch_size]
        yield mx.array(x[idx]), mx.array(y[idx])


# --------------------------------------------------------------------------- models


class MLP(nn.Module):
    """64 -> hidden -> hidden -> 10 with ReLU and Dropout."""

    def __init__(self, in_dims: int = 64, hidden: int = 128, num_classes: int = 10,
                 dropout: float = 0.2):
        super().__init__()
        self.layers = [nn.Linear(in_dims, hidden), nn.Linear(hidden, hidden),
                       nn.Linear(hidden, num_classes)]
        self.dropout = nn.Dropout(dropout)

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.dropout(nn.relu(layer(x)))
        return self.layers[-1](x)


class CNN(nn.Module):
    """Two 3x3 convolutions (8x8 -> 4x4 by max-pooling), then an MLP head with Dropout.
    Inputs are flat (B, 64) and reshaped to MLX's channels-last (B, 8, 8, 1)."""

    def __init__(self, channels: int = 16, hidden: int = 64, num_classes: int = 10,
                 dropout: float = 0.2):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.fc1 = nn.Linear(4 * 4 * 2 * channels, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)
        self.dropout = nn.Dropout(dropout)

    def __call__(self, x):
        x = x.reshape(x.shape[0], 8, 8, 1)
        x = nn.relu(self.conv1(x))
        x = self.pool(nn.relu(self.conv2(x)))
        x = self.dropout(x.reshape(x.shape[0], -1))
        x = self.dropout(nn.relu(self.fc1(x)))
        return self.fc2(x)


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def accuracy(model, x, y) -> float:
    model.eval()
    try:
        pred = mx.argmax(model(mx.array(x)), axis=1)
        return (pred == mx.array(y)).astype(mx.float32).mean().item()
    finally:
        model.train()


# --------------------------------------------------------------------------- output


class ProgressBar:
    """A plain-text progress bar: redrawn in place on a terminal, one line per epoch
    otherwise (logs, pipes, pytest)."""

    def __init__(self, total: int, prefix: str, width: int = 24, stream=None):
        self.total, self.prefix, self.width = total, prefix, width
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()

    def _line(self, n, extra):
        filled = int(self.width * n / max(self.total, 1))
        bar = "#" * filled + "." * (self.width - filled)
        return f"{self.prefix} [{bar}] {n:>3}/{self.total} {extra}"

    def update(self, n: int, extra: str = ""):
        if self.tty:
            self.stream.write("\r" + self._line(n, extra))
            self.stream.flush()

    def close(self, extra: str = ""):
        dt = time.perf_counter() - self.t0
        line = self._line(self.total, f"{extra} {dt:5.2f}s")
        self.stream.write(("\r" if self.tty else "") + line + "\n")
        self.stream.flush()


def limit_blas_threads(n: int):
    """Cap the BLAS thread pool (matmuls here are tiny: OpenBLAS's threads only cost time, and
    on a busy 2-core machine they spin against each other, making a 32x128x128 product
    ~1000x slower). A context manager; the previous limits are restored on exit."""
    if n <= 0:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


def save_plot(path, history, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(--plot {path} skipped: matplotlib is not installed; "
              "pip install matplotlib)")
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    steps = np.arange(1, len(history["step_loss"]) + 1)
    ax.plot(steps, history["step_loss"], lw=0.6, alpha=0.45, label="train loss (per step)")
    ep_steps = np.cumsum(history["steps_per_epoch"])
    ax.plot(ep_steps, history["train_loss"], "o-", label="train loss (epoch mean)")
    ax.plot(ep_steps, history["test_loss"], "s-", label="test loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"Saved the loss curves to {path}")
    return True


# --------------------------------------------------------------------------- timing


def _kernels_pending(timeout: float = 120.0) -> bool:
    """Wait for kernels still being built in the background (BRAZE_BACKGROUND_BUILDS: until
    then a compiled call runs its NumPy stand-in); whether there were any."""
    try:
        from braze._src.backends.cpu import background
    except ImportError:  # no cpu backend (Numba missing): nothing builds
        return False
    if background.idle():
        return False
    background.wait(timeout)
    return True


def time_steps(compiled, plain, batch_list, state, rounds: int, warmup: int = 3):
    """Seconds per step of the compiled and the plain step on the same batches.

    Each step is evaluated (`mx.eval(loss, state)`) before the clock stops. The two functions
    alternate step by step, so a change in machine load hits both alike; the result is the
    median time of each and the median of the per-pair ratios (the speed-up)."""
    for fn in (compiled, plain):  # warm-up: first traces, caches, kernel compilation
        for x, y in batch_list[:warmup]:
            mx.eval(fn(x, y), state)
    if _kernels_pending():  # time the native kernels, not the stand-in that runs meanwhile
        for x, y in batch_list[:1]:
            mx.eval(compiled(x, y), state)  # loads them from the disk cache
    tc, tp = [], []
    for r in range(rounds):
        for i, (x, y) in enumerate(batch_list):
            order = ((compiled, tc), (plain, tp)) if (i + r) % 2 == 0 else (
                (plain, tp), (compiled, tc))
            for fn, out in order:
                t = time.perf_counter()
                mx.eval(fn(x, y), state)
                out.append(time.perf_counter() - t)
    tc, tp = np.array(tc), np.array(tp)
    return float(np.median(tc)), float(np.median(tp)), float(np.median(tp / tc))


# --------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m braze.demo", description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--epochs", type=int, default=None,
                   help="training epochs (default: 12 for the MLP, 8 for the CNN; 2 with --quick)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="a short run (for tests): few epochs and a short timing phase")
    p.add_argument("--plot", metavar="PNG", default=None,
                   help="save the loss curves to this file (needs matplotlib)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="cap BLAS threads (0: leave the library's default)")
    p.add_argument("--no-timing", action="store_true",
                   help="skip the compiled-vs-uncompiled timing")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    """Run the demo; returns the accuracy, loss history and timings (used by the tests)."""
    args = parse_args(argv)
    with limit_blas_threads(args.blas_threads):
        return run(args)


def run(args) -> dict:
    epochs = args.epochs if args.epochs is not None else (
        2 if args.quick else (12 if args.model == "mlp" else 8))
    t_start = time.perf_counter()

    # Reproducible: the split and batch order come from NumPy's generator, the weights and
    # the dropout masks from braze's key.
    np_rng = np.random.default_rng(args.seed)
    mx.random.seed(args.seed)
    x_train, y_train, x_test, y_test = load_digits_split(args.seed)

    model = MLP() if args.model == "mlp" else CNN()
    mx.eval(model.parameters())
    n_params = sum(v.size for _, v in tree_flatten(model.trainable_parameters()))
    lr = optim.cosine_decay(args.lr, epochs * (len(x_train) // args.batch_size), args.lr / 20)
    optimizer = optim.AdamW(learning_rate=lr, weight_decay=1e-4)
    # Create the optimizer's state now, so the captured state has its final structure at the
    # first call (otherwise the second call retraces because the state grew).
    optimizer.init(model.trainable_parameters())

    loss_and_grad = nn.value_and_grad(model, loss_fn)

    def train_step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        return loss

    state = [model.state, optimizer.state, mx.random.state]
    compiled_step = partial(mx.compile, inputs=state, outputs=state)(train_step)

    print(f"braze demo: {args.model.upper()} ({n_params:,} parameters) on scikit-learn's 8x8 "
          f"digits: {len(x_train)} train / {len(x_test)} test images")
    print(f"AdamW, cosine-decayed lr {args.lr:g}, batch {args.batch_size}, {epochs} epochs, "
          f"Dropout 0.2, compiled step (model, optimizer and random state captured)")

    history = {"step_loss": [], "train_loss": [], "test_loss": [], "test_acc": [],
               "steps_per_epoch": []}
    steps_per_epoch = len(x_train) // args.batch_size
    x_test_mx, y_test_mx = mx.array(x_test), mx.array(y_test)
    t_train = time.perf_counter()
    for epoch in range(1, epochs + 1):
        bar = ProgressBar(steps_per_epoch, f"epoch {epoch:>2}/{epochs}")
        losses = []
        for i, (x, y) in enumerate(batches(x_train, y_train, args.batch_size, np_rng), 1):
            loss = compiled_step(x, y)
            mx.eval(loss, state)
            losses.append(loss.item())
            if i % 5 == 0 or i == steps_per_epoch:
                bar.update(i, f"loss {np.mean(losses[-5:]):.4f}")
        model.eval()
        test_loss = loss_fn(model, x_test_mx, y_test_mx).item()
        model.train()
        acc = accuracy(model, x_test, y_test)
        history["step_loss"].extend(losses)
        history["train_loss"].append(float(np.mean(losses)))
        history["test_loss"].append(test_loss)
        history["test_acc"].append(acc)
        history["steps_per_epoch"].append(len(losses))
        bar.close(f"loss {np.mean(losses):.4f}  test loss {test_loss:.4f}  "
                  f"test acc {acc * 100:5.1f}%")
    train_time = time.perf_counter() - t_train
    stats = compiled_step.stats()
    final_acc = history["test_acc"][-1]
    print(f"\nTest accuracy: {final_acc * 100:.2f}%  (training: {train_time:.1f}s, "
          f"{epochs * steps_per_epoch} steps; compiled step traced {stats['traces']}x, "
          f"{stats['hits']} cache hits, {stats['primitives_before_fusion']} -> "
          f"{stats['primitives_after_fusion']} primitives after fusion)")

    result = {"accuracy": final_acc, "history": history, "train_time": train_time,
              "traces": stats["traces"], "epochs": epochs}

    if args.plot:
        save_plot(args.plot, history, f"braze demo: {args.model.upper()} on digits")

    if not args.no_timing:
        # Time the compiled and the plain step on the same batches (the model keeps training
        # while being timed; the accuracy above was measured before this).
        n_batches = 8 if args.quick else 40
        rounds = 1 if args.quick else 3
        timing_batches = list(batches(x_train, y_train, args.batch_size, np_rng))[:n_batches]
        t_c, t_p, speedup = time_steps(compiled_step, train_step, timing_batches, state,
                                       rounds=rounds)
        print(f"Step time (median of {rounds * n_batches} steps each, batch {args.batch_size}, "
              f"alternating): compiled {t_c * 1e3:.2f} ms, uncompiled {t_p * 1e3:.2f} ms -> "
              f"speed-up {speedup:.2f}x")
        if compiled_step.stats()["traces"] != stats["traces"]:
            print("warning: the compiled step was retraced during timing: "
                  f"{compiled_step.stats()['miss_reasons']}")
        result.update(compiled_ms=t_c * 1e3, uncompiled_ms=t_p * 1e3, speedup=speedup)

    total = time.perf_counter() - t_start
    print(f"Total time: {total:.1f}s")
    result["total_time"] = total
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
