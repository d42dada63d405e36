"""Data-parallel training of README's demo MLP on scikit-learn's digits, on N processes:

    python -m braze.launch -n 2 examples/data_parallel.py [--epochs 3] [--batch-size 64]

Every rank holds the whole model; each step it takes its 1/N of the global batch, computes
gradients, averages them over the ranks (`nn.average_gradients`, one all_sum per 32 MiB) and
applies the same update, so the parameters stay identical everywhere. Without dropout (the
default here) the loss curve is the one a single process gets with the whole batch:
`python examples/data_parallel.py` prints the same losses. Rank 0 prints.
"""
import argparse
import time
from functools import partial

import numpy as np

import braze.core as mx
import braze.nn as nn
import braze.optimizers as optim
from braze.demo import MLP, load_digits_split, loss_fn


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64, help="global batch (all ranks)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    world = mx.distributed.init()
    rank, size = world.rank(), world.size()
    if args.batch_size % size:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible by {size} ranks")
    local = args.batch_size // size

    mx.random.seed(args.seed)  # the same initial weights on every rank
    model = MLP(dropout=args.dropout)
    optimizer = optim.AdamW(learning_rate=args.lr, weight_decay=1e-4)
    optimizer.init(model.trainable_parameters())
    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, nn.average_gradients(grads))
        return mx.distributed.all_sum(loss) / size  # the global batch's mean loss

    x_train, y_train, _, _ = load_digits_split(args.seed)
    rng = np.random.default_rng(args.seed)  # the same batch order on every rank
    times = []
    for epoch in range(1, args.epochs + 1):
        perm, losses = rng.permutation(len(x_train)), []
        for i in range(0, len(x_train) - args.batch_size + 1, args.batch_size):
            idx = perm[i + rank * local:i + (rank + 1) * local]
            t0 = time.perf_counter()
            loss = step(mx.array(x_train[idx]), mx.array(y_train[idx]))
            mx.eval(loss, state)
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
        if rank == 0:
            print(f"epoch {epoch}: mean loss {np.mean(losses):.6f} (last {losses[-1]:.6f})")
    if rank == 0:
        ms = 1e3 * np.median(times[5:] or times)
        print(f"{size} process(es), global batch {args.batch_size}: {ms:.2f} ms per step "
              f"(median), {args.batch_size / ms * 1e3:,.0f} samples/s")


if __name__ == "__main__":
    main()
