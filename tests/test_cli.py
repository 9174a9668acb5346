"""The command line (azllm.cli): ``--help`` of every subcommand, a quick real call of each one that runs on CPU, and
every ``azllm ...`` / ``python -m azllm ...`` / ``make ...`` command of the README parsed by the real parser."""

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from train_helpers import tiny_params_file

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


def _tiny_params(tmp_path: Path) -> Path:
    train = {
        "batch_size": 2,
        "block_size": 32,
        "max_steps": 3,
        "warmup_steps": 1,
        "eval_steps": 3,
        "save_steps": 3,
        "logging_steps": 1,
        "eval_max_tokens": 256,
        "untimed_steps": 1,
        "report_to": [],
    }
    bench = {"benchmark": {"quick": True, "scale": 2, "max_bytes_per_file": 4000, "block_size": 32}}
    return tiny_params_file(tmp_path / "tiny.yaml", "cli", train, corpus={"enabled": False}, tokens=bench)


def _azllm(args: list[str], tmp_path: Path, monkeypatch, capsys) -> SimpleNamespace:
    """``azllm ARGS`` through the command line's own entry, in this process (``python -m azllm`` and the console
    script are run as processes by test_the_console_entry_and_python_m); its exit code 0 and its stdout."""
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.chdir(REPO)
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.out[-3000:] + out.err[-3000:]
    return SimpleNamespace(stdout=out.out, stderr=out.err)


@pytest.mark.slow  # one tokenizer, one 3-step run (~30 s on 2 cores)
def test_prepare_then_train_runs(tmp_path, monkeypatch, capsys):
    """``azllm prepare`` prints its marker; ``azllm train`` then opens the folder (nothing prepared again)."""
    params = str(_tiny_params(tmp_path))
    p = _azllm(["prepare", params], tmp_path, monkeypatch, capsys)
    marker = Path(p.stdout.strip())
    assert marker.name == "prepared.json" and (marker.parent / "tokenizer" / "tokenizer.json").is_file()
    p = _azllm(["train", params, "--max-steps", "2"], tmp_path, monkeypatch, capsys)
    assert p.stdout.strip().endswith("results.json") and Path(p.stdout.strip()).is_file()
    assert len((marker.parent / "prepare.log.jsonl").read_text().splitlines()) == 1


@pytest.mark.slow  # the encoder variants in fresh processes on 4 KB per file (~60 s)
def test_bench_encoder_runs(tmp_path, monkeypatch, capsys):
    p = _azllm(
        ["bench", "encoder", str(_tiny_params(tmp_path)), "--quick", "--out", str(tmp_path / "b.json")],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert (tmp_path / "b.json").is_file() and "encoder" in p.stdout.lower()


@pytest.mark.slow  # one round of one method in a fresh process (~40 s)
def test_bench_methods_runs(tmp_path, monkeypatch, capsys):
    p = _azllm(
        ["bench", "methods", str(_tiny_params(tmp_path)), "--rounds", "1", "--steps", "2", "--methods", "full"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "round 0 full" in p.stdout and "written:" in p.stdout


@pytest.mark.slow  # one round, both paths, 6 steps (~40 s)
def test_bench_overhead_runs(tmp_path, monkeypatch, capsys):
    p = _azllm(
        ["bench", "overhead", str(_tiny_params(tmp_path)), "--rounds", "1", "--steps", "6"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "median over 1 rounds" in p.stdout and "ratio" in p.stdout


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


@pytest.mark.slow  # 8 child processes (~50 s on 2 idle cores; more when the machine is shared)
def test_gpu_entry_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # the notebook's kernel runs as under make (conftest)
    p = _azllm(["bench", "gpu", "--dry-run", "--reports", str(tmp_path)], tmp_path, monkeypatch, capsys)
    m = json.loads((tmp_path / "gpu-dry-run" / "metrics.json").read_text())  # under --reports
    rows = {r["variant"]: r for r in m["metrics"]["benchmark"]["variants"]}
    assert set(rows) == {"baseline", "ckpt", "liger", "liger+ckpt", "lora", "lora+ckpt", "qlora", "qlora+ckpt"}
    for name in ("baseline", "ckpt", "lora", "lora+ckpt", "qlora", "qlora+ckpt"):
        assert rows[name]["status"] == "ok", rows[name]
    for name in ("liger", "liger+ckpt"):
        assert rows[name]["status"] in ("ok", "unavailable")
        if rows[name]["status"] == "unavailable":
            assert "not available on this device" in rows[name]["note"]
    assert "| variant |" in p.stdout and "job: 1e+09 tokens on 1 x ml.p4d.24xlarge" in p.stdout
    assert "spot $" in p.stdout
    assert (tmp_path / "gpu-dry-run" / "04_benchmark.html").is_file()
