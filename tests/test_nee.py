"""Stage 06 pieces: Krippendorff's alpha on the textbook example, blinding, the recorded order, scores."""
import math

import numpy as np
import pandas as pd
import pytest

from echo_lib.nee.agreement import krippendorff_alpha
from echo_lib.nee.blinding import MASK, Blinder, name_variants, normalise
from echo_lib.nee.order import record, shuffled, unshuffle
from echo_lib.nee.prompts import WORDINGS, parse_score, parse_winner
from echo_lib.nee.scores import composite, paired_scores, pairwise_rates, rescale, summary_table

NA = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C: 4 observers, 12 units,
# values 1-5, missing data. Published: nominal .743, ordinal .815, interval .849, ratio .797.
EXAMPLE_C = [[1, 2, 3, 3, 2, 1, 4, 1, 2, NA, NA, NA],
             [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NA, 3],
             [NA, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NA],
             [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NA]]
# Example A: two observers, binary data. Published: alpha = .095.
EXAMPLE_A = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0],
             [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]


@pytest.mark.parametrize("level,alpha", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849),
                                         ("ratio", 0.797)])
def test_alpha_matches_krippendorffs_worked_example(level, alpha):
    assert round(krippendorff_alpha(EXAMPLE_C, level), 3) == alpha


def test_alpha_binary_example_and_edge_cases():
    assert round(krippendorff_alpha(EXAMPLE_A, "nominal"), 3) == 0.095
    assert krippendorff_alpha([[1, 2, 3, 4], [1, 2, 3, 4]], "interval") == 1.0   # perfect agreement
    assert math.isnan(krippendorff_alpha([[3, 3, 3], [3, 3, 3]]))              # no variation: undefined
    assert math.isnan(krippendorff_alpha([[1, NA], [NA, 2]]))                   # nothing pairable
    # swapping raters or units changes nothing
    data = np.array(EXAMPLE_C)
    assert krippendorff_alpha(data[::-1]) == pytest.approx(krippendorff_alpha(data))
    assert krippendorff_alpha(data[:, ::-1]) == pytest.approx(krippendorff_alpha(data))
    with pytest.raises(ValueError, match="level of measurement"):
        krippendorff_alpha(EXAMPLE_C, "cardinal")


def test_normalise_strips_markdown_emoji_and_whitespace():
    text = "## Hey!\n\n**I hear you** 😊🙏 — that's *hard*.\n- first\n- `second`\n> quoted [link](http://x.y)\n\n\n  ok  ✨"
    assert normalise(text) == "Hey! I hear you — that's hard. first second quoted link ok"
    assert normalise("ｆｕｌｌ　ｗｉｄｔｈ") == "full width"   # NFKC


def test_blinder_masks_names_ids_and_their_parts():
    blind = Blinder(["base", "smollm2-135m-instruct", "Qwen/Qwen3-32B"], ["Qiming"])
    assert {"smollm2", "smollm", "Qwen3-32B", "Qwen3", "Qwen"} <= name_variants("Qwen/Qwen3-32B") | name_variants(
        "smollm2-135m-instruct")
    out = blind("I'm **SmolLM2**, also Qwen3 and QIMING; base model (databases stay).")
    assert "smollm" not in out.lower() and "qwen" not in out.lower() and "qiming" not in out.lower()
    assert out.count(MASK) == 4 and "databases" in out and " base " not in f" {out} "
    with pytest.raises(ValueError, match="blinding failed"):
        blind.check([{"role": "user", "content": "the smollm2 reply"}])
    # the judge prompts' own wording holds no name of the configs' models
    wording = " ".join(v for w in WORDINGS for v in vars(w).values())
    assert not Blinder(["base", "echo", "scalar", "judge", "actor", "director"]).found(wording)


def test_order_is_seeded_recorded_and_reversible():
    items = [("base", f"own_{i:03d}") for i in range(6)] + [("echo", f"own_{i:03d}") for i in range(6)]
    a, b = shuffled("j/v1", len(items), seed=3, judge_index=0), shuffled("j/v2", len(items), seed=3, judge_index=1)
    assert sorted(a.permutation) == list(range(12)) and a.permutation != list(range(12))
    assert a.permutation != b.permutation                     # each judge its own order
    assert shuffled("j/v1", 12, 3, 0) == a                     # same seed, same order
    assert shuffled("j/v1", 12, 4, 0).permutation != a.permutation
    rec = record(items, [a, b])
    for order in (a, b):
        for pos in range(12):
            assert unshuffle(rec, order.judge, pos) == items[order.permutation[pos]]
        inv = order.position_of()
        assert all(order.permutation[inv[i]] == i for i in range(12))


