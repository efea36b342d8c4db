"""Comparisons between runs: the outputs a Session keeps (kept_outputs) and where another
run parts ways with them (divergence).
"""
