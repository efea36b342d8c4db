"""The module tree: the widget (filter, columns, context menus), its Qt model over the run
store (model) and what each cell shows (cells).
"""
