"""Judge prompts: three wordings of the same task, so one model makes several "judges" at the tiny scale.

Every wording is this package's own. A rating prompt shows one blinded transcript and asks one
dimension on its anchored 1-5 scale; a pairwise prompt shows two transcripts of the same case (A, B).
In choose mode the prompt ends on the question, so the first token of the reply is the answer; in
JSON mode it asks for a small JSON object that `parse_score` / `parse_winner` read strictly.
"""
from __future__ import annotations

from dataclasses import dataclass

from echo_lib.llm.types import json_object
from echo_lib.nee.blinding import Transcript
from echo_lib.nee.dimensions import Dimension


# The panel's rubric in words, written into the stage's provenance.json (`rubric_version`). Bump it (number,
# month, what changed) whenever what a judge is shown or asked changes, and set NEE_RUBRIC_TEXT_FINGERPRINT to
# the new text_fingerprint(NEE_RUBRIC_MODULES): tests/test_rubric_version.py fails until both move with the text.
NEE_RUBRIC_MODULES = ("nee/prompts", "nee/dimensions", "nee/blinding")
NEE_RUBRIC_VERSION = ("echo NEE rubric v1 (2026-12): 6 dimensions on anchored 1-5 scales, 3 wordings, blinded "
                      "transcripts, pairwise A/B in both orders; wording this project's own")
NEE_RUBRIC_TEXT_FINGERPRINT = "a3fa506521bc52a7"


@dataclass(frozen=True)
class Wording:
    system: str
    intro: str          # before the material
    ask: str            # before the scale: "{title}" and "{question}" are filled in
    pair_ask: str       # the pairwise question


WORDINGS = (
    Wording(system="You are a careful, impartial rater of conversations. You answer with one digit or letter.",
            intro="Below is a chat between a person who needs support and a companion. Only the companion is rated.",
            ask="Rate the companion on {title}. {question}",
            pair_ask="Both chats start from the same person. In which chat does the companion do better overall: "
                     "understanding this person, sounding like a real person, staying consistent, avoiding empty "
                     "phrases and staying safe?"),
    Wording(system="You review chat transcripts and score them strictly. You reply with a single character.",
            intro="Read this transcript. A user talks about something difficult; the other side is the companion "
                  "whose replies you score.",
            ask="Criterion: {title}. Ask yourself: {question}",
            pair_ask="Two companions talked with the same user. Which companion would this user rather talk to "
                     "again, judging by understanding, natural voice, memory for details, plain speech and care?"),
    Wording(system="You are an experienced counsellor who assesses how well someone supports another person. "
                   "You answer with one character only.",
            intro="A person shared a problem in the chat below. Assess the replies of the companion, not the person.",
            ask="Assess {title}. {question}",
            pair_ask="Compare the two companions who spoke with this same person. Whose replies give this person "
                     "better support, taking understanding, tone, consistency, plainness and safety together?"),
)


def wording(variant: int) -> Wording:
    if not 0 <= variant < len(WORDINGS):
        raise ValueError(f"nee.prompt_variants asks for wording {variant + 1}, but there are {len(WORDINGS)}; "
                         f"set nee.prompt_variants to at most {len(WORDINGS)}")
    return WORDINGS[variant]


def rating_prompt(variant: int, t: Transcript, label: str, dim: Dimension, json_mode: bool = False) -> list[dict]:
    w = wording(variant)
    answer = ('Return JSON {"score": N} with N an integer from 1 to 5.' if json_mode
              else f"Answer with the digit only. {dim.title} score:")
    return [{"role": "system", "content": w.system},
            {"role": "user", "content": f"{w.intro}\n\n{t.profile}\n\n{label}:\n{t.text()}\n\n"
                                        f"{w.ask.format(title=dim.title.lower(), question=dim.question)}\n"
                                        f"{dim.scale_text()}\n{answer}"}]


PAIR_QUESTION = "Answer with the letter only. Better chat:"   # the A/B prompt's last line in choose mode
PAIR_MARKS = ("\n\nChat B:\n", "\n\n")   # what follows chat A, and chat B, in the A/B prompt (read-out heads)


def pairwise_prompt(variant: int, first: Transcript, second: Transcript, json_mode: bool = False) -> list[dict]:
    w = wording(variant)
    answer = 'Return JSON {"winner": "A"} or {"winner": "B"}.' if json_mode else PAIR_QUESTION
    return [{"role": "system", "content": w.system},
            {"role": "user", "content": f"{first.profile}\n\nChat A:\n{first.text()}\n\nChat B:\n{second.text()}\n\n"
                                        f"{w.pair_ask}\n{answer}"}]


def parse_score(text: str) -> int:
    """{"score": 1..5} (an integer, or a digit string) and nothing less; ValueError says what is wrong."""
    value = json_object(text).get("score")
    if isinstance(value, str) and value.strip() in ("1", "2", "3", "4", "5"):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise ValueError(f"score is {value!r}; allowed an integer 1-5")
    return value


def parse_winner(text: str) -> str:
    value = json_object(text).get("winner")
    if not isinstance(value, str) or value.strip().upper() not in ("A", "B"):
        raise ValueError(f"winner is {value!r}; allowed \"A\" or \"B\"")
    return value.strip().upper()
