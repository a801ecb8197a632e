"""The per-step loss: captured from backward() without touching the loop, read off the training thread.

Each loop records the loss it computed itself (``.item()``, after the step); the profiler's figures
are checked against those values.
"""

import dataclasses
import json
import math
import sqlite3

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.reader import read_steps
from profilers.contract.records import StepRecord
from profilers.contract.summarize import loss_summary
from profilers.runtime import hooks
from profilers.runtime.store import RunStore

FAST = {"quiet": True, "deep_profile": False, "count_flops": False}


def model_and_data(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    gen = torch.Generator().manual_seed(seed + 1)
    return model, gen


def batch(gen, n=32):
    return torch.randn(n, 16, generator=gen), torch.randint(0, 4, (n,), generator=gen)


def plain_loop(steps, backward=lambda loss: loss.backward()):
    model, gen = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    own = []
    for _ in range(steps):
        x, y = batch(gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        backward(loss)
        opt.step()
        own.append(loss.item())
    return own


def strict_json(summary):
    """summary.json as written must be valid JSON: no NaN or Infinity tokens."""

    def refuse(token):
        raise ValueError(f"invalid JSON constant {token}")

    return json.loads(json.dumps(summary, allow_nan=False), parse_constant=refuse)


def test_loss_per_step_equals_the_loss_the_loop_computed(tmp_path):
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        own = plain_loop(12)
    loss = prof.summary["loss"]
    assert loss["per_step"] == pytest.approx(own, rel=1e-6)
    assert loss["first"] == pytest.approx(own[0], rel=1e-6)
    assert loss["last"] == pytest.approx(own[-1], rel=1e-6)
    assert loss["min"] == pytest.approx(min(own), rel=1e-6)
    assert loss["last_mean"] == pytest.approx(sum(own[-5:]) / 5, rel=1e-6)
    assert loss["non_finite_steps"] == 0
    assert loss["first_non_finite_step"] is None
    stored = [s.loss for s in read_steps(tmp_path / "run" / "run.db")]
    assert stored == pytest.approx(own, rel=1e-6)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["loss"]["per_step"] == pytest.approx(own, rel=1e-6)


def test_torch_autograd_backward_of_a_loss_is_recorded(tmp_path):
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        own = plain_loop(8, backward=lambda loss: torch.autograd.backward([loss]))
    assert prof.summary["loss"]["per_step"] == pytest.approx(own, rel=1e-6)


def test_fp16_grad_scaler_records_the_unscaled_loss(tmp_path):
    model, gen = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    own, scaled_values = [], []
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        for _ in range(10):
            x, y = batch(gen)
            with torch.autocast("cpu", dtype=torch.float16):
                loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            scaled = scaler.scale(loss)
            scaled.backward()
            scaler.step(opt)
            scaler.update()
            own.append(loss.item())
            scaled_values.append(scaled.item())
    assert scaled_values[0] == pytest.approx(1024 * own[0], rel=1e-3)  # the scaler did scale
    assert prof.summary["loss"]["per_step"] == pytest.approx(own, rel=1e-6)
    assert prof.summary["precision"] == "fp16"
    assert torch.amp.GradScaler.scale.__module__ == "torch.amp.grad_scaler"  # unpatched afterwards


def test_gradient_accumulation_averages_the_micro_batch_losses(tmp_path):
    model, gen = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    own = []
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        for _ in range(8):
            opt.zero_grad()
            micro = []
            for n in (8, 16, 24, 32):  # different micro-batches, different losses
                x, y = batch(gen, n)
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                micro.append(loss.item())
            opt.step()
            own.append(sum(micro) / len(micro))
            assert len(set(micro)) == 4
    assert prof.summary["steps"] == 8
    assert prof.summary["loss"]["per_step"] == pytest.approx(own, rel=1e-6)


def test_manual_updates_and_explicit_steps_record_their_losses(tmp_path):
    model, gen = model_and_data()
    own = []
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        for _ in range(20):  # no optimizer: steps are found from the backward passes
            x, y = batch(gen)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
            own.append(loss.item())
    assert prof.summary["step_mode"] == "backward"
    assert prof.summary["loss"]["per_step"] == pytest.approx(own, rel=1e-6)

    model, gen = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    own = []
    with autotune.profile(run_dir=tmp_path / "explicit", **FAST) as prof:
        for _ in range(6):
            micro = []
            for _ in range(2):  # two optimizer steps per explicit step (a GAN-like loop)
                x, y = batch(gen)
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                micro.append(loss.item())
            autotune.step()
            own.append(sum(micro) / 2)
    assert prof.summary["step_mode"] == "explicit"
    assert prof.summary["loss"]["per_step"] == pytest.approx(own, rel=1e-6)


def test_non_scalar_backward_records_no_loss_and_nothing_breaks(tmp_path):
    model, gen = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        for _ in range(8):
            x, _ = batch(gen)
            out = model(x)
            opt.zero_grad()
            out.backward(torch.ones_like(out) / out.numel())
            opt.step()
    s = prof.summary
    assert s["steps"] == 8
    assert s["loss"] is None
    assert s["warnings"] == []
    assert [r.loss for r in read_steps(tmp_path / "run" / "run.db")] == [None] * 8


def test_non_finite_losses_are_kept_faithfully(tmp_path):
    model, gen = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with autotune.profile(run_dir=tmp_path / "run", **FAST) as prof:
        for i in range(1, 9):
            x, y = batch(gen)
            loss = nn.functional.cross_entropy(model(x), y)
            if i == 5:
                loss = loss * float("inf")
            opt.zero_grad()
            loss.backward()
            opt.step()
    stored = [r.loss for r in read_steps(tmp_path / "run" / "run.db")]
    assert stored[4] == math.inf
    assert all(math.isnan(v) for v in stored[5:])  # the inf gradient made every weight NaN
    assert all(math.isfinite(v) for v in stored[:4])
    loss = strict_json(prof.summary)["loss"]
    assert loss["non_finite_steps"] == 4
    assert loss["first_non_finite_step"] == 5
    assert loss["per_step"][4:] == [None] * 4
    assert loss["last"] is None and loss["last_mean"] is None
    assert loss["min"] == pytest.approx(min(stored[:4]))
    strict_json(json.loads((tmp_path / "run" / "summary.json").read_text()))


def step(n, loss, kind="measured"):
    return StepRecord(n, 0, 0, 10, 10, 0, 0, 0, 0, 8, None, kind, loss)


def test_loss_summary_of_records():
    assert loss_summary([step(1, None), step(2, None)]) is None
    steps = [step(1, 2.0, "warmup")] + [step(n, 1.0 / n) for n in range(2, 10)] + [step(10, None)]
    s = loss_summary(steps)
    assert s.first == 2.0
    assert s.last == pytest.approx(1 / 9)
    assert s.min == pytest.approx(1 / 9)
    assert s.last_mean == pytest.approx(sum(1 / n for n in range(5, 10)) / 5)
    assert s.per_step[-1] is None and len(s.per_step) == 10
    huge = loss_summary([step(n, 1e308) for n in range(1, 4)])
    assert huge.last_mean == pytest.approx(1e308)  # the mean does not overflow


# Steps table of a store written before the loss column existed.
OLD_STEPS_TABLE = """CREATE TABLE steps (
    rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL, data_ns INTEGER NOT NULL, forward_ns INTEGER NOT NULL,
    backward_ns INTEGER NOT NULL, optimizer_ns INTEGER NOT NULL, other_ns INTEGER NOT NULL,
    samples INTEGER, tokens INTEGER, kind TEXT NOT NULL, PRIMARY KEY (rank, step))"""


def test_a_store_without_the_loss_column_still_reads_and_takes_new_steps(tmp_path):
    path = tmp_path / "run.db"
    conn = sqlite3.connect(path)
    conn.execute(OLD_STEPS_TABLE)
    conn.execute("INSERT INTO steps VALUES (0, 1, 5, 100, 10, 20, 30, 40, 0, 8, NULL, 'warmup')")
    conn.commit()
    conn.close()
    old = read_steps(path)
    assert len(old) == 1
    assert old[0].loss is None and old[0].duration_ns == 100 and old[0].kind == "warmup"
    assert old[0].eval_ns == 0  # the eval column came later still
    assert old[0].phases_timed is True  # and later still the flag of steps whose phases were not timed
    store = RunStore(path)  # a writer adds the columns
    untimed = dataclasses.replace(step(4, 0.5), phases_timed=False)
    store.add_steps([step(2, float("nan")), step(3, -math.inf), untimed])
    store.close()
    assert [r.eval_ns for r in read_steps(path)] == [0, 0, 0, 0]
    assert [r.phases_timed for r in read_steps(path)] == [True, True, True, False]
    losses = [r.loss for r in read_steps(path)]
    assert losses[0] is None
    assert math.isnan(losses[1])
    assert losses[2:] == [-math.inf, 0.5]


def test_a_loss_capture_fault_is_reported_once_and_training_goes_on(tmp_path, monkeypatch, capsys):
    def boom(value):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(hooks, "scalar_loss", boom)
    with autotune.profile(run_dir=tmp_path / "run", deep_profile=False, count_flops=False) as prof:
        own = plain_loop(10)
    assert own == plain_loop(10)  # the training itself is untouched
    assert prof.summary["steps"] == 10
    assert prof.summary["loss"] is None
    err = capsys.readouterr().err
    assert err.count("autotune: warning: loss capture failed") == 1
    assert torch.Tensor.backward.__module__ == "torch._tensor"


def test_a_fault_reading_the_loss_is_reported_once_and_the_steps_are_kept(tmp_path, monkeypatch, capsys):
    def boom(tensors):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(hooks, "read_losses", boom)
    with autotune.profile(run_dir=tmp_path / "run", deep_profile=False, count_flops=False) as prof:
        plain_loop(10)
    assert prof.summary["steps"] == 10
    assert prof.summary["loss"] is None
    assert len(read_steps(tmp_path / "run" / "run.db")) == 10
    assert capsys.readouterr().err.count("loss capture failed") == 1
