"""Class activation maps: which parts of the input a layer's evidence for a class comes from.

    methods.py   each CAM: a short function of a layer's activations and gradients
    targets.py   the class score explained (an index, a name, top-1, a score function)
    layer.py     the layer read when none is named
    scorecam.py  Score-CAM, which runs masked forwards instead of reading gradients
    compute.py   the two ways in: from a Session run's Capture, and the lean path

Import each name from the module that defines it.
"""
