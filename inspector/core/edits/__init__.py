"""Edits: what a run changes in the model's activations, inputs or gradients through hooks
(interventions), written as text (spec), and carried over to another model (carry).
"""
