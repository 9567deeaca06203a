"""echo_lib: the shared logic of the Echo-N1 reproduction (one module per concept of the paper)."""

__version__ = "0.1.0"
