"""The Trainer callbacks (azllm.callbacks): the throughput clock, the stop on a signal, the rows-first schedule."""

import signal
import types

import torch

from azllm.callbacks import RowsFirstCallback, StopOnSignalCallback, ThroughputCallback


def test_throughput_clock_syncs_a_gpu_only_where_the_trainer_does(monkeypatch):
    """On CUDA the clock is read (with a device sync) only at logging, evaluation, save and last steps; every step
    between two readings is credited their mean. On CPU every step is timed."""
    syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: syncs.append(1))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a, **k: None)
    cb = ThroughputCallback(tokens_per_step=100, untimed_steps=2)
    cb.cuda = True
    state = types.SimpleNamespace(global_step=0)
    cb.on_train_begin(None, state, None)
    for step in range(1, 21):
        state.global_step = step
        control = types.SimpleNamespace(
            should_log=step % 5 == 0, should_evaluate=step == 10, should_save=False, should_training_stop=step == 20
        )
        cb.on_step_end(None, state, control)
        if control.should_evaluate:
            cb.on_evaluate(None, state, control)
    assert syncs == [1] * 4  # steps 5, 10, 15, 20: no other step synchronizes the device
    assert len(cb.step_times) == 5 + 5  # 5-10 timed; after the evaluation at 10, 10-15 is skipped; 15-20 timed
    cpu = ThroughputCallback(tokens_per_step=100, untimed_steps=2)
    cpu.cuda = False
    cpu.on_train_begin(None, types.SimpleNamespace(global_step=0), None)
    for step in range(1, 9):
        cpu.on_step_end(
            None,
            types.SimpleNamespace(global_step=step),
            types.SimpleNamespace(
                should_log=False, should_evaluate=False, should_save=False, should_training_stop=False
            ),
        )
    assert len(cpu.step_times) == 8 - 2 and len(syncs) == 4


def test_a_signal_stops_after_the_step_with_a_checkpoint():
    """One process: SIGTERM sets the flag; the next step end asks the Trainer to save and stop (no collective)."""
    cb = StopOnSignalCallback()
    state = types.SimpleNamespace(global_step=3)
    args = types.SimpleNamespace(device=torch.device("cpu"))
    cb.on_train_begin(args, state, None)
    try:
        control = types.SimpleNamespace(
            should_log=False, should_evaluate=False, should_save=False, should_training_stop=False
        )
        cb.on_step_end(args, state, control)
        assert not control.should_save and cb.stopped is None
        signal.raise_signal(signal.SIGTERM)
        cb.on_step_end(args, state, control)
        assert control.should_save and control.should_training_stop and cb.stopped == cb.received == "SIGTERM"
    finally:
        cb.on_train_end(args, state, control)
    assert signal.getsignal(signal.SIGTERM) is not cb._handler  # the old handler is back


def test_rows_first_zeroes_every_other_gradient_for_its_steps():
    w, rows = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    model = torch.nn.Module()
    model.lora_A, model.trainable_tokens_delta = w, rows
    w.grad, rows.grad = torch.ones(2), torch.ones(2)
    cb = RowsFirstCallback(n_steps=1)
    cb.on_pre_optimizer_step(None, types.SimpleNamespace(global_step=0), None, model=model)
    assert rows.grad is not None and (w.grad is None or not w.grad.any())
