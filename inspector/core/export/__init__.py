"""Files from a run: PNG overlays and mosaics, NPZ arrays and TensorBoard logs (files), and
the arrays of a run's NPZ (arrays).
"""
