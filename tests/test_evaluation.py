"""azllm.evaluation's one error family: every bad evaluation input is caught by ``except EvalError``."""

import pytest

from azllm.evaluation import EvalDataError, EvalError, EvalModelError, ProbeError, UnknownTaskError


@pytest.mark.parametrize("cls", [EvalDataError, EvalModelError, UnknownTaskError, ProbeError])
def test_every_bad_input_error_is_an_eval_error(cls):
    with pytest.raises(EvalError):
        raise cls("bad input")
