"""A model's repeated blocks, however they are held: a ModuleList, a Sequential, stages of a ResNet."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autotune
from autotune.repeated_blocks import repeated_blocks


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k = nn.Linear(width, width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.k(self.q(self.norm1(x)))
        return x + self.down(torch.relu(self.up(self.norm2(x))))


class Gpt(nn.Module):
    """Blocks in a ModuleList beside an embedding and a head with more parameters than all of them."""

    def __init__(self, width: int = 16, layers: int = 3, vocab: int = 5000) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.h = nn.ModuleList(Block(width) for _ in range(layers))
        self.head = nn.Linear(width, vocab)


class Bottleneck(nn.Module):
    def __init__(self, channels: int, downsample: bool = False) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(channels, channels, 1), nn.BatchNorm2d(channels)
        self.conv2, self.bn2 = nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels)
        shortcut = nn.Sequential(nn.Conv2d(channels, channels, 1), nn.BatchNorm2d(channels))
        self.downsample = shortcut if downsample else None


class ResNet(nn.Module):
    """Bottlenecks in four Sequential stages of different widths and lengths (ResNet-50's 3, 4, 6, 3)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 7)
        stages = []
        for width, count in ((8, 3), (16, 4), (32, 6), (64, 3)):
            rest = (Bottleneck(width) for _ in range(count - 1))
            stages.append(nn.Sequential(Bottleneck(width, True), *rest))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(64, 10)


def kinds(model: nn.Module) -> tuple[int, set[str]]:
    found = repeated_blocks(model)
    return len(found), {type(s.block).__name__ for s in found}


def test_blocks_are_the_outer_repeated_kind_not_the_layers_inside_them_nor_the_largest_layer():
    # the head's Linear holds more parameters than the blocks, but it is one; the blocks' Linears are
    # repeated, but inside them
    assert kinds(Gpt()) == (3, {"Block"})


def test_layers_of_an_nn_sequential_are_blocks_with_or_without_activations_between_them():
    assert kinds(nn.Sequential(*(nn.Linear(8, 8) for _ in range(5)))) == (5, {"Linear"})
    pairs = [m for _ in range(4) for m in (nn.Linear(8, 8), nn.GELU())]
    assert kinds(nn.Sequential(*pairs)) == (4, {"Linear"})


def test_a_resnets_bottlenecks_are_blocks_across_its_stages():
    assert kinds(ResNet()) == (16, {"Bottleneck"})


def test_sequential_blocks_in_a_module_list_are_the_blocks():
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8)) for _ in range(3))
    model = nn.Module()
    model.blocks, model.heads = blocks, nn.ModuleList([nn.Linear(8, 1), nn.Linear(8, 1)])
    assert kinds(model) == (3, {"Sequential"})


def test_layers_of_different_shapes_are_no_repeated_blocks():
    assert repeated_blocks(nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 2))) == []


def test_checkpointing_a_sequential_stack_wraps_each_layer_and_keeps_its_gradients():
    torch.manual_seed(0)
    plain = nn.Sequential(*(m for _ in range(3) for m in (nn.Linear(8, 8), nn.Tanh())))
    wrapped = nn.Sequential(*(m for _ in range(3) for m in (nn.Linear(8, 8), nn.Tanh())))
    wrapped.load_state_dict(plain.state_dict())
    autotune.prepare(wrapped, activation_checkpointing=True)
    names = [type(m).__name__ for m in wrapped.children()]
    assert names.count("CheckpointWrapper") == 3 and names.count("Tanh") == 3
    x = torch.randn(4, 8)
    plain(x).square().sum().backward()
    wrapped(x).square().sum().backward()
    for a, b in zip(plain.parameters(), wrapped.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad)


def test_checkpointing_a_hugging_face_model_turns_its_kv_cache_off_as_its_own_checkpointing_does():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config)
    assert model.config.use_cache is True
    autotune.prepare(model, activation_checkpointing=True)
    assert model.config.use_cache is False
    assert kinds(model) == (2, {"CheckpointWrapper"})
    out = model(torch.randint(0, 100, (2, 16)), labels=torch.randint(0, 100, (2, 16)))
    out.loss.backward()
    assert out.past_key_values is None or len(out.past_key_values) == 0
