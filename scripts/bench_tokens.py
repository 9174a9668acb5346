"""Benchmark the token-file encoder (issue 3): (a) naive list, (b) per-doc encode + tofile, (c) encode_corpus,
at 1x and Nx the corpus, against the tokenizer's own batch-encode limit; plus get_batch vs a training step.

    AZLLM_DATA_ROOT=/work/shared python scripts/bench_tokens.py          # full: params/tokens.default.yaml
    AZLLM_DATA_ROOT=/work/shared python scripts/bench_tokens.py --quick  # small slice, one round

Prints a table of medians and ratios and writes a JSON (default: artifacts/<run_name>/tokens_benchmark.json).
The tokenizer is the run's main tokenizer (trained once into artifacts/<run_name>/tokenizer) unless --tokenizer.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from azllm.config import artifacts_dir, load_params  # noqa: E402
from azllm.tokenizer import load_tokenizer  # noqa: E402
from azllm.tokens import format_benchmark, main_tokenizer, run_benchmark  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default=None, help="params file (default: params/tokens.default.yaml, "
                                                   "or params/tokens.tiny.yaml with --quick)")
    ap.add_argument("--quick", action="store_true", help="small slice of the corpus, one round")
    ap.add_argument("--tokenizer", default=None, help="tokenizer spec (default: the run's main tokenizer)")
    ap.add_argument("--scale", type=int, default=None, help="the large corpus = the corpus repeated N times")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved rounds (medians)")
    ap.add_argument("--max-bytes-per-file", type=int, default=None, help="cap each corpus file")
    ap.add_argument("--out", default=None, help="JSON output path")
    args = ap.parse_args(argv)
    params_file = args.params or REPO / "params" / ("tokens.tiny.yaml" if args.quick else "tokens.default.yaml")
    bench = {"quick": bool(args.quick)}
    for k, v in (("scale", args.scale), ("repeats", args.repeats), ("max_bytes_per_file", args.max_bytes_per_file)):
        if v is not None:
            bench[k] = v
    P = load_params(params_file, overrides={"tokens": {"benchmark": bench}})
    t0 = time.time()
    tok = load_tokenizer(args.tokenizer) if args.tokenizer else main_tokenizer(P)
    print(f"tokenizer: {tok.name} ({tok.kind}, vocab {tok.vocab_size}, {tok.path}) in {time.time() - t0:.1f} s",
          flush=True)
    out = Path(args.out) if args.out else artifacts_dir(P) / "tokens_benchmark.json"
    res = run_benchmark(P, tok, out_json=out)
    c = res["corpus"]
    print(f"\ncorpus: {c['source']}: {c['documents']:,} documents, {c['characters']:,} characters, "
          f"{c['tokens']:,} tokens (with EOS); scale {res['scale']}x, {res['repeats']} round(s), "
          f"{res['machine']['cpu_count']} cores ({res['machine']['processor']})\n")
    print(format_benchmark(res))
    print(f"\nwrote {out} ({time.time() - t0:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
