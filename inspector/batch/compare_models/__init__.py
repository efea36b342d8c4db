"""`network-inspector compare-models`: linear CKA of every layer pair of two models over a
folder of images, and matched channels of one pair.

    command   the options and the run (run_compare_models)
    setup     before the first image: inputs, seeds, both models, layers, the estimator
    pair      the two models loaded and probed, the images read once for both
    plan      the shards, the picklable job every engine runs, one shard's run, the merge
    engines   the shards here (DataLoader) or on Ray actors that hold both models
    finish    the shards merged, the files written
    writers   cka.json, cka.png, matches.json
    memory    what a comparison costs in memory (said by the window before B loads)
    match     one layer pair's matched channels, on its own (the window's heatmap click)
"""
