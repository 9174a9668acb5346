"""The tokenizer study's display tables: labels and column order, the recipe's numbers unchanged."""

from azllm import tokenizer_tables


def _eval_row(eval_set, tokenizer, fertility, **extra):
    return {"eval_set": eval_set, "tokenizer": tokenizer, "fertility": fertility, "vocab_size": 32000, **extra}


def test_tokenizer_tables_one_table_per_set_sorted_by_fertility():
    rows = [
        _eval_row("flores", "bpe-32k", 1.44, roundtrip=1.0),
        _eval_row("flores", "unigram-32k", 1.50, roundtrip=1.0),
        _eval_row("flores", "aztc", 1.47, roundtrip=0.99),
        _eval_row("xwmt", "bpe-32k", 1.52, roundtrip=1.0),
    ]
    tables = tokenizer_tables.tokenizer_tables(rows)
    assert list(tables) == ["flores", "xwmt"]
    flores = tables["flores"]
    assert list(flores.index) == ["bpe-32k", "aztc", "unigram-32k"]
    assert list(flores.columns) == ["vocab_size", "fertility", "roundtrip"]
    assert flores.loc["aztc", "roundtrip"] == 0.99


def test_one_at_a_time_table_gives_each_change_its_numbers_and_deltas():
    rows = [
        {
            "change": "the run's tokenizer",
            "train_s": 4.0,
            "fertility": {"flores": 1.44, "xwmt": 1.525},
            "fertility_delta": {"flores": 0.0, "xwmt": 0.0},
            "raw_roundtrip_failures": {"flores": 0, "xwmt": 0},
            "morph_recall": 14.75,
            "morph_precision": 46.71,
        },
        {
            "change": "unigram",
            "train_s": 9.5,
            "fertility": {"flores": 1.4966, "xwmt": 1.6},
            "fertility_delta": {"flores": 0.0566, "xwmt": 0.075},
            "raw_roundtrip_failures": {"flores": 3, "xwmt": 1},
            "morph_recall": 20.0,
            "morph_precision": 40.0,
        },
    ]
    table = tokenizer_tables.one_at_a_time_table(rows)
    assert list(table.index) == ["the run's tokenizer", "unigram"]
    assert list(table.columns)[:6] == [
        "flores tokens/word",
        "flores Δ",
        "xwmt tokens/word",
        "xwmt Δ",
        "flores raw lines lost",
        "xwmt raw lines lost",
    ]
    assert table.loc["unigram", "flores tokens/word"] == 1.4966
    assert table.loc["unigram", "xwmt Δ"] == 0.075
    assert table.loc["unigram", "xwmt raw lines lost"] == 1
    assert list(table.columns)[6:] == [  # labelled from tables.LABELS, present in the rows or not
        "morph recall (words)",
        "morph precision (words)",
        "morph recall (lexicon)",
        "morph precision (lexicon)",
        "train s",
    ]


def test_recipe_table_flattens_each_step_per_set():
    rows = [
        {"step": "raw", "corpus_mb": 27.0, "train_s": 5.0, "fertility": {"flores": 1.5}, "roundtrip": {"flores": 1.0}},
        {"step": "cleaned", "corpus_mb": 20.0, "train_s": 4.0, "fertility": {"flores": 1.45}, "roundtrip": {}},
    ]
    table = tokenizer_tables.recipe_table(rows)
    assert list(table.index) == ["raw", "cleaned"]
    assert table.loc["cleaned", "flores fertility"] == 1.45
    assert table.loc["raw", "flores roundtrip"] == 1.0
    assert table["flores roundtrip"].isna().tolist() == [False, True]


def test_best_sentence_says_whether_the_target_was_reached():
    best = {
        "best_vocab_size": 32000,
        "best": "bpe-32k",
        "selected_on": "flores",
        "best_fertility": 1.4401,
        "fertility_target": 1.4,
        "target_reached": False,
    }
    assert tokenizer_tables.best_sentence(best) == (
        "best 32000-piece tokenizer: bpe-32k, fertility on flores = 1.440 (target <= 1.40: not reached)"
    )
    assert tokenizer_tables.best_sentence({**best, "target_reached": True}).endswith("reached)")
