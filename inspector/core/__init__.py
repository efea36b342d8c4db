"""The engine: models, images, hooks, the frame channel and the inference worker.

Nothing in this package imports Qt; the CLI and scripts use it as it is.
"""

import os

# Must be set before torch (and its OpenMP runtime) is first imported. With the default
# (active) policy, idle OpenMP threads spin for a core; on a busy desktop that turned a
# 16 ms resnet18 forward into more than a second (measured while another torch process
# used the same two cores). A user who sets it explicitly keeps their choice.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
