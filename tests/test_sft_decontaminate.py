"""Decontaminating instruction data against the held-out split and evaluation texts, counted per set."""

from azllm.sft.decontaminate import conversation_text, decontaminate


def conv(user, answer, i):
    return {
        "id": f"s:{i}",
        "source": "s",
        "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}],
    }


def test_overlaps_with_held_out_answers_and_eval_texts_are_dropped_and_counted():
    flores = ["Bakı Azərbaycanın paytaxtı və ən böyük şəhəri olub Xəzər dənizinin sahilində yerləşir."]
    held = [
        conv(
            "Qarabağ atı haqqında danış.",
            "Qarabağ atı dünyanın ən qədim və gözəl at cinslərindən biri sayılır və Azərbaycanın milli sərvətidir.",
            0,
        )
    ]
    train = [
        conv(
            "Bir fakt de.",
            "Bakı Azərbaycanın paytaxtı və ən böyük şəhəri olub Xəzər dənizinin sahilində yerləşir, deyirlər.",
            1,
        ),
        conv("At cinsi?", "Məncə Qarabağ atı dünyanın ən qədim və gözəl at cinslərindən biri sayılır.", 2),
        conv("Salam", "Salam, necə kömək edə bilərəm?", 3),
    ]
    kept, counts = decontaminate(train, held_out=held, eval_texts={"flores": flores}, n=8)
    assert [c["id"] for c in kept] == ["s:3"]
    assert counts == {"held_out": 1, "flores": 1, "examples": {"held_out": "s:2", "flores": "s:1"}}
    kept, counts = decontaminate(train, held_out=[], eval_texts={}, n=8)
    assert len(kept) == 3 and counts["held_out"] == 0
    assert conversation_text(train[2]) == "Salam\nSalam, necə kömək edə bilərəm?"
