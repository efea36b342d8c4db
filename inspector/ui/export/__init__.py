"""Keeping what is shown: File ▸ Save view as PNG and Save run as NPZ (save_view).
"""
