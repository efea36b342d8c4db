"""A run: what it asks for (request), the Session that runs it on the worker thread, the
hooks that capture what the model does (capture, hookset, capture_spec, kinds), the frames
they send (frames) through the bounded channel (channel), and the store the window reads
them from (store). runtime.py chooses torch's threads; interrupt.py stops a model load.
"""
