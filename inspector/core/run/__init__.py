"""A run: what it asks for (request), the Session that runs it on the worker thread (session,
worker; a model's load: loading) in named stages (stages), the hooks that capture what the
model does (capture, capture_spec, kinds; core.hookset holds and removes them) and the frames
they make (frame_maker, frames), sent through the bounded channel (channel) to the store the
window reads them from (store), which tells its views (subscriptions). runtime.py chooses
torch's threads; interrupt.py stops a model load.
"""
