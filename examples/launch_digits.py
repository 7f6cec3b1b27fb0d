"""Launches examples/train_digits.py on the 4 ranks of examples/rank_table_4p.json.

This is what a notebook cell or a job script does on an Ascend machine, where
the platform sets RANK_TABLE_FILE; here the table describing this machine as
one server with 4 devices is passed explicitly. Logs: ./log/latest/.
"""

import os
import sys

from davincirunsdk import start_and_wait_distributed_train

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    code = start_and_wait_distributed_train(
        # sys.executable: the interpreter running this script, which has torch.
        [sys.executable, "train_digits.py"] + sys.argv[1:],
        work_dir=HERE,
        log_dir="./log",
        rank_table=os.path.join(HERE, "rank_table_4p.json"),
    )
    print("training finished with code %d; logs in ./log/latest/" % code)
