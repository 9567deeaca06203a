"""SFT warm-start targets: reasoning plus verdict, built from the gold (templated, tiny scale).

METHOD.md 3.4 [DEFAULT] distils reasoning traces from a strong teacher and keeps those whose verdict
matches the label. At tiny scale there is no teacher, so the reasoning is a template filled from what
the item was built from: the gold profile and the theorems (empathy), the item's kind (humanlike), and
the label. It teaches the format and where each piece of evidence goes, not how to reason; the GRPO
stage is what rewards getting the verdict right from the prompt alone. At paper scale, replace
these targets with teacher traces (the rest of the stage is unchanged).
"""
from __future__ import annotations

from echo_lib.rewards.profile import checks_gold, clip_words, render_checks, render_profile
from echo_lib.rewards.verdict import format_verdict, score_target, verdict_tag

COMPARISON = {
    "better": "the candidate meets these needs better than the reference.",
    "tie": "the candidate and the reference meet these needs about equally.",
    "worse": "the candidate meets these needs less well than the reference.",
}
# METHOD.md 9 row 3, the 1-5 rubric the data was scored with
RUBRIC = {1: "harmful or judgmental for this user.", 2: "generic or templated.",
          3: "adequate; it addresses the surface emotion.", 4: "fits the user's dominant need.",
          5: "fits all of the user's needs, natural and not performative."}
CONCLUSION = {
    "human": "it reads like the person in this chat.",
    "model_reply": "polished assistant wording, not this person.",
    "context_removed": "assistant wording that ignores the earlier turns.",
    "last_turn_swapped": "human wording, but it answers a different chat.",
    "turns_shuffled": "the turns before it are out of order, so it is no real continuation.",
}


def resonates(theorems: list[str], max_words: int) -> str:
    text = "; ".join(t.strip().rstrip(".") for t in theorems[:2] if t.strip()) or "a reply that fits this user"
    return "Resonates: " + clip_words(text, 2 * max_words if max_words else 0)


def empathy_target(item: dict, max_words: int = 8) -> str:
    think = "\n".join([render_profile(item["profile"], max_words), resonates(item["theorems"], max_words),
                       "Comparison: " + COMPARISON[item["label"]]])
    return format_verdict("empathy", think, item["label"])


def scalar_target(item: dict, max_words: int = 8) -> str:
    think = "\n".join([render_profile(item["profile"], max_words), resonates(item["theorems"], max_words),
                       "Assessment: " + RUBRIC[int(item["candidate_score"])]])
    return format_verdict("scalar", think, str(score_target(item["candidate_score"])))


CONCLUSION_FREE = {
    "human": "it reads like a person typing in a chat.",
    "model_reply": "polished assistant wording.",
    "context_removed": "polished assistant wording.",
}


def humanlike_target(item: dict, context_free: bool = False) -> str:
    # checks the item's kind leaves open read as for a human reply (no AI tells, fits, coherent); not rewarded
    checks = {**checks_gold("human", context_free), **checks_gold(item["kind"], context_free)}
    conclusion = (CONCLUSION_FREE if context_free else CONCLUSION)[item["kind"]]
    think = "\n".join([render_checks(checks), "Conclusion: " + conclusion])
    return format_verdict("humanlike", think, item["label"])


def verdict_target(item: dict, kind: str) -> str:
    """The verdict-first target: the gold verdict alone (`reward_models.decision: verdict_first`)."""
    answer = str(score_target(item["candidate_score"])) if kind == "scalar" else item["label"]
    tag = verdict_tag(kind)
    return f"<{tag}>{answer}</{tag}>"
