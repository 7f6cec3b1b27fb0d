"""Data-parallel training of a small MLP on scikit-learn's handwritten digits.

This is the example "one script per NPU" training program for davincirunsdk.
The launcher starts one copy of it per device listed in the HCCL rank table;
here every copy runs on the CPU and the copies talk to each other through
torch.distributed's gloo backend.

Environment variables read:
  RANK_ID      global rank of this process            (set by the launcher,
  RANK_SIZE    total number of processes (world size)  from the rank table;
  DEVICE_ID    logical device id on this server        the same variables
                                                       MindSpore and the TF
                                                       adapter read on Ascend)
  MASTER_ADDR  host of the rank-0 rendezvous          (torch.distributed's
  MASTER_PORT  port of the rank-0 rendezvous           TCP rendezvous)

Launch it with the command-line launcher:
  davincirun --rank-table examples/rank_table_4p.json python examples/train_digits.py
or from Python, with RANK_TABLE_FILE pointing at the rank table:
  from davincirunsdk import start_and_wait_distributed_train
  start_and_wait_distributed_train(["python", "examples/train_digits.py"])

Every rank prints one line per epoch; rank 0 finally prints
"final test accuracy: ..." and whether all model replicas ended identical.

With --checkpoint DIR, rank 0 saves the model and optimizer after every
epoch, and a run started again resumes after the last saved epoch: a job
launched with `davincirun --max-restarts 3` goes on where it failed
(docs/restarts.md). It ends with the accuracy of a run never interrupted
(the data order of each epoch depends on the epoch only), and parameters
equal to float rounding.
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

REQUIRED_VARS = ("RANK_ID", "RANK_SIZE", "DEVICE_ID", "MASTER_ADDR", "MASTER_PORT")


def read_env():
    """Return the launcher-provided settings, or exit(2) naming what is missing."""
    missing = [name for name in REQUIRED_VARS if not os.environ.get(name)]
    if missing:
        print("error: environment variable(s) %s not set. This script is meant to be "
              "started by `davincirun` or `start_and_wait_distributed_train`, which set "
              "them for every rank." % ", ".join(missing), file=sys.stderr, flush=True)
        sys.exit(2)
    try:
        rank = int(os.environ["RANK_ID"])
        world_size = int(os.environ["RANK_SIZE"])
    except ValueError:
        print("error: RANK_ID and RANK_SIZE must be integers, got %r and %r"
              % (os.environ["RANK_ID"], os.environ["RANK_SIZE"]), file=sys.stderr, flush=True)
        sys.exit(2)
    if not 0 <= rank < world_size:
        print("error: RANK_ID=%d is outside [0, RANK_SIZE=%d)" % (rank, world_size),
              file=sys.stderr, flush=True)
        sys.exit(2)
    return (rank, world_size, os.environ["DEVICE_ID"],
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])


def load_data():
    """Same fixed 80/20 stratified split on every rank, standardized with train statistics."""
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, stratify=y, random_state=0)
    x_train = torch.tensor(x_train, dtype=torch.float32)
    x_test = torch.tensor(x_test, dtype=torch.float32)
    mean, std = x_train.mean(dim=0), x_train.std(dim=0).clamp_min(1e-6)
    return (TensorDataset((x_train - mean) / std, torch.tensor(y_train)),
            TensorDataset((x_test - mean) / std, torch.tensor(y_test)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    parser.add_argument("--fail-at-epoch", type=int, default=None,
                        help="make --fail-rank raise an exception at this epoch (fail-fast demo)")
    parser.add_argument("--fail-rank", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, metavar="DIR",
                        help="save a checkpoint per epoch here; resume from it when started again")
    args = parser.parse_args()

    rank, world_size, device_id, addr, port = read_env()
    torch.set_num_threads(1)  # several ranks share a few CPU cores
    torch.manual_seed(0)  # identical initial weights everywhere (DDP also broadcasts them)
    print("rank %d/%d: DEVICE_ID=%s (running on CPU), rendezvous tcp://%s:%s, pid %d"
          % (rank, world_size, device_id, addr, port, os.getpid()), flush=True)

    dist.init_process_group(backend="gloo", init_method="tcp://%s:%s" % (addr, port),
                            rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=120))

    train_set, test_set = load_data()
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank,
                                 shuffle=True, seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    first_epoch = 1
    checkpoint = os.path.join(args.checkpoint, "digits.pt") if args.checkpoint else None
    if checkpoint and os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
        print("rank %d: resumed after epoch %d from %s (restart %s)"
              % (rank, state["epoch"], checkpoint, os.environ.get("DAVINCIRUN_RESTART_COUNT", "0")), flush=True)
    model = DistributedDataParallel(net)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(first_epoch, args.epochs + 1):
        if epoch == args.fail_at_epoch and rank == args.fail_rank:
            raise RuntimeError("rank %d: injected failure at epoch %d (--fail-at-epoch)"
                               % (rank, epoch))
        sampler.set_epoch(epoch)
        model.train()
        loss_sum, seen = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()  # DDP all-reduces (averages) the gradients here
            optimizer.step()
            loss_sum += loss.item() * len(yb)
            seen += len(yb)
        print("rank %d epoch %2d/%d: train loss %.4f over %d samples"
              % (rank, epoch, args.epochs, loss_sum / seen, seen), flush=True)
        if checkpoint and rank == 0:
            # Whole or not at all: a rank killed while it writes leaves the last one.
            os.makedirs(args.checkpoint, exist_ok=True)
            torch.save({"epoch": epoch, "model": net.state_dict(), "optimizer": optimizer.state_dict()},
                       checkpoint + ".tmp")
            os.replace(checkpoint + ".tmp", checkpoint)

    # Evaluate: each rank scores its own strided shard of the test set, then the
    # correct/total counts are summed across ranks with all_reduce.
    model.eval()
    shard = torch.arange(rank, len(test_set), world_size)
    x_test, y_test = test_set.tensors[0][shard], test_set.tensors[1][shard]
    with torch.no_grad():
        correct = (model(x_test).argmax(dim=1) == y_test).sum()
    counts = torch.tensor([float(correct), float(len(shard))], dtype=torch.float64)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)

    # Replica check: every rank's parameter checksum must equal the max and the min.
    with torch.no_grad():
        checksum = sum(p.double().sum() for p in model.parameters()).reshape(1)
    high, low = checksum.clone(), checksum.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    in_sync = bool(high.item() == low.item() == checksum.item())

    if rank == 0:
        print("final test accuracy: %.4f (%d test samples, world size %d)"
              % (counts[0].item() / counts[1].item(), int(counts[1].item()), world_size),
              flush=True)
        print("replicas in sync: %s" % in_sync, flush=True)
        print("parameter checksum: %.17g" % checksum.item(), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    # Leave without tearing the interpreter down, on success and on failure.
    # With the gloo backend, torch's worker threads may still be freeing the
    # tensors of the last collectives; one that needs the GIL while the
    # interpreter finalizes aborts the whole process ("terminate called
    # without an active exception", SIGABRT): seen here with torch 2.13 in
    # about 1 run in 25 under load, after a training that succeeded and
    # after a raised error (exit 134 instead of 1).
    try:
        code = main()
    except Exception:
        sys.excepthook(*sys.exc_info())  # torch's hook prefixes lines with "[rankN]:"
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
