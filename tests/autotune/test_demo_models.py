"""The demo workloads train, are deterministic for a seed, and run under bf16 autocast on CPU."""

from __future__ import annotations

import pytest
import torch

from autotune.demo.models import (
    CNNConfig,
    GPTConfig,
    SmallCNN,
    SyntheticImages,
    SyntheticTokens,
    TinyGPT,
    Trainer,
    default_config,
    train,
)

# Smaller than the defaults so the whole file stays well under the time budget.
TINY_GPT = GPTConfig(vocab_size=64, seq_len=16, d_model=32, n_layers=2, n_heads=2, num_samples=256)
TINY_CNN = CNNConfig(num_samples=512)


@pytest.fixture(autouse=True)
def _fixed_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def losses(trainer: Trainer, steps: int) -> list[float]:
    return [float(trainer.step()) for _ in range(steps)]


@pytest.mark.parametrize(("name", "cfg"), [("gpt", TINY_GPT), ("cnn", TINY_CNN)])
def test_loss_decreases(name, cfg):
    ls = losses(Trainer(name, batch_size=16, cfg=cfg, seed=0), 20)
    assert sum(ls[-5:]) / 5 < 0.9 * sum(ls[:5]) / 5, ls


@pytest.mark.parametrize(("name", "cfg"), [("gpt", TINY_GPT), ("cnn", TINY_CNN)])
def test_same_seed_same_losses_other_seed_differs(name, cfg):
    a = losses(Trainer(name, batch_size=8, cfg=cfg, seed=3), 4)
    b = losses(Trainer(name, batch_size=8, cfg=cfg, seed=3), 4)
    c = losses(Trainer(name, batch_size=8, cfg=cfg, seed=4), 4)
    assert a == b
    assert a != c


def test_train_returns_final_loss_deterministically():
    a = train("cnn", steps=2, batch_size=4, device="cpu", seed=1)
    assert a == train("cnn", steps=2, batch_size=4, device="cpu", seed=1)
    assert 0 < a < 10


@pytest.mark.parametrize(("name", "cfg"), [("gpt", TINY_GPT), ("cnn", TINY_CNN)])
def test_bf16_autocast_runs_on_cpu(name, cfg):
    trainer = Trainer(name, batch_size=4, cfg=cfg, precision="bf16")
    x, _ = next(trainer._batches)
    with trainer._autocast():
        assert trainer.model(x).dtype == torch.bfloat16
    ls = losses(trainer, 2)
    assert all(torch.isfinite(torch.tensor(ls)))
    # Parameters and optimizer state stay fp32 under autocast.
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="unknown demo model"):
        default_config("rnn")
    with pytest.raises(ValueError, match="unknown precision"):
        Trainer("cnn", cfg=TINY_CNN, precision="int8")
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(d_model=30, n_heads=4)


def test_gpt_shapes_tied_head_and_causality():
    torch.manual_seed(0)
    model = TinyGPT(TINY_GPT).eval()
    assert isinstance(model.blocks, torch.nn.ModuleList)
    assert len(model.blocks) == TINY_GPT.n_layers
    assert model.head.weight is model.tok_emb.weight
    untied = TinyGPT(GPTConfig(**{**TINY_GPT.__dict__, "tie_weights": False}))
    assert untied.head.weight is not untied.tok_emb.weight
    idx = torch.randint(0, 64, (2, 16))
    logits = model(idx)
    assert logits.shape == (2, 16, 64)
    changed = idx.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % 64
    # Changing tokens from position 10 on leaves the logits before 10 unchanged.
    torch.testing.assert_close(model(changed)[:, :10], logits[:, :10])


def test_cnn_shapes():
    model = SmallCNN(CNNConfig())
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_datasets_are_seeded_next_token_and_labelled():
    a, b = SyntheticTokens(TINY_GPT, seed=5), SyntheticTokens(TINY_GPT, seed=5)
    x, y = a[7]
    assert x.shape == y.shape == (TINY_GPT.seq_len,)
    assert torch.equal(x[1:], y[:-1])  # y is x shifted by one token
    assert torch.equal(a.seqs, b.seqs)
    assert not torch.equal(a.seqs, SyntheticTokens(TINY_GPT, seed=6).seqs)
    assert int(a.seqs.max()) < TINY_GPT.vocab_size
    img, label = SyntheticImages(TINY_CNN, seed=0)[0]
    assert img.shape == (3, 32, 32)
    assert 0 <= int(label) < 10
