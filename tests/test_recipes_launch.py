"""The SageMaker launcher with the real SDK (sagemaker.train.ModelTrainer) and no AWS call: the trainer built from
params/sagemaker.yaml, the staged code folder, the cost printed by `launch --dry-run`, a hub token that reaches the
job's environment and nothing else, and refused params (test_sagemaker runs the staged entry under a simulated
SageMaker job).

The tests that build a ModelTrainer need the azllm[sagemaker] extra. It is not in requirements.lock: every
sagemaker-core 2.x (the SDK 3 core) declares protobuf<7, and the pinned sentencepiece 0.2.3 needs protobuf>=7.36.1 at
run time (0.2.2 would do with protobuf 6 but changes the affix pre-split's pieces). Install it on top of the lock
with `pip install --no-deps sagemaker-train==1.27.0 sagemaker-core==2.27.0 ...` (the README lists the whole set);
without it those tests skip and say why, the others run."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from azllm import memory as mem
from azllm.cli import main
from azllm.config import ParamsError, load_params
from azllm.model import model_config
from azllm.recipes import launch as L

REPO = Path(__file__).resolve().parent.parent
PARAMS = REPO / "params" / "sagemaker.yaml"
FAKE_TOKEN = "hf_FakeTokenForTheLaunchTest0123456789"
NO_SDK = (
    "the azllm[sagemaker] extra is not installed (`make venv` installs requirements-sagemaker.lock with "
    "--no-deps; it is kept out of requirements.lock because sagemaker-core needs "
    "protobuf<7, the pinned sentencepiece protobuf>=7.36.1)"
)


@pytest.fixture
def sdk():
    """The SageMaker SDK's training module, or a skip that says why it is missing."""
    return pytest.importorskip("sagemaker.train", reason=NO_SDK)


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """Every socket connection, DNS lookup and botocore API call is refused and recorded."""
    import botocore.client

    calls = []

    def refuse(what):
        def f(*a, **k):
            calls.append((what, a[1:2] if what == "connect" else a[:1]))
            raise OSError(f"no network in this test: {what}")

        return f

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", refuse("aws api"))
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    return calls


def test_trainer_built_from_params_with_the_real_sdk_and_no_aws_call(sdk, no_aws, tmp_path):
    from sagemaker.train.distributed import Torchrun

    cfg = load_params(PARAMS)
    src = L.stage_source(PARAMS, tmp_path / "source")
    trainer, secrets = L.build_trainer(cfg, src, offline=True)
    assert no_aws == []  # no connection, no DNS lookup, no AWS API call
    assert "SAGEMAKER_VALIDATE_ROLE" not in os.environ and "AWS_EC2_METADATA_DISABLED" not in os.environ
    print(json.dumps(L.describe(trainer, secrets), indent=2))  # shown with -s

    assert isinstance(trainer, sdk.ModelTrainer)
    c = trainer.compute
    assert (c.instance_type, c.instance_count, c.volume_size_in_gb, c.enable_managed_spot_training) == (
        "ml.p4d.24xlarge",
        1,
        200,
        True,
    )
    s = trainer.stopping_condition
    assert (s.max_runtime_in_seconds, s.max_wait_time_in_seconds) == (12 * 3600, 24 * 3600)
    assert trainer.checkpoint_config.s3_uri == "s3://YOUR-BUCKET/azllm/sagemaker/checkpoints"
    assert trainer.checkpoint_config.local_path == "/opt/ml/checkpoints"
    assert isinstance(trainer.distributed, Torchrun) and trainer.distributed.process_count_per_node == 8
    channels = [(i.channel_name, i.data_source) for i in trainer.input_data_config]
    assert channels == [("data", "s3://YOUR-BUCKET/azllm/data")]
    assert trainer.output_data_config.s3_output_path == "s3://YOUR-BUCKET/azllm/sagemaker/output"
    assert trainer.training_image == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313"
    assert trainer.role == cfg.launch.role and trainer.base_job_name == "azllm-sagemaker"
    assert trainer.environment == {
        "NCCL_DEBUG": "WARN",
        "TOKENIZERS_PARALLELISM": "false",
        "AZLLM_CHECKPOINT_DIR": "/opt/ml/checkpoints",
        "HF_TOKEN": FAKE_TOKEN,
    }
    assert secrets == {"HF_TOKEN": FAKE_TOKEN}
    assert trainer.hyperparameters == {"params": "params.yaml", "run_name": "sagemaker", "params_hash": cfg.hash()}
    sc = trainer.source_code
    assert (sc.source_dir, sc.entry_script, sc.requirements) == (str(src), "azllm_train.py", "requirements.txt")


