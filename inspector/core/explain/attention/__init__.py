"""Attention in ViT-style transformers: its probabilities read for one run (fused or not),
and what is made of them.

    options.py  what a run asks of attention (no torch: the window and the CLI build it)
    find.py     which modules are a model's attention and blocks, its prefix tokens, its
                head; whether the methods apply to it (else the one sentence why not)
    capture.py  AttentionCapture: the non-fused path and the hooks, for one run only
    methods.py  attention rollout, gradient rollout, LeGrad
    lens.py     the logit lens: each block's tokens through the model's own norm and head
    explorer.py where one token attends, per head; mean attention distance (numpy only)
    maps.py     the lean path (scripts, compute_cams): maps of a batch in one call
    stage.py    the attention part of a Session run: plan, capture, explain

Import each name from the module that defines it.
"""
