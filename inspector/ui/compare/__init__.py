"""A/B compare: Compare ▸ Pin as A and Unpin A, and what the status bar says of run A.
"""
