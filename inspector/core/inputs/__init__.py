"""What goes into a model: image files decoded and checked (images, high_depth), video files
decoded frame by frame (video_reader) and played (video: a listing's first frame, a player's
frames decoded ahead on a thread), and the model's preprocessing and its way back for display
(preprocess).
"""
