"""Throughput of the model layer's hf backend with the embedded SmolLM2 (issue 3, "Measured").

    .venv/bin/python benchmarks/llm_throughput.py [--model results/models/smollm2-135m-instruct] [--out x.json]

1. batched `generate` of 32 chats x 48 new tokens vs the same chats one at a time (aggregate tokens/s);
2. where the time goes: prefill vs per-step decode at batch 32 and 1, padding share, threads;
3. `choose` over a 4-level rubric question vs generating an answer and parsing it (speed-up, parse failures),
   for answer budgets of 16, 32, 64 and 128 tokens;
4. a second run of the same batch through the cache: model calls (0) and wall time.
Batched timings are the median of --repeat runs (3), wall-clock on whatever else the machine is doing;
run it on a quiet machine, with OMP_WAIT_POLICY=ACTIVE as the DAG's stages run
(resources.<stage>.wait_policy; echo_lib sets PASSIVE otherwise).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from echo_lib.llm import LLMSettings, Sampling, make_llm  # noqa: E402
from echo_lib.llm.hf import HFBackend  # noqa: E402

SYSTEM = "You are a warm, attentive friend. Reply in two or three sentences."
OPENINGS = [
    "I failed my exam again and I feel like a total failure.",
    "My best friend stopped answering my messages and I don't know why.",
    "I lost my job today and I have no idea how to tell my family.",
    "My dog died last week and the house feels so empty.",
    "I moved to a new city and I don't know anyone here.",
    "My parents keep comparing me to my older brother.",
    "I can't sleep because I keep worrying about money.",
    "My partner forgot my birthday and said it's not a big deal.",
]
JUDGE_SYSTEM = ("You are a strict judge of empathy. Rate the reply to the user on a scale from 0 (cold, "
                "dismissive) to 3 (warm, specific, understanding). Answer with a single digit: 0, 1, 2 or 3.")
REPLIES = ["That sounds really hard. Do you want to talk about what happened?",
           "Just study more next time.",
           "I'm so sorry. It makes sense that you feel this way after everything.",
           "Whatever, everyone has problems."]


def chats32() -> list:
    return [[{"role": "system", "content": SYSTEM},
             {"role": "user", "content": f"{OPENINGS[i % 8]}" + (" It happened again today." if i >= 8 else "")
              + (" I keep thinking about it." if i >= 16 else "") + (" Any advice?" if i >= 24 else "")}]
            for i in range(32)]


def judge_prompts() -> list:
    return [[{"role": "system", "content": JUDGE_SYSTEM},
             {"role": "user", "content": f"User: {OPENINGS[i % 8]}\nReply: {REPLIES[i // 8]}\nRating (0-3):"}]
            for i in range(32)]


def timed(f, repeat: int = 1):
    """f's result and its wall time: the median of `repeat` runs (the machine's other load moves single runs)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return out, sorted(times)[len(times) // 2]


def where_time_goes(backend: HFBackend, chats: list) -> dict:
    """Prefill of the whole batch, one decode step at batch 32 and at batch 1, and the padding share."""
    import torch
    from echo_lib.llm.kv import new_cache, padded
    model, tok = backend.load()
    ids = backend._encode(chats)
    out = {"threads": torch.get_num_threads(), "prompt_tokens": sum(map(len, ids)),
           "padding_share": round(1 - sum(map(len, ids)) / (len(ids) * max(map(len, ids))), 3)}
    with torch.inference_mode():
        for b in (len(ids), 1):
            input_ids, mask, pos = padded(ids[:b], tok.pad_token_id, model.device)
            cache = new_cache(model)
            _, dt = timed(lambda: model(input_ids=input_ids, attention_mask=mask, position_ids=pos, cache=cache,
                                        use_cache=True, logits_to_keep=1))
            out[f"prefill_s_batch{b}"] = round(dt, 3)
            steps = []
            for _ in range(5):
                mask = torch.cat([mask, mask.new_ones((b, 1))], 1)
                pos = pos[:, -1:] + 1
                nxt = torch.zeros((b, 1), dtype=torch.long)
                _, dt = timed(lambda: model(input_ids=nxt, attention_mask=mask, position_ids=pos, cache=cache,
                                            use_cache=True))
                steps.append(dt)
            out[f"decode_step_s_batch{b}"] = round(sorted(steps)[2], 4)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="results/models/smollm2-135m-instruct")
    ap.add_argument("--out", default=None, help="also write the results as JSON here")
    ap.add_argument("--sequential", type=int, default=32, help="chats to run one at a time (<= 32)")
    ap.add_argument("--answer-tokens", type=int, nargs="+", default=[16, 32, 64, 128],
                    help="budgets of the generate-and-parse answers that choose is compared with (128: about as "
                         "long as the embedded model's answers run on their own)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each batched timing; the median is reported")
    ap.add_argument("--dtype", default="float32", help="weights and compute dtype (bfloat16 uses AMX where the CPU has it)")
    args = ap.parse_args(argv)
    if not Path(args.model, "config.json").exists():
        sys.exit(f"no checkpoint at {args.model}; run stage 00 first (or pass --model)")

    off = LLMSettings(cache=False, progress=False, provenance=False)
    backend = HFBackend("smollm2", args.model, settings=off, dtype=args.dtype)
    llm = make_llm(backend, off, tempfile.mkdtemp(), None)
    _, load_s = timed(backend.load)
    chats = chats32()
    sampling = Sampling(temperature=0.7, top_p=0.9, max_new_tokens=48, seed=0)
    llm.generate(chats[:2], Sampling(temperature=0.7, max_new_tokens=4))  # warm-up

    res: dict = {"model": args.model, "dtype": args.dtype, "repeat": args.repeat, "load_s": round(load_s, 2),
                 "loadavg_before": os.getloadavg(),
                 "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}  # ACTIVE is what a DAG stage runs with
    batched, dt_b = timed(lambda: llm.generate(chats, sampling), args.repeat)
    tok_b = sum(c.completion_tokens for c in batched)
    n_seq = args.sequential
    seq, dt_s = timed(lambda: [llm.generate([c], sampling)[0] for c in chats[:n_seq]])
    tok_s = sum(c.completion_tokens for c in seq)
    res["generate"] = {
        "chats": 32, "max_new_tokens": 48,
        "batched": {"seconds": round(dt_b, 2), "tokens": tok_b, "tokens_per_s": round(tok_b / dt_b, 1)},
        "sequential": {"chats": n_seq, "seconds": round(dt_s, 2), "tokens": tok_s,
                       "tokens_per_s": round(tok_s / dt_s, 1)},
        "speedup": round((tok_b / dt_b) / (tok_s / dt_s), 2),
        "batch_equals_sequential": [c.text for c in batched[:n_seq]] == [c.text for c in seq],
    }
    res["where_time_goes"] = where_time_goes(backend, chats)

    prompts = judge_prompts()
    options = ["0", "1", "2", "3"]
    choices, dt_c = timed(lambda: llm.choose(prompts, options), args.repeat)
    res["choose"] = {"prompts": 32, "options": options, "choose_s": round(dt_c, 2),
                     "mean_coverage": round(sum(c.coverage for c in choices) / len(choices), 3),
                     "generate_and_parse": []}
    # the generated answer's budget decides the cost of that way: 16 tokens is the least that holds
    # "Rating: 2" after a short preamble; longer budgets let a small model reach its digit more often
    for budget in args.answer_tokens:
        answers, dt_g = timed(lambda: llm.generate(prompts, Sampling(temperature=0, max_new_tokens=budget)),
                              args.repeat)
        parsed = [m.group(0) if (m := re.search(r"\b[0-3]\b", a.text)) else None for a in answers]
        res["choose"]["generate_and_parse"].append({
            "max_new_tokens": budget, "seconds": round(dt_g, 2), "speedup_of_choose": round(dt_g / dt_c, 2),
            "parse_failure_rate": round(sum(p is None for p in parsed) / len(parsed), 3),
            "mean_answer_tokens": round(sum(a.completion_tokens for a in answers) / len(answers), 1),
            "answers_ended_by_the_model": sum(a.finish_reason == "stop" for a in answers),
            "agreement_where_parsed": round(sum(p == c.best for p, c in zip(parsed, choices) if p)
                                            / max(1, sum(p is not None for p in parsed)), 3),
            "example_answers": [a.text for a in answers[:3]]})

    on = LLMSettings(cache=True, progress=False, provenance=False)
    cache_dir = tempfile.mkdtemp()
    first = make_llm(HFBackend("smollm2", args.model, settings=on, dtype=args.dtype), on, cache_dir, None)
    _, dt_first = timed(lambda: first.generate(chats, sampling))
    second = make_llm(HFBackend("smollm2", args.model, settings=on, dtype=args.dtype), on, cache_dir, None)
    again, dt_again = timed(lambda: second.generate(chats, sampling))
    res["rerun"] = {"first_s": round(dt_first, 2), "second_s": round(dt_again, 4),
                    "second_model_calls": second.model_calls, "same_replies": again == first.generate(chats, sampling),
                    "weights_loaded_on_rerun": second.backend._model is not None}
    res["loadavg_after"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
