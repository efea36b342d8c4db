"""Feature visualisation by optimisation: the picture a channel (a neuron, a class, a
direction in a layer's channel space) would draw, as Lucid draws it (Olah et al. 2017).

    settings.py    FeatureVisSettings, Target (what one image maximises), image seeds
    param.py       the image: a Fourier spectrum with a 1/f scale, decorrelated colour, sigmoid
    transforms.py  the random pad, jitter, scale and rotation of each step, in one resample
    objectives.py  the value per image of each objective, and the diversity term
    relu.py        Lucid's redirected ReLU, for channels that are dead on the first image
    render.py      the loop: Optimisation (in chunks, for the window), render(), evaluate()
    cache.py       the on-disk cache keyed by the weights' hash, layer, target and settings

No Qt here: the window drives Optimisation in chunks on its worker, the CLI calls render().
"""
