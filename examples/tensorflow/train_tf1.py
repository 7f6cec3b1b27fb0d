"""Data-parallel training of a small tf.keras classifier with TensorFlow 1.15's MultiWorkerMirroredStrategy.

The TensorFlow 1.15 counterpart of train_tf2.py (TensorFlow 1.15 is the line
that CANN's TF adapter builds on). Written for a launch that gives every
worker a TF_CONFIG environment variable, as `davincirun --launch-mode
tf-config` does:

  TF_CONFIG={"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": N}}

Every worker starts a TensorFlow server at its own address; model.fit runs
in graph mode, and the gradients are summed across the workers at every
step by collective all-reduce ops, so the replicas stay identical.

The data is synthetic and the same on every worker (train_tf2.py's). Every
worker prints one line per epoch and, at the end, its test accuracy and the
sha256 of its weights; with --out DIR it also writes DIR/rank<N>.npz and
DIR/rank<N>.json.

--fail-at-epoch E makes worker --fail-rank run a TensorFlow op with invalid
arguments at the start of epoch E, so that TensorFlow itself raises
InvalidArgumentError. A large --epochs with --step-delay makes a run that
lasts until it is stopped.

Needs build/tf1-env (bash scripts/tensorflow_env.sh --tf1).
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

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


def invalid_reshape():
    """Run a reshape of 3 values into 2 in a graph of its own: the session raises InvalidArgumentError."""
    with tf.Graph().as_default():
        values = tf.compat.v1.placeholder(tf.float32, shape=[None])  # unknown length: checked only when run
        reshaped = tf.reshape(values, [2])
        with tf.compat.v1.Session() as session:
            session.run(reshaped, feed_dict={values: [0.0, 0.0, 0.0]})


class Progress(tf.keras.callbacks.Callback):
    """One line per epoch; the injected failure at the start of --fail-at-epoch."""

    def __init__(self, rank, args):
        super(Progress, self).__init__()
        self.rank, self.args = rank, args
        self.start = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        if epoch + 1 == self.args.fail_at_epoch and self.rank == self.args.fail_rank:
            print("rank %d: epoch %d: running tf.reshape with a wrong shape (--fail-at-epoch)"
                  % (self.rank, epoch + 1), flush=True)
            invalid_reshape()

    def on_batch_end(self, batch, logs=None):
        if self.args.step_delay:
            time.sleep(self.args.step_delay)

    def on_epoch_end(self, epoch, logs=None):
        print("rank %d epoch %2d/%d: loss %.4f accuracy %.4f (%.1f s)" % (
            self.rank, epoch + 1, self.args.epochs, logs["loss"], logs["acc"],
            time.monotonic() - self.start), flush=True)


def main():
    args = parse_args()
    rank, world = read_tf_config()
    # Several workers share a few CPU cores.
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    print("rank %d/%d: TensorFlow %s, TF_CONFIG %s, pid %d"
          % (rank, world, tf.__version__, os.environ["TF_CONFIG"], os.getpid()), flush=True)

    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
    tf.compat.v1.set_random_seed(0)

    x_train, y_train, x_test, y_test = make_data()
    global_batch = args.batch_size * world
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=0).batch(global_batch, drop_remainder=True).repeat())

    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Dense(32, activation="relu", input_shape=(FEATURES,)),
            tf.keras.layers.Dense(CLASSES),
        ])
        model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["acc"])
    history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=len(x_train) // global_batch,
                        callbacks=[Progress(rank, args)], verbose=0)

    # Every worker scores the whole test set, in numpy: identical replicas, identical accuracies.
    w1, b1, w2, b2 = model.get_weights()
    predicted = np.argmax(np.maximum(x_test @ w1 + b1, 0) @ w2 + b2, axis=1)
    accuracy = float(np.mean(predicted == y_test))
    digest = hashlib.sha256()
    for array in (w1, b1, w2, b2):
        digest.update(np.ascontiguousarray(array).tobytes())
    sha256 = digest.hexdigest()
    print("rank %d final test accuracy: %.4f (%d test samples)" % (rank, accuracy, len(y_test)), flush=True)
    print("rank %d weights sha256: %s" % (rank, sha256), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        np.savez(os.path.join(args.out, "rank%d.npz" % rank), w1, b1, w2, b2)
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as summary:
            json.dump({"rank": rank, "workers": world, "epochs": args.epochs,
                       "loss": float(history.history["loss"][-1]), "test_accuracy": accuracy,
                       "sha256": sha256, "tensorflow": tf.__version__}, summary)
        print("rank %d wrote rank%d.npz and rank%d.json to %s" % (rank, rank, rank, args.out), flush=True)
    return 0


if __name__ == "__main__":
    # Leave without tearing the interpreter down, on success and on failure:
    # at teardown, TensorFlow 1.15's Server.__del__ (the server that the
    # strategy starts) runs after the modules it uses were cleared and prints
    # "Exception ignored in: <function Server.__del__ ...>" and a traceback
    # ending in "AttributeError: 'NoneType' object has no attribute
    # 'UnimplementedError'" to stderr, after every run (seen with CPython 3.7):
    # a spurious error at the end of each log, after the real one.
    try:
        code = main()
    except SystemExit as leaving:  # argparse's and read_tf_config's
        code = leaving.code or 0
    except Exception:
        sys.excepthook(*sys.exc_info())
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
