"""Data-parallel training of a small Keras classifier with TensorFlow 2's MultiWorkerMirroredStrategy.

Written for a launch that gives every worker a TF_CONFIG environment
variable, as `davincirun --launch-mode tf-config` does:

  TF_CONFIG={"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": N}}

The workers, listed in rank order, meet at those addresses (worker 0 runs
TensorFlow's coordination service); each trains on its share of every
global batch, and the gradients are summed across the workers at every step
(collective all-reduce over gRPC), so the replicas stay identical.

Keras is tf_keras (Keras 2): the Keras 3 that TensorFlow 2.16+ depends on
fails in model.fit under MultiWorkerMirroredStrategy (keras-team/keras#20585);
TensorFlow's multi-worker Keras tutorial uses tf_keras too. TF_USE_LEGACY_KERAS=1
is set before tensorflow is imported, so that tf.keras is the same tf_keras.

The data is synthetic and the same on every worker: points drawn from a
fixed seed, labelled by a fixed linear map (a linearly separable 4-class
problem). Every worker prints one line per epoch and, at the end, its test
accuracy and the sha256 of its weights; with --out DIR it also writes
DIR/rank<N>.npz (the weights) and DIR/rank<N>.json (loss, accuracy, sha256).

--fail-at-epoch E makes worker --fail-rank call a TensorFlow op with invalid
arguments at the start of epoch E, so that TensorFlow itself raises
InvalidArgumentError (a failure demo for the launcher). A large --epochs
with --step-delay makes a run that lasts until it is stopped.

Needs build/tf2-env (bash scripts/tensorflow_env.sh --tf2).
"""
import argparse
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

FEATURES, CLASSES = 16, 4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32, help="per-worker batch size")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write rank<N>.npz and rank<N>.json here (N: TF_CONFIG's task index)")
    parser.add_argument("--fail-at-epoch", type=int, default=None,
                        help="make --fail-rank raise TensorFlow's InvalidArgumentError at this epoch")
    parser.add_argument("--fail-rank", type=int, default=0)
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="sleep this many seconds after each step (to make a run last longer)")
    return parser.parse_args()


def read_tf_config():
    """(rank, number of workers) from TF_CONFIG, or exit(2) saying what is wrong."""
    text = os.environ.get("TF_CONFIG")
    if not text:
        print("error: TF_CONFIG is not set. This script is meant to be started by "
              "`davincirun --launch-mode tf-config`, which sets it for every worker.",
              file=sys.stderr, flush=True)
        sys.exit(2)
    try:
        config = json.loads(text)
        workers = config["cluster"]["worker"]
        rank = int(config["task"]["index"])
        kind = config["task"]["type"]
    except (ValueError, KeyError, TypeError) as error:
        print("error: TF_CONFIG is not {\"cluster\": {\"worker\": [...]}, \"task\": {...}}: %s (%r)"
              % (error, text), file=sys.stderr, flush=True)
        sys.exit(2)
    if kind != "worker" or not 0 <= rank < len(workers):
        print("error: TF_CONFIG's task is %s %d, not a worker in [0, %d)" % (kind, rank, len(workers)),
              file=sys.stderr, flush=True)
        sys.exit(2)
    return rank, len(workers)


def make_data():
    """The same points and labels on every worker: a fixed seed and a fixed linear labelling."""
    rng = np.random.RandomState(0)
    weights = rng.normal(size=(FEATURES, CLASSES))
    x = rng.normal(size=(2560, FEATURES)).astype(np.float32)
    y = np.argmax(x @ weights, axis=1).astype(np.int32)
    return x[:2048], y[:2048], x[2048:], y[2048:]


def weights_sha256(model):
    digest = hashlib.sha256()
    for array in model.get_weights():
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


class Progress(keras.callbacks.Callback):
    """One line per epoch; the injected failure at the start of --fail-at-epoch."""

    def __init__(self, rank, args):
        super().__init__()
        self.rank, self.args = rank, args
        self.start = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        if epoch + 1 == self.args.fail_at_epoch and self.rank == self.args.fail_rank:
            print("rank %d: epoch %d: calling tf.reshape with a wrong shape (--fail-at-epoch)"
                  % (self.rank, epoch + 1), flush=True)
            tf.reshape(tf.zeros([3]), [2])  # TensorFlow raises InvalidArgumentError

    def on_train_batch_end(self, batch, logs=None):
        if self.args.step_delay:
            time.sleep(self.args.step_delay)

    def on_epoch_end(self, epoch, logs=None):
        print("rank %d epoch %2d/%d: loss %.4f accuracy %.4f (%.1f s)" % (
            self.rank, epoch + 1, self.args.epochs, logs["loss"], logs["accuracy"],
            time.monotonic() - self.start), flush=True)


def main():
    args = parse_args()
    rank, world = read_tf_config()
    # Several workers share a few CPU cores; set before TensorFlow runs any op.
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    print("rank %d/%d: TensorFlow %s, TF_CONFIG %s, pid %d"
          % (rank, world, tf.__version__, os.environ["TF_CONFIG"], os.getpid()), flush=True)

    # Connects to the other workers (waiting for all of them) before it returns.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(0)  # the same initial weights and shuffling everywhere

    x_train, y_train, x_test, y_test = make_data()
    global_batch = args.batch_size * world
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=0).batch(global_batch, drop_remainder=True).repeat())
    # Each worker takes its part of every global batch (the data are in memory, not in files).
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    with strategy.scope():
        model = keras.Sequential([
            keras.layers.Input(shape=(FEATURES,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(CLASSES),
        ])
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=len(x_train) // global_batch,
                        callbacks=[Progress(rank, args)], verbose=0)

    # Replica check, and a barrier (the last worker out of model.fit may still be
    # tearing down its input pipeline): the mean of every worker's weights, in
    # float64, is exactly each worker's own weights iff they are all equal.
    mine = np.concatenate([w.ravel() for w in model.get_weights()]).astype(np.float64)
    mean = strategy.run(lambda value: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.MEAN, value), args=(tf.constant(mine),))
    in_sync = bool(np.array_equal(strategy.experimental_local_results(mean)[0].numpy(), mine))

    # Every worker scores the whole test set: identical replicas, identical accuracies.
    predicted = np.argmax(model(x_test, training=False).numpy(), axis=1)
    accuracy = float(np.mean(predicted == y_test))
    sha256 = weights_sha256(model)
    print("rank %d final test accuracy: %.4f (%d test samples)" % (rank, accuracy, len(y_test)), flush=True)
    print("rank %d replicas in sync: %s" % (rank, in_sync), flush=True)
    print("rank %d weights sha256: %s" % (rank, sha256), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        np.savez(os.path.join(args.out, "rank%d.npz" % rank), *model.get_weights())
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as summary:
            json.dump({"rank": rank, "workers": world, "epochs": args.epochs,
                       "loss": float(history.history["loss"][-1]), "test_accuracy": accuracy,
                       "in_sync": in_sync, "sha256": sha256, "tensorflow": tf.__version__}, summary)
        print("rank %d wrote rank%d.npz and rank%d.json to %s" % (rank, rank, rank, args.out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
