"""Demo models, synthetic datasets and a training loop, deterministic for a seed.

Two workloads, sized so that one training step (forward, backward and an AdamW step) at the
default batch takes roughly 20-50 ms on a 2-core CPU:

- ``"gpt"``: :class:`TinyGPT`, a pre-LN decoder-only language model trained for next-token
  prediction on :class:`SyntheticTokens` (sequences from a seeded random Markov chain, so there
  is something to learn).
- ``"cnn"``: :class:`SmallCNN`, conv-bn-relu stages classifying 32x32x3 images from
  :class:`SyntheticImages` (a seeded class prototype plus noise per image).

Data goes through a real :class:`torch.utils.data.DataLoader`, so the profiler sees a data phase.
:class:`Trainer` holds one workload ready to step; :func:`train` runs it for a number of steps.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

#: Names accepted by :func:`make_model`, :func:`make_dataset` and :func:`train`.
MODEL_NAMES: tuple[str, ...] = ("gpt", "cnn")
#: Precisions accepted by :class:`Trainer` and :func:`train`.
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class GPTConfig:
    """Shape of :class:`TinyGPT` and of its synthetic data."""

    vocab_size: int = 512
    seq_len: int = 64
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: int = 4
    tie_weights: bool = True
    #: Batch at which one CPU training step takes roughly 20-50 ms.
    default_batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 0.01
    #: Sequences in the synthetic dataset (an epoch); the loader reshuffles after each.
    num_samples: int = 1024
    #: Likely successors per token in the synthetic Markov chain (lower is easier to learn).
    branching: int = 4

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")


@dataclass(frozen=True)
class CNNConfig:
    """Shape of :class:`SmallCNN` and of its synthetic data."""

    image_size: int = 32
    in_channels: int = 3
    num_classes: int = 10
    #: Output channels of each conv-bn-relu stage; every stage but the last halves the resolution.
    channels: tuple[int, ...] = field(default=(16, 32, 64))
    #: Batch at which one CPU training step takes roughly 20-50 ms.
    default_batch_size: int = 96
    lr: float = 3e-3
    weight_decay: float = 0.01
    num_samples: int = 2048
    #: Standard deviation of the per-pixel noise around each class prototype.
    noise_std: float = 1.0


# --------------------------------------------------------------------------------------- models


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend over ``x`` of shape (batch, time, d_model); position t sees positions <= t."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model),
            nn.GELU(),
            nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to ``x`` of shape (batch, time, d_model)."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A small GPT-style decoder LM. ``blocks`` is an ``nn.ModuleList`` so each can be checkpointed."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(_init_gpt_weights)
        if cfg.tie_weights:
            self.head.weight = self.tok_emb.weight
        # GPT-2: scale the residual projections by 1/sqrt(2 * n_layers).
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, time, vocab) for token ids ``idx`` of shape (batch, time)."""
        t = idx.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence of {t} tokens is longer than seq_len={self.cfg.seq_len}")
        pos = torch.arange(t, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _init_gpt_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


class SmallCNN(nn.Module):
    """Conv-bn-relu stages, max-pooled between stages, global average pool, then a linear head."""

    def __init__(self, cfg: CNNConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = cfg.in_channels
        for i, out_ch in enumerate(cfg.channels):
            layers += [
                nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1, bias=False),
                nn.BatchNorm2d(out_ch),
                nn.ReLU(inplace=True),
            ]
            if i < len(cfg.channels) - 1:
                layers.append(nn.MaxPool2d(2))
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(in_ch, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of shape (batch, classes) for images of shape (batch, 3, H, W)."""
        return self.head(self.pool(self.features(x)).flatten(1))


# ------------------------------------------------------------------------------------- datasets


class SyntheticTokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Token sequences from a seeded random Markov chain; item i is (tokens, next tokens).

    Each token has ``cfg.branching`` likely successors (drawn once from the seed), so the
    next-token loss can fall well below ``log(vocab_size)``. Everything is generated up front from
    a private :class:`torch.Generator`; the global RNG is not touched.
    """

    def __init__(self, cfg: GPTConfig, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        v, n, t = cfg.vocab_size, cfg.num_samples, cfg.seq_len + 1
        successors = torch.randint(0, v, (v, cfg.branching), generator=g)
        seqs = torch.empty(n, t, dtype=torch.long)
        seqs[:, 0] = torch.randint(0, v, (n,), generator=g)
        choice = torch.randint(0, cfg.branching, (n, t), generator=g)
        for i in range(1, t):
            seqs[:, i] = successors[seqs[:, i - 1], choice[:, i]]
        self.seqs = seqs

    def __len__(self) -> int:
        return self.seqs.shape[0]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        seq = self.seqs[i]
        return seq[:-1], seq[1:]


class SyntheticImages(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Images of a seeded class prototype plus Gaussian noise; item i is (image, label)."""

    def __init__(self, cfg: CNNConfig, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        shape = (cfg.in_channels, cfg.image_size, cfg.image_size)
        prototypes = torch.randn((cfg.num_classes, *shape), generator=g)
        self.labels = torch.randint(0, cfg.num_classes, (cfg.num_samples,), generator=g)
        noise = torch.randn((cfg.num_samples, *shape), generator=g) * cfg.noise_std
        self.images = prototypes[self.labels] + noise

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[i], self.labels[i]


# ------------------------------------------------------------------------------------ factories


def default_config(model_name: str) -> GPTConfig | CNNConfig:
    """Return the default config of ``model_name`` (``"gpt"`` or ``"cnn"``)."""
    if model_name == "gpt":
        return GPTConfig()
    if model_name == "cnn":
        return CNNConfig()
    raise ValueError(f"unknown demo model {model_name!r}; choose from {', '.join(MODEL_NAMES)}")


def make_model(cfg: GPTConfig | CNNConfig) -> nn.Module:
    """Build a freshly initialised model for ``cfg`` (uses the global RNG; seed it first)."""
    return TinyGPT(cfg) if isinstance(cfg, GPTConfig) else SmallCNN(cfg)


def make_dataset(cfg: GPTConfig | CNNConfig, seed: int = 0) -> Dataset[tuple[torch.Tensor, torch.Tensor]]:
    """Build the synthetic dataset for ``cfg``, generated from ``seed``."""
    return SyntheticTokens(cfg, seed) if isinstance(cfg, GPTConfig) else SyntheticImages(cfg, seed)


def make_loader(
    dataset: Dataset[tuple[torch.Tensor, torch.Tensor]],
    batch_size: int,
    seed: int = 0,
    num_workers: int = 0,
    pin_memory: bool = False,
) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    """Build a shuffling loader whose order is fixed by ``seed`` (full batches only)."""
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=num_workers,
        pin_memory=pin_memory,
        generator=torch.Generator().manual_seed(seed),
    )


def resolve_device(device: str) -> torch.device:
    """``"auto"`` becomes ``"cuda"`` when CUDA is available, else ``"cpu"``; others pass through."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# -------------------------------------------------------------------------------------- training


class Trainer:
    """One demo workload ready to step: model, AdamW, data loader and precision settings.

    Precision: ``"fp32"``; ``"tf32"`` (TF32 matmuls on CUDA, plain fp32 elsewhere); ``"bf16"`` and
    ``"fp16"`` through :func:`torch.autocast`, with a :class:`torch.amp.GradScaler` for fp16 on
    CUDA. On CUDA the fp32/tf32 choice sets the process-wide matmul precision.

    Deterministic for a seed on CPU (same thread count); on CUDA up to nondeterministic kernels.
    """

    def __init__(
        self,
        model_name: str,
        batch_size: int | None = None,
        device: str | torch.device = "cpu",
        precision: str = "fp32",
        seed: int = 0,
        cfg: GPTConfig | CNNConfig | None = None,
        num_workers: int = 0,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
        self.cfg = cfg if cfg is not None else default_config(model_name)
        self.batch_size = batch_size or self.cfg.default_batch_size
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.precision = precision
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"

        torch.manual_seed(seed)
        self.model = make_model(self.cfg).to(self.device)
        self.model.train()
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay
        )
        self.loader = make_loader(
            make_dataset(self.cfg, seed),
            self.batch_size,
            seed=seed,
            num_workers=num_workers,
            pin_memory=self.device.type == "cuda",
        )
        self._batches = self._cycle()
        amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self._amp_dtype = amp_dtype
        self.scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16" and self.device.type == "cuda")

    def _cycle(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:  # a new epoch reshuffles with the loader's seeded generator
            yield from self.loader

    def _autocast(self) -> contextlib.AbstractContextManager[object]:
        if self._amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self._amp_dtype)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of ``logits`` against ``target`` (flattened over time for the LM)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))

    def step(self) -> torch.Tensor:
        """One training step: next batch, forward, backward, optimizer step. Returns the loss.

        The returned loss is detached and left on the device (no host sync here).
        """
        x, y = next(self._batches)
        non_blocking = self.device.type == "cuda"
        x = x.to(self.device, non_blocking=non_blocking)
        y = y.to(self.device, non_blocking=non_blocking)
        with self._autocast():
            loss = self.loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()


def train(
    model_name: str,
    steps: int,
    batch_size: int,
    device: str,
    precision: str = "fp32",
    seed: int = 0,
) -> float:
    """Train demo model ``model_name`` for ``steps`` steps; return the last step's loss.

    ``device`` is ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``. Each step ends at
    ``optimizer.step()``, so a surrounding ``autotune.profile()`` sees ``steps`` steps.
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    trainer = Trainer(model_name, batch_size, device, precision, seed)
    loss = torch.zeros(())
    for _ in range(steps):
        loss = trainer.step()
    return float(loss.item())
