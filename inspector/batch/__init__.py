"""Work over many images: folders in, files out, on one machine or on a Ray cluster.

    inputs      the image list, its shards, and a torch Dataset/DataLoader that decodes them
    probe       forward hooks that reduce each chosen layer's output on its device
    reduce      running sums and exact per-channel top-k, and their merge
    shards      the job's fingerprint and its finished shards on disk (resume)
    boxes       receptive-field boxes from the input gradient of one activation
    local       the single-machine engine (DataLoader with worker processes)
    ray_engine  the same job on Ray Data (an optional extra)
    writers     atlas.json, the crops, the per-class Grad-CAM maps
    atlas       `network-inspector atlas`: options, checks, the engines, the files

Nothing in this package imports Qt (import-linter checks).
"""
