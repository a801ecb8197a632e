"""The command line: ``autotune`` and its commands, one module each (``main`` builds the parser)."""