def test_the_staged_code_folder_runs_azllm_train_on_the_params_file(tmp_path):
    src = L.stage_source(PARAMS, tmp_path / "source")
    assert (src / "params.yaml").read_text() == PARAMS.read_text()  # the params file travels with the job
    assert (src / "requirements.txt").read_text() == (REPO / "requirements.lock").read_text()
    assert (src / "azllm" / "__main__.py").is_file() and not list(src.rglob("__pycache__"))
    entry = (src / "azllm_train.py").read_text()
    assert "COMMAND = 'train'" in entry and "main([COMMAND, args.params])" in entry
    # the entry's own folder comes first on sys.path: the staged package is the one imported
    p = subprocess.run(
        [sys.executable, "-c", "import azllm; print(azllm.__file__)"],
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(p.stdout.strip()).resolve() == (src / "azllm" / "__init__.py").resolve()


def test_dry_run_prints_the_cost_and_never_records_the_token(sdk, no_aws, tmp_path, capsys):
    assert main(["launch", str(PARAMS), "--dry-run"]) == 0
    assert no_aws == []
    out = capsys.readouterr().out
    cfg = load_params(PARAMS)
    est = L.estimate(cfg)
    cost = mem.job_cost(
        tokens=3815 * 4 * 4 * 2048 * 8,
        tokens_per_s=12000 * 8,
        instances=1,
        price_per_hour=37.69,
        spot_price_per_hour=11.31,
        checkpoint_bytes=est["checkpoint_bytes"],
        keep_checkpoints=2,
        storage_price_gb_month=0.023,
    )
    assert est["hours"] == cost["hours"] and est["spot"] == cost["spot"]
    print(out[: out.index("{")])  # the cost lines, shown with -s
    assert f"on-demand    ${cost['on_demand']:,.2f}" in out and f"spot         ${cost['spot']:,.2f}" in out
    assert "1,000,079,360 = 3815 steps x 262,144 tokens" in out and f"{cost['hours']:.2f} h" in out
    assert FAKE_TOKEN not in out
    record_file = tmp_path / "artifacts" / "sagemaker" / "launch" / "job.json"
    text = record_file.read_text()
    assert FAKE_TOKEN not in text
    record = json.loads(text)
    assert record["trainer"]["environment"]["HF_TOKEN"] == L.REDACTED and record["forwarded_env"] == ["HF_TOKEN"]
    assert FAKE_TOKEN not in json.dumps(record["trainer"]["hyperparameters"])
    assert record["trainer"]["distributed"] == {"type": "Torchrun", "process_count_per_node": 8}
    assert record["cost"]["total_spot"] == pytest.approx(cost["total_spot"])
    assert (Path(record["source_dir"]) / "params.yaml").is_file()


def test_on_demand_job_with_a_token_files_channel(sdk, no_aws, tmp_path):
    cfg = load_params(
        PARAMS, overrides={"launch": {"spot": False, "tokens_s3_uri": "s3://b/tokens", "forward_env": []}}
    )
    trainer, secrets = L.build_trainer(cfg, L.stage_source(PARAMS, tmp_path / "source"), offline=True)
    assert no_aws == [] and secrets == {} and "HF_TOKEN" not in trainer.environment
    assert trainer.compute.enable_managed_spot_training is False
    assert trainer.stopping_condition.max_wait_time_in_seconds is None
    assert [i.channel_name for i in trainer.input_data_config] == ["data", "tokens"]


def test_a_launch_starts_the_job_it_describes(sdk, no_aws, tmp_path, monkeypatch, capsys):
    """The non-dry-run path with ModelTrainer.train replaced (and the role check off, as there is no AWS here)."""
    p = yaml.safe_load(PARAMS.read_text().replace("YOUR-ACCOUNT-ID", "111122223333").replace("YOUR-", "my-"))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(p))
    started = []

    def train(self, **kw):
        started.append((kw, dict(self.environment)))
        self._latest_training_job = type("Job", (), {"training_job_name": "azllm-sagemaker-2026"})()

    monkeypatch.setattr(sdk.ModelTrainer, "train", train)
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    record = L.launch(tmp_path / "p.yaml", out_dir=tmp_path / "out")
    assert no_aws == [] and started == [({"wait": False, "logs": False}, {**started[0][1], "HF_TOKEN": FAKE_TOKEN})]
    text = (tmp_path / "out" / "job.json").read_text()
    assert json.loads(text)["training_job_name"] == record["training_job_name"] == "azllm-sagemaker-2026"
    out = capsys.readouterr().out
    assert FAKE_TOKEN not in text and FAKE_TOKEN not in out
    assert "on-demand    $109.07" in out and "started SageMaker training job azllm-sagemaker-2026" in out


