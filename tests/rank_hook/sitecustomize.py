"""The ``sitecustomize`` of the torchrun launches of ``python -m azllm train`` in tests/test_train_distributed.py
(``PYTHONPATH=tests/rank_hook:tests``): in each rank (``RANK`` set; the launcher is left alone),
``azllm.recipes.train.train_model`` runs with tests/train_entry.py's callbacks and writes its records, as the spec
in ``$AZLLM_TEST_RANK_SPEC`` asks (``record``, ``term_at_step``, ``term_rank``). The command itself is the user's."""

import os

if os.environ.get("RANK") is not None and os.environ.get("AZLLM_TEST_RANK_SPEC"):
    import functools
    import json
    from pathlib import Path

    import train_entry

    import azllm.recipes.train as recipe

    _spec = json.loads(Path(os.environ["AZLLM_TEST_RANK_SPEC"]).read_text())
    _train_model = recipe.train_model

    @functools.wraps(_train_model)
    def _recorded(*args, callbacks=None, **kwargs):
        rank, seen = int(os.environ["RANK"]), []
        extra = train_entry.rank_callbacks(_spec, rank, seen)
        r = _train_model(*args, callbacks=[*(callbacks or []), *extra], **kwargs)
        train_entry.write_records(_spec, rank, r, seen)
        return r

    recipe.train_model = _recorded
