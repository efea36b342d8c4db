"""Work over many images: folders in, files out, on one machine or on a Ray cluster.

    inputs           the inputs named (files, folders, video frames), their shards, and a
                     torch Dataset/DataLoader that decodes images
    names            file-name-safe names, one folder per input, unknown-module messages
    shards           the job's fingerprint and its finished shards on disk (resume)
    job              the atlas's statistics job (picklable), OptionError
    probe            forward hooks that reduce each chosen layer's output on its device
    reduce           running sums and exact per-channel top-k, and their merge
    boxes            receptive-field boxes from the input gradient of one activation
    local            the atlas's single-machine engine (DataLoader with worker processes)
    ray_engine       the atlas's statistics on Ray Data (an optional extra); Ray start/join
    writers          atlas.json, the crops, the per-class Grad-CAM maps
    atlas            `network-inspector atlas`: options, checks, the engines, the files
    analyse          `network-inspector analyse`: options, the run, summary.json
    analyse_options  analyse's options checked against the loaded model; --emit-script
    analyse_shards   analyse's shards: read back when finished, else run by the engine
    analyse_image    one image's runs on the Session and its summary/compare entries
    analyse_writers  one image's NPZ, PNG figures and TensorBoard records; the run's JSON
    analyse_ray      analyse's shards on Ray actors that each hold a Session

Nothing in this package imports Qt (import-linter checks).
"""
