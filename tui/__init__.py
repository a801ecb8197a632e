"""Terminal dashboard (Textual). Reads run directories only; never imports torch or pynvml."""
