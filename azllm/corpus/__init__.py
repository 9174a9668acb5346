"""The corpus stage: language identification, quality rules, decontamination, exact and MinHash deduplication
(on HF datatrove) and mixing. :func:`clean_corpus` runs it; :mod:`azllm.recipes.corpus` calls it with the params."""

from .decontaminate import eval_index, find_contamination
from .language import detect
from .mix import rates, shares, write_mix
from .pipeline import in_input_order, read_jsonl
from .quality import quality_problem
from .stage import MANIFEST, clean_corpus, corpus_key

__all__ = [
    "clean_corpus",
    "corpus_key",
    "MANIFEST",
    "detect",
    "quality_problem",
    "eval_index",
    "find_contamination",
    "rates",
    "shares",
    "write_mix",
    "read_jsonl",
    "in_input_order",
]
