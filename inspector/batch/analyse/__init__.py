"""`network-inspector analyse`: every image through the Session, its files on disk.

    command   the options, the run, summary.json
    options   the options that need the loaded model; --emit-script
    shards    the shards: read back when finished, else run here or on Ray
    image     one image's runs on the Session and its summary/compare entries
    writers   one image's NPZ, PNG figures and TensorBoard records; the run's JSON
    on_ray    the shards on Ray actors that each hold a Session
    metrics, attention, dff, sweep   the options --metrics, --cam rollout..., --dff,
                                     --patch-sweep
"""
