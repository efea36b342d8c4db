"""Model families: how each kind of model is loaded, and the table that picks one.

base.py (what every family shares: ModelSpec, LoadedModel, Family), files.py (checkpoint
files, read or refused in a sentence), devices.py, one module per family (factory.py:
factory files and trusted pickles; torchvision_models.py; task_models.py: torchvision's
detection and segmentation models; timm_models.py; hf_models.py), load.py (the table and
load_model) and tree.py (the module tree one probe forward shows).
"""
