"""Runs from the window: the settings of the next runs (settings), the request built from
them (builder), the Session driven without freezing the window (session_control), the
frames routed into the run store (frame_router), and a long run's progress (progress).
"""