def test_a_real_launch_refuses_placeholders_before_any_aws_call(no_aws):
    with pytest.raises(ParamsError, match="launch.role, launch.output_s3_uri.*placeholders"):
        L.launch(PARAMS, dry_run=False)
    assert no_aws == []


@pytest.mark.parametrize(
    "launch, msg",
    [
        ({"role": None}, "launch.role"),
        ({"data_s3_uri": "/data/az"}, "launch.data_s3_uri: an s3:// URI"),
        ({"max_run_hours": 30.0}, "max_wait_hours .* at least"),
        ({"region": "eu-west-1"}, "launch.image is in us-east-1"),
    ],
)
def test_launch_params_that_sagemaker_would_refuse(no_aws, tmp_path, launch, msg):
    p = yaml.safe_load(PARAMS.read_text())
    p["launch"].update(launch)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(p))
    with pytest.raises(ParamsError, match=msg):
        L.launch(tmp_path / "p.yaml", dry_run=True)


@pytest.mark.parametrize("env", [{"HF_TOKEN": "x"}, {"WANDB_API_KEY": "x"}, {"HUB": FAKE_TOKEN}])
def test_secrets_in_the_launch_environment_are_refused(env):
    with pytest.raises(ParamsError, match="looks like a secret"):
        load_params(PARAMS, overrides={"launch": {"environment": env}})


def test_the_default_image_is_what_the_sdk_gives_for_pytorch_training(sdk, no_aws):
    from sagemaker.core import image_uris

    uri = image_uris.retrieve(
        framework="pytorch",
        region="us-east-1",
        version="2.10.0",
        py_version="py313",
        instance_type="ml.p4d.24xlarge",
        image_scope="training",
    )
    assert uri == load_params(None).launch.image == load_params(PARAMS).launch.image
    assert no_aws == []


def test_the_cost_printed_before_a_launch_is_job_cost_of_the_job_launched():
    cfg = load_params(PARAMS)
    est = L.estimate(cfg)
    n = est["checkpoint_bytes"]
    assert n == 12 * mem.parameter_count(model_config("1b", 32000))["total"]  # fp32 weights + two AdamW states
    assert est == {
        **est,
        **mem.job_cost(
            tokens=1_000_079_360,
            tokens_per_s=96_000,
            instances=1,
            price_per_hour=37.69,
            spot_price_per_hour=11.31,
            checkpoint_bytes=n,
            keep_checkpoints=2,
            storage_price_gb_month=0.023,
        ),
    }
    text = L.cost_lines(est, spot=True, max_run_hours=2.0)
    assert "$32.73 (spot, this job) vs $109.07 (on-demand)" in text and "WARNING" in text  # 2.89 h > 2 h
    none = L.estimate(load_params(PARAMS, overrides={"benchmark": {"job": {"tokens_per_s": None}}}))
    assert "hours" not in none and "set benchmark.job.tokens_per_s" in L.cost_lines(none, spot=True, max_run_hours=1)


def test_launch_without_the_sdk_says_what_to_install(monkeypatch, capsys):
    def missing():
        raise ImportError("python -m azllm launch needs the SageMaker SDK, the azllm[sagemaker] extra")

    monkeypatch.setattr(L, "_sdk", missing)
    assert main(["launch", str(PARAMS), "--dry-run"]) == 2
    assert "azllm[sagemaker]" in capsys.readouterr().err


def test_the_extra_pins_exact_versions():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["sagemaker"]
    assert "sagemaker-train==1.27.0" in extra and all("==" in e for e in extra)


SFT_PARAMS = REPO / "params" / "sft_sagemaker.yaml"


