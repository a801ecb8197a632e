"""What runs inside the user's training: the session, step tracking, sampling, the run store's writer.

Importing this package is cheap: torch, pynvml and nvtx are imported lazily by the modules that
need them.
"""
