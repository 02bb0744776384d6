"""The one training loop: its learning-rate plan, the log it keeps, and resuming a stopped run (a tiny linear model)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lab.training.loop import Schedule, learning_rate, optimise  # noqa: E402

PLAN = [(float(x), 2.0 * x + 1.0) for x in (1, 2, 3, 1, 2, 3)]  # each example twice


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(1, 1)


def _run_step(model, stop_at: int | None = None):
    def run_step(number: int, example) -> dict:
        if number == stop_at:
            raise KeyboardInterrupt
        x, y = example
        loss = (model(torch.tensor([[x]])) - y).pow(2).mean()
        loss.backward()
        return {"loss": round(loss.item(), 4)}

    return run_step


def test_each_step_runs_at_the_planned_rate_and_is_logged_in_order() -> None:
    model = _model()
    schedule = Schedule(lr=0.1, warmup_steps=2)
    log = optimise(model, PLAN, _run_step(model), schedule)
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert [r["lr"] for r in log] == [learning_rate(s, len(PLAN), schedule) for s in range(len(PLAN))]
    assert log[0]["lr"] == 0.05 and log[1]["lr"] == 0.1 and log[-1]["lr"] == pytest.approx(0.1 / 4)
    assert list(log[0]) == ["step", "loss", "lr", "seconds"]
    assert all(log[i + 3]["loss"] < log[i]["loss"] for i in range(3))  # each example's loss fell on its second pass


def test_a_stopped_run_resumes_from_its_checkpoint_and_ends_where_an_unbroken_one_does(tmp_path) -> None:
    schedule = Schedule(lr=0.01, warmup_steps=1, weight_decay=0.01, every=2)
    unbroken = _model()
    optimise(unbroken, PLAN, _run_step(unbroken), schedule)

    checkpoint = tmp_path / "train.pt"
    stopped = _model()
    with pytest.raises(KeyboardInterrupt):
        optimise(stopped, PLAN, _run_step(stopped, stop_at=3), schedule, checkpoint)
    resumed = _model()
    log = optimise(resumed, PLAN, _run_step(resumed), schedule, checkpoint)
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]  # steps 1-2 from the checkpoint, 3-6 run again
    for a, b in zip(unbroken.parameters(), resumed.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)

    with pytest.raises(ValueError, match="another run"):
        optimise(_model(), PLAN[:4], _run_step(_model()), schedule, checkpoint)
