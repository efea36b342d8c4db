"""Work over many images: folders in, files out, on one machine or on a Ray cluster.

    inputs           the inputs named (files, folders, video frames), their shards, and a
                     torch Dataset/DataLoader that decodes images
    names            file-name-safe names, one folder per input, unknown-module messages
    engine/          what every command shares: progress and cancel, the output folder's
                     lock, the shard store (resume), the command frame, Ray's log file
    job              the atlas's statistics job (picklable)
    probe            forward hooks that reduce each chosen layer's output on its device
    reduce           running sums and exact per-channel top-k, and their merge
    boxes            receptive-field boxes from the input gradient of one activation
    local            the atlas's single-machine engine (DataLoader with worker processes)
    ray_engine       the atlas's statistics on Ray Data (an optional extra); Ray start/join
    writers          atlas.json, the crops, the per-class Grad-CAM maps
    atlas            `network-inspector atlas`: options, checks, the engines, the files
    analyse/         `network-inspector analyse` (its own folder: options, shards, one
                     image's runs, writers, Ray)
    compare_models/  `network-inspector compare-models` (setup, plan, engines, writers)

Nothing in this package imports Qt (import-linter checks).
"""
