"""The command line (azllm.cli): ``--help`` of every subcommand, a quick real call of each one that runs on CPU, and
every ``azllm ...`` / ``python -m azllm ...`` / ``make ...`` command of the README parsed by the real parser."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import azllm, tiny_params

from azllm.cli import main, parser
from conftest import REPO

SUBCOMMANDS = [
    ["run"],
    ["prepare"],
    ["train"],
    ["eval"],
    ["launch"],
    ["bench"],
    ["bench", "encoder"],
    ["bench", "methods"],
    ["bench", "overhead"],
    ["bench", "gpu"],
    ["bench", "eval"],
    ["bench", "prefer"],
    ["lock-env"],
    ["results"],
    ["publish"],
    ["sft"],
    ["prefer"],
    ["sweep"],
    ["distill"],
    ["deploy"],
    ["bench", "sft"],
    ["bench", "scale"],
    ["bench", "peers"],
]


@pytest.mark.parametrize("cmd", SUBCOMMANDS, ids=" ".join)
def test_help_of_every_subcommand(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([*cmd, "--help"])
    assert e.value.code == 0
    assert f"usage: azllm {' '.join(cmd)}" in capsys.readouterr().out


def test_every_subcommand_is_in_the_list():
    """SUBCOMMANDS above covers the parser's own list (a new command gets its --help test)."""
    ap = parser()
    top = next(a for a in ap._actions if a.dest == "cmd").choices
    bench = next(a for a in top["bench"]._actions if a.dest == "bench").choices
    assert {c[0] for c in SUBCOMMANDS} == set(top)
    assert {c[1] for c in SUBCOMMANDS if len(c) == 2} == set(bench)


def test_the_console_entry_and_python_m(tmp_path):
    """``python -m azllm`` and the installed ``azllm`` script are the same command line."""
    for argv in ([sys.executable, "-m", "azllm", "--help"], [str(Path(sys.executable).parent / "azllm"), "--help"]):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 0 and "bench encoder PARAMS" in p.stdout, p.stderr[-2000:]


def test_results_into_a_pipe_its_reader_closed_ends_with_1_and_no_traceback():
    """``azllm results docs/default.json | head``: once the reader has gone, the rest of the record is not written
    and nothing is said of it (before: a BrokenPipeError traceback). Here the reader is gone before the first write,
    so the pipe is broken whatever the timing; another command keeps the error (a long run's broken pipe is one)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "azllm", "results", "docs/default.json"],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=REPO,
        )
    finally:
        os.close(w)
    assert (p.returncode, p.stderr) == (1, "")


def test_a_bad_params_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {lr_max: 1}\n")
    assert main(["train", str(bad)]) == 2
    assert "unknown params key train.lr_max" in capsys.readouterr().err


def test_lock_env_writes_what_the_lock_says(tmp_path):
    """``lock-env`` rewrites environment.yml from requirements.lock; on this repository it changes nothing."""
    before = (REPO / "environment.yml").read_text()
    assert main(["lock-env"]) == 0
    assert (REPO / "environment.yml").read_text() == before


@pytest.mark.slow  # one tokenizer, one 3-step run (~30 s on 2 cores)
def test_prepare_then_train_runs(tmp_path, monkeypatch, capsys):
    """``azllm prepare`` prints its marker; ``azllm train`` then opens the folder (nothing prepared again)."""
    params = str(tiny_params(tmp_path))
    p = azllm(["prepare", params], tmp_path, monkeypatch, capsys)
    marker = Path(p.stdout.strip())
    assert marker.name == "prepared.json" and (marker.parent / "tokenizer" / "tokenizer.json").is_file()
    p = azllm(["train", params, "--max-steps", "2"], tmp_path, monkeypatch, capsys)
    assert p.stdout.strip().endswith("results.json") and Path(p.stdout.strip()).is_file()
    assert len((marker.parent / "prepare.log.jsonl").read_text().splitlines()) == 1


# ---------------------------------------------------------------------------------------- the README's commands
# the README and its pages (docs/): every command either shows is run here
README = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
PLACEHOLDERS = {
    "PARAMS": "params/default.yaml",
    "params/my_gpu.yaml": "params/gpu.yaml",
    "params/x.yaml": "params/default.yaml",
    "NB": "01_tokenizers",
    "DIR": "/tmp/x",
    "N": "2",
    "X": "0.1",
    "M": "lora",
    "FILE": "/tmp/x.json",
}


def readme_commands() -> list[str]:
    """Every azllm command line of the README: in code spans and code blocks, ``python -m azllm ...``,
    ``azllm ...``, and the ``-m azllm ...`` tail of torchrun / accelerate launch commands."""
    spans = re.findall(r"`([^`\n]+)`", README) + [
        ln for block in re.findall(r"```[a-z]*\n(.*?)```", README, re.S) for ln in block.splitlines()
    ]
    out = []
    for s in spans:
        s = s.split("#")[0].strip()
        m = re.search(r"(?:python -m azllm|-m azllm|^azllm)((?:\s+\S+)*)", s)
        if m and not re.match(r"\.\w", m.group(1) or ""):
            out.append(m.group(1).strip())
        elif re.search(r"python -m azllm\.", s):
            out.append("MODULE " + s)
    return out


def test_the_readme_names_no_module_entry_points():
    """The README's commands go through the one command line, never ``python -m azllm.<module>``."""
    assert not [c for c in readme_commands() if c.startswith("MODULE")]


def _command_exists(words: list[str]) -> bool:
    """Whether ``words`` name a command of the parser (its ``--help`` exits 0)."""
    try:
        parser().parse_args([*words, "--help"])
    except SystemExit as e:
        return e.code == 0
    return False


@pytest.mark.parametrize("cmd", sorted(set(c for c in readme_commands() if not c.startswith("MODULE"))))
def test_every_readme_command_parses(cmd, capsys):
    """A full command parses as written (placeholders filled in, its params file exists); one the README elides
    (``azllm launch ...``, ``bench encoder | methods``) names real commands."""
    if not cmd.strip(" ."):
        return
    if "|" in cmd:
        first, *alternatives = [a.split() for a in cmd.split("|")]
        assert _command_exists(first) and all(_command_exists([*first[:-1], *a]) for a in alternatives), cmd
        return
    words = [PLACEHOLDERS.get(w, w) for w in cmd.replace("[", " ").replace("]", " ").split()]
    words = [w for w in words if not re.fullmatch(r"\.\.\.|[A-Z_]+=\S+", w)]
    if "..." in cmd or len(words) == 1:
        assert _command_exists(words), cmd
        return
    args = parser().parse_args(words)  # SystemExit on an unknown command or flag
    params = getattr(args, "params", None)
    if params and params != "/tmp/x.json":
        assert (REPO / params).is_file() or params == "params.yaml", f"README names {params}, which does not exist"


def test_every_make_target_of_the_readme_exists():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    named = set(re.findall(r"`make ([a-z][\w-]*)", README)) | set(re.findall(r"^make ([a-z][\w-]*)", README, re.M))
    assert named and named <= targets, named - targets
