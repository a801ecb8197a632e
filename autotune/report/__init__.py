"""Reports of a run directory: typed section data first, then HTML, Markdown and JSON."""
