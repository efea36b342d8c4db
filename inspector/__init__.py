"""Network Inspector: look inside a PyTorch model while it runs."""

__version__ = "0.1.0"
