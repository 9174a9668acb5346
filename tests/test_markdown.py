"""azllm.markdown: the one before -> after cell and the number formats every Markdown table and card uses."""

from azllm import markdown as md


def test_a_change_carries_its_sign_error_and_mark():
    row = {"after": 10.68, "delta": 4.139, "delta_se": 0.9625, "verdict": "gain"}
    assert md.change(row, "{:.2f}") == "10.68 (+4.14 ± 0.96 ▲)"
    assert md.change({**row, "delta": -1.35, "verdict": "loss"}, "{:.2f}") == "10.68 (−1.35 ± 0.96 ▼)"
    assert md.change({"after": 1.0, "delta": None, "delta_se": None, "verdict": None}) == "1.000 (— ± —)"
    assert md.change({"after": 1.0, "delta": 0.1, "delta_se": None, "verdict": "no error estimate"}) == (
        "1.000 (+0.100 ± — ?)"
    )


def test_formats_follow_the_measure():
    assert md.score_format("chrF++ (24 held-out answers)", None) == "{:.2f}"
    assert md.score_format("flores_az_en", "chrf") == "{:.2f}"
    assert md.score_format("sib200_az", "acc") == "{:.3f}"
    assert md.cell(None) == "—" and md.cell(0.5, "{:.0%}") == "50%"


def test_a_heading_has_one_separator_per_column():
    assert md.heading("T.", ["a", "b"]) == ["T.", "", "| a | b |", "| --- | --- |"]
