"""Explanations of a run's prediction: class activation maps (cam/), input attributions
(attributions, occlusion) and the table of methods by name (catalog).
"""