def test_rescale_and_composite():
    assert rescale([1, 3, 5]).tolist() == [0, 50, 100]
    assert composite(80, 40, 0.5) == 60
    assert composite(250, 40, 0.5) == 70          # EPM-Q clipped at 100
    assert composite(-20, 40, 0.25) == pytest.approx(0.25 * -20 + 0.75 * 40)
    assert math.isnan(composite(NA, 40, 0.5))


def test_paired_scores_give_nee_and_composite_differences_with_a_verdict():
    rows = [{"model": m, "case_id": f"c{i}", "judge": "j", "dimension": "safety", "score": 3.0 + (m == "echo") + 0.1 * (i % 3) * (m == "echo")}
            for m in ("base", "echo") for i in range(12)]
    epmq = pd.DataFrame([{"Model": m, "Case_ID": f"c{i}", "EPM-Q": 40.0} for m in ("base", "echo") for i in range(12)])
    t = paired_scores(pd.DataFrame(rows), epmq, 0.5, [("echo", "base")]).set_index("Metric")
    assert t.loc["NEE", "Difference"] == pytest.approx(27.5) and t.loc["NEE", "n"] == 12
    assert t.loc["Composite", "Difference"] == pytest.approx(13.75)       # half the weight on NEE
    assert t.loc["NEE", "Method"] == "paired t"
    assert t.loc["NEE", "Verdict"] == "echo above base"
    assert list(paired_scores(pd.DataFrame(rows), None, 0.5, [("echo", "base")]).Metric) == ["NEE"]
    few = paired_scores(pd.DataFrame(rows[:3] + rows[12:15]), None, 0.5, [("echo", "base")])
    assert few.Verdict.tolist() == ["n too small"]


def test_summary_scores_each_case_equally_and_composes():
    rows = [{"model": "m", "case_id": c, "judge": j, "dimension": d, "score": s}
            for c, s in (("a", 5.0), ("b", 3.0)) for j in ("j1", "j2") for d in ("humanlikeness", "safety")]
    rows.append({"model": "m", "case_id": "b", "judge": "j1", "dimension": "safety", "score": NA})  # a failure
    table = summary_table(pd.DataFrame(rows), {"m": 30.0}, 0.5).iloc[0]
    assert table["nee"] == 75.0 and table["n_ratings"] == 8 and table["n_failed"] == 1
    assert table["composite"] == 0.5 * 30 + 0.5 * 75
    # two transcripts: the t-interval (1 degree of freedom) is cut to the scale and not shown
    assert table["n_transcripts"] == 2 and not table["nee_ci_shown"]
    assert table["nee_ci_low"] >= 0 and table["nee_ci_high"] <= 100 and table["nee_ci_method"] == "t"
    assert table["humanlikeness"] == 75.0 and math.isnan(table["empathy_accuracy"])


def test_position_bias_counts_flipped_pairs():
    rows = []
    for case, (w1, w2) in {"a": ("m", "m"), "b": ("m", "ref"), "c": ("ref", "ref"), "d": ("ref", "m")}.items():
        rows += [{"model": "m", "case_id": case, "judge": "j", "order": "model_first", "winner": w1},
                 {"model": "m", "case_id": case, "judge": "j", "order": "reference_first", "winner": w2}]
    rates = pairwise_rates(pd.DataFrame(rows)).iloc[0]
    assert rates["position_bias"] == 0.5 and rates["win_rate"] == 0.5 and rates["n_pairs"] == 4
    # per-case win shares 1, .5, 0, .5: a t-interval over the 4 cases, cut to [0, 1]
    assert rates["win_n_cases"] == 4 and (rates["win_ci_low"], rates["win_ci_high"]) == (0.0, 1.0)
    sweep = pairwise_rates(pd.DataFrame([{**r, "winner": "m"} for r in rows])).iloc[0]
    assert sweep["win_rate"] == 1.0 and (sweep["win_ci_low"], sweep["win_ci_high"]) == (1.0, 1.0)


def test_strict_json_parsers():
    assert parse_score('{"score": 4}') == 4 and parse_score('{"score": "2"}') == 2
    for bad in ('{"score": 6}', '{"score": "12"}', '{"score": true}', "4", '{"rating": 3}', "[]"):
        with pytest.raises(ValueError):
            parse_score(bad)
    assert parse_winner('{"winner": "b"}') == "B"
    with pytest.raises(ValueError):
        parse_winner('{"winner": "tie"}')
