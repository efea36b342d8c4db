"""File ▸ Open model: the dialog and its tabs for timm and Hugging Face models (hub_tabs).
"""
