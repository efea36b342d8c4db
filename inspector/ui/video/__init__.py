"""Videos and the camera through the model: the player (player), its frame counters
(counts) and Qt Multimedia's camera (camera).
"""