def test_the_sft_job_dry_run_prints_the_job_and_its_cost_with_no_network(sdk, no_aws, tmp_path, capsys):
    """`azllm launch params/sft_sagemaker.yaml --dry-run`: the real SDK builds the job with no connection and no AWS
    call; the staged entry runs `azllm sft`; QLoRA on the hub base Llama-3.2-1B, the chat data as the data channel,
    spot, only the last checkpoint kept; the cost is job_cost of sft's steps x batch x max_length, with the
    checkpoint storage of the QLoRA adapter of the 1B shape; HF_TOKEN forwarded and redacted."""
    assert main(["launch", str(SFT_PARAMS), "--dry-run"]) == 0
    assert no_aws == []
    out = capsys.readouterr().out
    cfg = load_params(SFT_PARAMS)
    assert (cfg.launch.command, cfg.sft.base, cfg.sft.method, cfg.sft.optimizer) == (
        "sft",
        "meta-llama/Llama-3.2-1B",
        "qlora",
        "paged_adamw_8bit",
    )
    q, lo = cfg.model.quant, cfg.model.lora
    assert (q.bits, q.quant_type, q.double_quant, q.compute_dtype) == (4, "nf4", True, "bf16")
    assert (lo.r, lo.alpha, lo.use_rslora, len(lo.target_modules)) == (16, 32, True, 7)
    est = L.estimate(cfg)
    assert est["tokens"] == 270 * 4 * 4 * 1024 and est["keep_checkpoints"] == 1 and est["checkpoint_bytes"] > 0
    cost = mem.job_cost(
        tokens=est["tokens"],
        tokens_per_s=2500,
        instances=1,
        price_per_hour=1.515,
        spot_price_per_hour=0.55,
        checkpoint_bytes=est["checkpoint_bytes"],
        keep_checkpoints=1,
        storage_price_gb_month=0.023,
    )
    assert f"spot         ${cost['spot']:,.2f}" in out and "4,423,680 = 270 steps x 16,384 tokens" in out
    assert "at most this many tokens" in out and FAKE_TOKEN not in out
    record = json.loads((tmp_path / "artifacts" / "sft-sagemaker" / "launch" / "job.json").read_text())
    t = record["trainer"]
    assert t["environment"]["HF_TOKEN"] == L.REDACTED and t["compute"]["enable_managed_spot_training"] is True
    assert [c["channel_name"] for c in t["input_data_config"]] == ["data"]
    entry = (Path(record["source_dir"]) / "azllm_train.py").read_text()
    assert "COMMAND = 'sft'" in entry


DPO_PARAMS = REPO / "params" / "dpo_sagemaker.yaml"


def test_the_dpo_job_dry_run_prints_the_job_and_its_cost_with_no_network(sdk, no_aws, tmp_path, capsys):
    """`azllm launch params/dpo_sagemaker.yaml --dry-run`: the real SDK builds a spot job whose staged entry runs
    `azllm prefer`; DPO with QLoRA on the hub base Llama-3.2-1B-Instruct; the cost counts a chosen and a rejected
    answer per pair; HF_TOKEN forwarded and redacted."""
    assert main(["launch", str(DPO_PARAMS), "--dry-run"]) == 0
    assert no_aws == []
    out = capsys.readouterr().out
    cfg = load_params(DPO_PARAMS)
    p = cfg.preference
    assert (cfg.launch.command, p.base, p.method, p.train_method) == (
        "prefer",
        "meta-llama/Llama-3.2-1B-Instruct",
        "dpo",
        "qlora",
    )
    est = L.estimate(cfg)
    assert est["tokens"] == 120 * 4 * 4 * 1024 * 2 == cfg.benchmark.job.tokens and est["checkpoint_bytes"] > 0
    assert "3,932,160 = 120 steps x 32,768 tokens" in out and "chosen and rejected" in out and FAKE_TOKEN not in out
    record = json.loads((tmp_path / "artifacts" / "dpo-sagemaker" / "launch" / "job.json").read_text())
    t = record["trainer"]
    assert t["environment"]["HF_TOKEN"] == L.REDACTED and t["compute"]["enable_managed_spot_training"] is True
    assert [c["channel_name"] for c in t["input_data_config"]] == ["data"]
    assert "COMMAND = 'prefer'" in (Path(record["source_dir"]) / "azllm_train.py").read_text()
