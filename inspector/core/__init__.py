"""The engine, Qt-free: the CLI, batch jobs and scripts use it as the window does.

    models/   model families and the table that loads one (load_model), the module tree
    inputs/   images, video frames, preprocessing
    run/      a run as a value, the Session and its worker, the hooks, frames and store
    stats/    statistics and previews of captured tensors
    explain/  CAMs, input attributions, the table of methods
    edits/    interventions through hooks, as values and as text
    compare/  runs compared with a kept run
    tasks/    detection and segmentation outputs
    export/   PNG, NPZ and TensorBoard files
    script/   Copy as Python
    tokens.py a layer's output as a spatial map, whatever its layout
"""

import os

# Must be set before torch (and its OpenMP runtime) is first imported. With the default
# (active) policy, idle OpenMP threads spin for a core; on a busy desktop that turned a
# 16 ms resnet18 forward into more than a second (measured while another torch process
# used the same two cores). A user who sets it explicitly keeps their choice.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
