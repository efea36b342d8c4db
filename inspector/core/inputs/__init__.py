"""What goes into a model: image files decoded and checked (images, high_depth), video
frames (video; decoded ahead of a player on a thread: read_ahead), and the model's
preprocessing and its way back for display (preprocess).
"""
