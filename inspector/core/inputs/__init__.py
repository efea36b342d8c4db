"""What goes into a model: image files decoded and checked (images, high_depth), video
frames (video), and the model's preprocessing and its way back for display (preprocess).
"""
