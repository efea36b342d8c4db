"""What a channel means, in the window: its feature visualisation (the picture it would
draw, optimised on the inference worker in chunks, cached on disk) beside the zoomed
channel, for a mosaic page at once, and beside an atlas channel's top images; and the
concepts (deep feature factorisation) of the image shown at a layer.

    runner.py           the optimisation in chunks on the worker, the cache lookups
    page_dialog.py      Visualise page: the page's pictures forming, as one batch
    concepts_dialog.py  Concepts: the image's concepts in colours, their classes, remove one
    folder_concepts.py  a folder concept in the Dataset dock: its numbers, its direction
    actions.py          the menu entries, the zoom page's picture, the Dataset dock's strip
"""
