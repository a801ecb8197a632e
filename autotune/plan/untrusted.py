"""What a traced step cannot see, said next to the figures.

Layers whose real kernels keep memory below the dispatcher, where the trace has no view (measured
in ``benchmarks/plan_accuracy.py``).
"""

from __future__ import annotations

from torch import nn

#: Layer types -> what the plan's memory misses with them, and by how much it was measured to.
UNTRUSTED: tuple[tuple[tuple[type[nn.Module], ...], str], ...] = (
    (
        (nn.LSTM, nn.GRU, nn.RNN),
        "{name}: under fake tensors the recurrent layer runs torch's decomposition, while the real "
        "kernels (oneDNN on a CPU, cuDNN on a GPU) keep their own workspace for the backward; on an "
        "LSTM LM the real peak was 16-53% above the plan's",
    ),
    (
        (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d),
        "{name}: convolution kernels allocate a workspace inside the kernel (oneDNN on a CPU, cuDNN "
        "on a GPU) that the trace does not see; on a residual CNN the real peak was up to 29% above "
        "the plan's (0.8% on the demo CNN)",
    ),
)


def untrusted_notes(model: nn.Module) -> list[str]:
    """One note per kind of layer in ``model`` whose memory the trace underestimates."""
    notes = []
    for types, sentence in UNTRUSTED:
        found = sorted({type(m).__name__ for m in model.modules() if isinstance(m, types)})
        if found:
            notes.append(sentence.format(name=", ".join(f"nn.{n}" if hasattr(nn, n) else n for n in found)))
    return notes


__all__ = ["UNTRUSTED", "untrusted_notes"]
