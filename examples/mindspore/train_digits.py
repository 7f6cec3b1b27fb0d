"""Data-parallel training of a small MLP on scikit-learn's digits, with MindSpore.

Written for MindSpore's dynamic-cluster launch (a scheduler process plus one
worker per device), which is MindSpore's only distributed mode on the CPU:

  davincirun --launch-mode dynamic-cluster --nproc 2 python train_digits.py
  davincirun --launch-mode dynamic-cluster -r rank_table.json python train_digits.py

The launcher runs this same script in every member of the job: once as the
scheduler (MS_ROLE=MS_SCHED) and once per worker (MS_ROLE=MS_WORKER, with
RANK_ID). Each worker trains on its own half of the data; the gradients are
averaged across workers at every step, so the replicas stay identical.

Every worker prints one line per epoch and, at the end, its test accuracy
and a checksum of its parameters; with --save-dir it also writes its
parameters to <save-dir>/params_rank<RANK_ID>.npz so that they can be
compared.
"""
import argparse
import hashlib
import os
import sys
import time

import mindspore as ms
import numpy as np
from mindspore import ParallelMode, nn
from mindspore.communication import get_group_size, get_rank, init
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per-worker batch size")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--save-dir", default=os.environ.get("DIGITS_SAVE_DIR"),
                        help="write params_rank<RANK_ID>.npz here (default: $DIGITS_SAVE_DIR, else nothing)")
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="sleep this many seconds after each step (to make a run last longer)")
    return parser.parse_args()


def load_data():
    """The same stratified 80/20 split on every worker, standardized with the training statistics."""
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-6
    def scale(a):
        return ((a - mean) / std).astype(np.float32)
    return scale(x_train), y_train.astype(np.int32), scale(x_test), y_test.astype(np.int32)


def checksum(net):
    """sha256 of every parameter's bytes, in a fixed order: equal on every replica iff they are identical."""
    digest = hashlib.sha256()
    for param in net.trainable_params():
        digest.update(param.name.encode())
        digest.update(param.asnumpy().tobytes())
    return digest.hexdigest()


def main():
    args = parse_args()
    # Graph mode: the whole step (forward, backward, gradient all-reduce,
    # update) is compiled once, and the all-reduce then runs inside the graph.
    # In PyNative mode each all-reduce is a separate call from Python: an
    # epoch takes about ten times as long on two CPU cores.
    ms.set_context(mode=ms.GRAPH_MODE)
    if hasattr(ms, "set_device"):  # MindSpore 2.5 and later
        ms.set_device("CPU")
    else:  # older releases (2.0.0 ...): the device is part of the context
        ms.set_context(device_target="CPU")

    # With MS_ROLE=MS_SCHED, init() in MindSpore 2.10 serves the cluster
    # until every worker has finished and then ends the process (exit
    # status 0) without returning. In MindSpore 2.0.0 it returns once every
    # worker has registered, and the process then waits at its exit until
    # every worker has left: there the guard below is what keeps the
    # scheduler out of the training code. In a worker, init() connects to
    # the scheduler and sets up MindSpore's CPU collectives (mccl).
    if os.environ.get("MS_ROLE") == "MS_SCHED" and ms.__version__.startswith("2.0."):
        # MindSpore 2.0.0 drops a worker's registration reply that comes
        # back before the worker waits for it, and the cluster fails 30 s
        # later (docs/mindspore.md). A scheduler at the lowest CPU priority
        # never pre-empts a worker to answer that early; it has little to do.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    init()
    if os.environ.get("MS_ROLE") == "MS_SCHED":
        sys.exit(0)
    # MindSpore's rank: 2.10 takes it from MS_NODE_ID (the launcher sets it
    # to RANK_ID); 2.0.0 numbers the workers in the order they registered,
    # so there it may differ from RANK_ID. The data shard follows MindSpore's.
    rank, world = get_rank(), get_group_size()
    ms.set_auto_parallel_context(parallel_mode=ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(0)  # identical initial weights on every worker
    print("rank %d/%d: RANK_ID=%s DEVICE_ID=%s, scheduler %s:%s" % (
        rank, world, os.environ.get("RANK_ID"), os.environ.get("DEVICE_ID"),
        os.environ.get("MS_SCHED_HOST"), os.environ.get("MS_SCHED_PORT")), flush=True)

    x_train, y_train, x_test, y_test = load_data()
    # Each worker takes every world-th sample; all take the same number of
    # steps per epoch (a worker with one step more would wait forever in the
    # all-reduce of that step).
    x_mine, y_mine = x_train[rank::world], y_train[rank::world]
    steps = (len(x_train) // world) // args.batch_size

    net = nn.SequentialCell(nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 10))
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=args.lr, momentum=0.9)
    # TrainOneStepCell sees DATA_PARALLEL and averages the gradients across
    # the workers (gradients_mean) before the update.
    train_step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), optimizer)
    train_step.set_train()

    rng = np.random.default_rng(rank)  # each worker shuffles its own shard
    start = time.monotonic()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_mine))
        total = 0.0
        for step in range(steps):
            batch = order[step * args.batch_size:(step + 1) * args.batch_size]
            loss = train_step(ms.Tensor(x_mine[batch]), ms.Tensor(y_mine[batch]))
            total += float(loss.asnumpy())
            if args.step_delay:
                time.sleep(args.step_delay)
        print("rank %d epoch %2d/%d: loss %.4f (%.1f s)" % (
            rank, epoch, args.epochs, total / steps, time.monotonic() - start), flush=True)

    # Every worker scores the whole test set: identical replicas give identical accuracies.
    net.set_train(False)
    predicted = net(ms.Tensor(x_test)).asnumpy().argmax(axis=1)
    accuracy = float((predicted == y_test).mean())
    print("rank %d final test accuracy: %.4f (%d test samples)" % (rank, accuracy, len(y_test)), flush=True)
    print("rank %d parameter checksum: %s" % (rank, checksum(net)), flush=True)
    if args.save_dir:
        path = os.path.join(args.save_dir, "params_rank%d.npz" % rank)
        np.savez(path, **{p.name: p.asnumpy() for p in net.trainable_params()})
        print("rank %d saved its parameters to %s" % (rank, path), flush=True)


if __name__ == "__main__":
    main()
