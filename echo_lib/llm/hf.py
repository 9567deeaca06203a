"""The hf backend: a transformers causal LM in this process, on CPU or GPU.

Generation is our own short decode loop rather than `model.generate`, for two reasons:
  - each chat samples from its own torch.Generator seeded by (seed, chat), so a batch gives the same
    replies as calling it one chat at a time, and a reply does not depend on its batch neighbours;
  - finished rows leave the batch (their KV cache rows are dropped), so one long reply does not make
    the whole batch pay for it.
Prompts are left-padded; position ids come from the attention mask, so padding changes nothing but
the arithmetic's rounding. Shared prompt prefixes run once (see kv.prefill): the head all prompts of a
batch share (system prompt, rubric) and the head each group of them shares (one case's history); the
first kind is kept across calls (`llm.head_cache_tokens`), since a role sends the same head every turn.
Recent prompts are kept too (`llm.prefix_cache_mb`): a dialogue's next prompt starts from the longest
kept token prefix and computes only the rest (its new turns), so a dialogue's prefill grows linearly with
its turns instead of quadratically.
`choose` scores options by log-probability: the prompts run once, and the later tokens of multi-token
options run on the prompts' KV cache.
Next tokens come from echo_lib.llm.sampling (all rows at once); on a CPU in float32 the linear layers keep
MKL-packed weights for the decode steps' small products (echo_lib.llm.packed, `llm.packed_weights`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Sequence

from echo_lib.llm.kv import (MIN_SHARED, HeadCache, PrefixCache, Tally, common_prefix, kv_bytes_per_token, new_cache,
                             padded, prefill)
from echo_lib.llm.packed import pack_linears
from echo_lib.llm.sampling import pick_next
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.tools import ArgQuery, arg_queries, option_text, parse_arg, tool_menu_chat
from echo_lib.llm.types import (Chat, Choice, Completion, FeatureUnsupported, LLMError, Sampling, ToolCall, Usage,
                                row_seed, stable_hash)


# On a shared CPU (parallel Snakemake jobs, other users) OpenMP threads that spin at every barrier made a
# 2-thread forward pass 6x slower in our measurements; sleeping waiters cost little on an idle CPU.
# Takes effect only if torch is not imported yet; set it in the environment to be sure.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def fingerprint(folder: str | Path) -> str | None:
    """Content fingerprint of a checkpoint, adapter or read-out folder: the sha256 of every file in it
    (weights, configs, tokenizer, heads), so that a folder retrained in place gets a new key even where
    only middle layers moved. Each file is read once per process and version (path, size, mtime)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None  # a hub id: its revision is in the key instead
    files = sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))
    return stable_hash([[f.name, file_sha256(f)] for f in files], 16)


_FILE_HASHES: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FILE_HASHES:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                digest.update(block)
        _FILE_HASHES[key] = digest.hexdigest()
    return _FILE_HASHES[key]


class HFBackend:
    kind = "hf"

    def __init__(self, name: str, weights: str, *, adapter: str | None = None, revision: str | None = None,
                 dtype: str = "float32", device: str = "cpu", load_in_4bit: bool = False,
                 local: bool = True, settings: LLMSettings = LLMSettings(), readout: str | None = None):
        self.local = local  # a folder on disk (embedded/local) rather than a hub id
        self.name, self.weights, self.adapter, self.revision = name, weights, adapter, revision
        self.readout = readout   # a folder of read-out heads (echo_lib.llm.readout) that answer choose
        self.dtype, self.device, self.load_in_4bit, self.settings = dtype, device, load_in_4bit, settings
        self._model = self._tok = None
        self.packed_layers = 0
        self.heads = HeadCache(settings.head_cache_tokens)  # shared prompt heads, reused across calls
        self.prefixes = PrefixCache(settings.prefix_cache_mb)  # recent prompts, which later prompts extend
        self.tally = Tally()  # prompt tokens asked for / really computed (benchmarks read it)

    # ----------------------------------------------------------------------------------------
    # identity (cache key) and description (provenance)

    def identity(self) -> dict:
        return self._identity

    @cached_property
    def _identity(self) -> dict:
        return {"backend": "hf", "model": self.weights, "revision": self.revision,
                "fingerprint": fingerprint(self.weights), "adapter": self.adapter,
                "adapter_fingerprint": fingerprint(self.adapter) if self.adapter else None,
                "dtype": self.dtype, "load_in_4bit": self.load_in_4bit,
                **({"readout": self.readout, "readout_fingerprint": fingerprint(self.readout)} if self.readout else {})}

    def describe(self) -> dict:
        return {"name": self.name, "backend": "hf", "model": self.weights, "revision": self.revision,
                "adapter": self.adapter, "dtype": self.dtype, "device": self.device,
                "packed_layers": self.packed_layers, **({"readout": self.readout} if self.readout else {})}

    # ----------------------------------------------------------------------------------------
    # loading (lazy: a rerun served from the cache never loads the weights)

    def load(self):
        if self._model is not None:
            return self._model, self._tok
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.local and not Path(self.weights).is_dir():
            raise LLMError(f"model {self.name!r}: no checkpoint at {self.weights}; run stage 00 (notebooks/00_models) "
                           "to prepare it")
        tok = AutoTokenizer.from_pretrained(self.weights, revision=self.revision)
        if tok.chat_template is None:
            raise LLMError(f"model {self.name!r}: tokenizer at {self.weights} has no chat template; use an "
                           "instruction-tuned checkpoint or add chat_template.jinja to the folder")
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        kwargs: dict[str, Any] = {"dtype": getattr(torch, self.dtype), "revision": self.revision}
        if self.load_in_4bit:
            from transformers import BitsAndBytesConfig
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=getattr(torch, self.dtype))
        if self.device == "auto":
            kwargs["device_map"] = "auto"
        with outside_zero3():   # a frozen model (a reward model inside a ZeRO-3 policy run) loads whole
            model = AutoModelForCausalLM.from_pretrained(self.weights, **kwargs)
            if self.device == "cuda":
                model = model.to("cuda")
            if self.adapter:
                from peft import PeftModel
                if not Path(self.adapter, "adapter_config.json").exists():
                    raise LLMError(f"model {self.name!r}: adapter folder {self.adapter} has no adapter_config.json")
                model = PeftModel.from_pretrained(model, self.adapter)
                if not self.load_in_4bit:
                    model = model.merge_and_unload()  # plain weights again: no LoRA matmuls per token
        model.eval()
        if self.settings.packed_weights and self.device == "cpu":
            self.packed_layers = pack_linears(model)  # float32 decode steps ~10 % faster (see llm.packed)
        return self._adopt(model, tok)

    def _adopt(self, model, tok):
        eos = model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        self.eos = {i for i in [*eos, tok.eos_token_id] if i is not None}
        self._model, self._tok = model, tok
        return model, tok

    @classmethod
    def serving(cls, name: str, model, tok, settings: LLMSettings = LLMSettings()) -> "HFBackend":
        """A backend over a model in memory that training keeps changing (the multi-turn policy's LoRA model):
        no packed weights (they would freeze a copy), and no kept prompts or heads across updates: call
        `forget` after each optimizer step, since keys and values computed with the old weights are stale."""
        backend = cls(name, f"<in memory: {name}>", local=False,
                      settings=dataclasses.replace(settings, packed_weights=False))
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        backend._adopt(model, tok)
        return backend

    def forget(self) -> None:
        """Drop every kept prompt and shared head (the weights changed)."""
        self.heads = HeadCache(self.settings.head_cache_tokens)
        self.prefixes = PrefixCache(self.settings.prefix_cache_mb)

    def _render(self, chats: Sequence[Chat]) -> list[str]:
        """Each chat as the prompt text the model reads (its chat template, ready for the assistant's turn)."""
        _, tok = self.load()
        return [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in chats]

    def _encode(self, chats: Sequence[Chat]) -> list[list[int]]:
        _, tok = self.load()
        return tok(self._render(chats), add_special_tokens=False)["input_ids"]

    def _batches(self, ids: Sequence[Sequence[int]], by_prefix: bool = False) -> list[list[int]]:
        """Indices in batches of at most batch_size: by length (less padding), or for scoring by token
        sequence, packing whole runs of prompts that share a head (one case's indicators) into one batch,
        where that head runs once (see kv.prefill)."""
        n = self.settings.batch_size
        if not by_prefix:
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            return [order[i:i + n] for i in range(0, len(order), n)]
        batches: list[list[int]] = []
        for run in _runs(ids):
            for a in range(0, len(run), n):
                chunk = run[a:a + n]
                if batches and len(batches[-1]) + len(chunk) <= n:
                    batches[-1] += chunk
                else:
                    batches.append(chunk)
        return batches

    # ----------------------------------------------------------------------------------------
    # generate

    def generate(self, chats: Sequence[Chat], samplings: Sequence[Sampling], usage: Usage
                 ) -> Iterator[tuple[int, Completion]]:
        if any(s.json_mode for s in samplings):
            raise FeatureUnsupported(f"model {self.name!r}: the hf backend has no JSON mode; use choose() or "
                                     "call_tools() for structured answers, or an openai-backend server")
        ids = self._encode(chats)
        for batch in self._batches(ids):
            seeds = [row_seed(samplings[i].seed, chats[i]) for i in batch]
            outs = self._decode([ids[i] for i in batch], [samplings[i] for i in batch], seeds)
            usage.model_calls += len(batch)
            for i, out in zip(batch, outs):
                usage.prompt_tokens += out.prompt_tokens
                usage.completion_tokens += out.completion_tokens
                yield i, out

    def _decode(self, ids: list[list[int]], samplings: list[Sampling], seeds: list[int]) -> list[Completion]:
        import torch

        model, tok = self.load()
        B = len(ids)
        gens = [torch.Generator().manual_seed(s) for s in seeds]  # CPU generators: same draws on any device
        new: list[list[int]] = [[] for _ in range(B)]
        finish = ["length"] * B
        active = list(range(B))  # rows still generating, in the order of the batch tensors
        longest = max(s.max_new_tokens for s in samplings)
        cache = new_cache(model, reserve=longest)  # room for every new token: no re-allocation while decoding
        with torch.inference_mode():
            logits, mask, pos = prefill(model, tok.pad_token_id, ids, cache, heads=self.heads,
                                        prefixes=self.prefixes, tally=self.tally)
            logits = logits[:, -1, :]
            width = mask.shape[1]
            mask = torch.cat([mask, mask.new_ones((B, longest))], dim=1)  # step k attends to mask[:, :width + k]
            while active:
                nxt = pick_next(logits, [samplings[r] for r in active], [gens[r] for r in active],
                                [new[r] for r in active])
                keep = []
                for j, r in enumerate(active):
                    t = int(nxt[j])
                    if t in self.eos:
                        finish[r] = "stop"
                        continue
                    new[r].append(t)
                    if samplings[r].stop and self._hit_stop(new[r], samplings[r].stop):
                        finish[r] = "stop"
                    elif len(new[r]) < samplings[r].max_new_tokens:
                        keep.append(j)
                if not keep:
                    break
                if len(keep) < len(active):  # drop finished rows from the batch and its KV cache
                    sel = torch.tensor(keep, device=mask.device)
                    cache.batch_select_indices(sel)
                    mask, pos, nxt = mask[sel], pos[sel], nxt[sel]
                    active = [active[j] for j in keep]
                width += 1
                pos = pos[:, -1:] + 1
                logits = model(input_ids=nxt[:, None], attention_mask=mask[:, :width], position_ids=pos,
                               cache=cache, use_cache=True).logits[:, -1, :]
        out = []
        for r in range(B):
            text = tok.decode(new[r], skip_special_tokens=True)
            text = _cut_at_stop(text, samplings[r].stop)
            out.append(Completion(text=text, finish_reason=finish[r], prompt_tokens=len(ids[r]),
                                  completion_tokens=len(new[r])))
        return out

    def _hit_stop(self, tokens: list[int], stop: Sequence[str]) -> bool:
        tail = self._tok.decode(tokens[-32:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    # ----------------------------------------------------------------------------------------
    # choose

    def choose(self, chats: Sequence[Chat], options: Sequence[str], usage: Usage) -> Iterator[tuple[int, Choice]]:
        import torch
        model, tok = self.load()
        opt_ids = [tok(o, add_special_tokens=False)["input_ids"] for o in options]
        for o, oi in zip(options, opt_ids):
            if not oi:
                raise LLMError(f"model {self.name!r}: option {o!r} is empty after tokenisation")
        if len({tuple(x) for x in opt_ids}) < len(options):
            raise LLMError(f"model {self.name!r}: options {list(options)} are not distinct token sequences")
        heads = self._heads()
        routed = {i: heads.head_for(c, options, self.readout) for i, c in enumerate(chats)} if heads else {}
        if any(routed.values()):     # the questions the read-out heads answer; the rest go to the LM head
            yield from self._read_out(chats, options, routed, heads.layer, usage)
            chats = [c for i, c in enumerate(chats) if routed[i] is None]
            back = [i for i in range(len(routed)) if routed[i] is None]
            if not chats:
                return
        else:
            back = list(range(len(chats)))
        ids = self._encode(chats)
        for batch in self._batches(ids, by_prefix=True):
            with torch.inference_mode():
                lp = self._score_options([ids[i] for i in batch], opt_ids)
            usage.model_calls += len(batch)
            usage.prompt_tokens += sum(len(ids[i]) for i in batch)
            for i, row in zip(batch, lp.tolist()):
                if any(math.isnan(x) or x == math.inf for x in row):   # an overflow's NaN would pass as probabilities
                    raise LLMError(f"model {self.name!r}: option log-probabilities not finite ({row}) in {self.dtype}; "
                                   "load the model in float32 (models.<name>.dtype), or check its weights")
                yield back[i], _choice(options, row)

    def _heads(self):
        if self.readout is None:
            return None
        if getattr(self, "_readout_heads", None) is None:
            from echo_lib.llm.readout import ReadoutHeads
            model, _ = self.load()   # the heads must fit this model: its hidden size and depth
            layers = getattr(getattr(model, "model", None), "layers", None)
            self._readout_heads = ReadoutHeads.load(self.readout, hidden_size=model.config.hidden_size,
                                                    n_layers=len(layers) if layers is not None else None)
        return self._readout_heads

    def _read_out(self, chats, options, routed: dict, layer: int, usage: Usage) -> Iterator[tuple[int, Choice]]:
        """The chats with a head: their state after `layer` (or a contrast head's contrast), through their
        question's head."""
        import numpy as np
        mine = [i for i, h in routed.items() if h is not None]
        last = [i for i in mine if not routed[i].marks]
        states = dict(zip(last, self.last_states([chats[i] for i in last], layer, usage))) if last else {}
        for head in {id(routed[i]): routed[i] for i in mine}.values():   # each head once, on all its rows
            rows = [i for i in mine if routed[i] is head]
            x = (self.contrast_states([chats[i] for i in rows], layer, head.marks, usage) if head.marks
                 else np.stack([states[i] for i in rows]))
            probs = head.probs(x)
            finite = np.isfinite(probs).all(axis=1)
            if not finite.all():   # NaN states (a model that overflows in its dtype) or broken heads: never NaN answers
                from echo_lib.llm.readout import question
                raise LLMError(f"model {self.name!r}: read-out probabilities not finite (NaN) for question "
                               f"{question(chats[rows[0]])!r} in {int((~finite).sum())} of {len(rows)} prompts: the "
                               f"states after layer {layer} are not finite (does the model overflow in {self.dtype}? "
                               f"try float32) or the heads in {self.readout} are broken (rerun rule judges)")
            for i, row in zip(rows, probs.tolist()):
                p = dict(zip(head.classes, row))
                yield i, Choice(probs={o: p.get(o, 0.0) for o in options},
                                logprobs={o: math.log(max(p.get(o, 0.0), 1e-12)) for o in options}, coverage=1.0)

    def last_states(self, chats: Sequence[Chat], layer: int, usage: Usage | None = None):
        """[chats x hidden] float32 numpy: the hidden state after decoder layer `layer` (1-based, as
        hidden_states[layer] counts) at each prompt's last token. Every forward pass stops at that layer,
        and the prompts that share a head (one reply's questions) run it once, their tails on its cache."""
        import numpy as np
        import torch
        from tqdm.auto import tqdm
        model, tok = self.load()
        ids = self._encode(chats)
        out = np.zeros((len(ids), model.config.hidden_size), dtype=np.float32)
        up_to_layer, hook = self._layer_reader(layer, lambda h: h[:, -1].float().cpu().numpy())
        bar = tqdm(total=len(ids), desc=f"{self.name} layer-{layer} states", leave=False,
                   disable=not self.settings.progress or len(ids) < 2)
        n = self.settings.batch_size
        try:
            for chunk in _sharing(ids, n):
                rows = [ids[i] for i in chunk]
                shared = min(common_prefix(rows), min(map(len, rows)) - 1) if len(rows) > 1 else 0
                shared = shared if shared >= MIN_SHARED else 0
                cache = new_cache(model, reserve=max(map(len, rows)) - shared)
                with torch.inference_mode():
                    if shared:   # the head once, then its cache copied to every row
                        up_to_layer(input_ids=torch.tensor([rows[0][:shared]], device=model.device), cache=cache)
                        cache.batch_repeat_interleave(len(rows))
                    x, mask, pos = padded([r[shared:] for r in rows], tok.pad_token_id, model.device)
                    mask = torch.cat([mask.new_ones((len(rows), shared)), mask], dim=1)
                    out[chunk] = up_to_layer(input_ids=x, attention_mask=mask, position_ids=pos + shared,
                                             cache=cache)
                bar.update(len(chunk))
                if usage is not None:
                    usage.model_calls += len(chunk)
                    usage.prompt_tokens += sum(map(len, rows))
        finally:
            hook.remove()
            bar.close()
        return out

    def contrast_states(self, chats: Sequence[Chat], layer: int, marks: Sequence[str],
                        usage: Usage | None = None):
        """[chats x hidden] float32 numpy: for a prompt that shows two texts, the state after decoder layer
        `layer` at the end of the first minus that at the end of the second. A text ends at the last token
        before its mark: marks[k] is what follows text k in the last message (its last occurrence there).
        Every prompt runs whole, without shared heads (the first text's end may lie inside one)."""
        import numpy as np
        import torch
        from tqdm.auto import tqdm
        model, tok = self.load()
        if len(marks) != 2:
            raise LLMError(f"model {self.name!r}: a contrast needs two marks, got {list(marks)}")
        texts = self._render(chats)
        enc = tok(texts, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        ends = [[_token_before(text, str(c[-1]["content"]), m, offs) for m in marks]
                for c, text, offs in zip(chats, texts, enc["offset_mapping"])]
        out = np.zeros((len(ids), model.config.hidden_size), dtype=np.float32)
        up_to_layer, hook = self._layer_reader(layer, lambda h: h.float().cpu().numpy())
        bar = tqdm(total=len(ids), desc=f"{self.name} layer-{layer} contrasts", leave=False,
                   disable=not self.settings.progress or len(ids) < 2)
        try:
            for batch in self._batches(ids):
                x, mask, pos = padded([ids[i] for i in batch], tok.pad_token_id, model.device)
                with torch.inference_mode():
                    h = up_to_layer(input_ids=x, attention_mask=mask, position_ids=pos)
                for r, i in enumerate(batch):
                    pad = x.shape[1] - len(ids[i])
                    out[i] = h[r, pad + ends[i][0]] - h[r, pad + ends[i][1]]
                bar.update(len(batch))
                if usage is not None:
                    usage.model_calls += len(batch)
                    usage.prompt_tokens += sum(len(ids[i]) for i in batch)
        finally:
            hook.remove()
            bar.close()
        return out

    def _layer_reader(self, layer: int, pick):
        """(run, hook): run(**model inputs) returns pick(the hidden states after decoder layer `layer`),
        stopping the forward pass there; remove the hook when done."""
        model = self._model
        blocks = model.model.layers
        if not 1 <= layer <= len(blocks):
            raise LLMError(f"model {self.name!r}: read-out layer {layer} is not in 1..{len(blocks)}")
        caught = {}

        def grab(_module, _inputs, output):
            caught["h"] = pick(output[0] if isinstance(output, tuple) else output)
            raise _Stop    # the layers above it would change nothing read here

        def run(**kwargs):
            try:
                model(**kwargs, use_cache=True)
            except _Stop:
                pass
            return caught.pop("h")

        return run, blocks[layer - 1].register_forward_hook(grab)

    def _score_options(self, prompts: list[list[int]], opt_ids: list[list[int]]):
        """Summed log-probability of every option after every prompt, [prompts x options].

        The prompts run once; the next-token distribution scores every option's first token. An option's
        later tokens then run on the prompts' cache, batched over the prompts, and are cropped off again
        (never prompt + option re-encoded per option)."""
        import torch
        model = self._model
        cache = new_cache(model, reserve=max(map(len, opt_ids)))
        logits, mask, pos = prefill(model, self._tok.pad_token_id, prompts, cache, heads=self.heads,
                                    prefixes=self.prefixes, tally=self.tally)
        out = torch.log_softmax(logits[:, -1, :].float(), -1)[:, [o[0] for o in opt_ids]]
        n = len(prompts)
        for k, o in enumerate(opt_ids):
            if len(o) == 1:
                continue
            m = len(o) - 1  # inputs o[:-1]; the output at input t predicts o[t + 1]
            lg = model(input_ids=torch.tensor([o[:-1]] * n, device=model.device),
                       attention_mask=torch.cat([mask, mask.new_ones((n, m))], dim=1),
                       position_ids=pos[:, -1:] + 1 + torch.arange(m, device=model.device),
                       cache=cache, use_cache=True).logits.float()
            cache.crop(-m)
            out[:, k] += torch.log_softmax(lg, -1)[:, torch.arange(m), torch.tensor(o[1:])].sum(-1)
        return out.cpu()

    # ----------------------------------------------------------------------------------------
    # call_tools: choose the tool by name, then fill arguments (enumerated ones by choose)

    def call_tools(self, chats: Sequence[Chat], tools: list[dict], usage: Usage) -> Iterator[tuple[int, ToolCall]]:
        menu = [tool_menu_chat(c, tools) for c in chats]
        for part in self._held_together(menu):
            for j, call in self._call_tools([chats[i] for i in part], [menu[i] for i in part], tools, usage):
                yield part[j], call

    def _held_together(self, chats: Sequence[Chat]) -> list[list[int]]:
        """The chats in runs whose prompts the prefix cache holds at once (half of it), so that a chat's
        argument questions find its menu prompt still kept and compute only their own tail. All at once,
        the Director's 30 menu prompts of a 30-case sandbox (1.8k tokens, 83 MB of float32 keys and
        values each) overflowed the 512 MB cache, and every argument question ran the chat again."""
        if not self.prefixes.max_bytes:
            return [list(range(len(chats)))]
        model, _ = self.load()
        room = self.prefixes.max_bytes / 2 / kv_bytes_per_token(model)
        parts: list[list[int]] = []
        used = 0
        for i, n in enumerate(map(len, self._encode(chats))):
            if not parts or used + n > room:
                parts.append([])
                used = 0
            parts[-1].append(i)
            used += n
        return parts

    def _call_tools(self, chats: Sequence[Chat], menu: Sequence[Chat], tools: list[dict], usage: Usage
                    ) -> Iterator[tuple[int, ToolCall]]:
        names = [t["function"]["name"] for t in tools]
        picks = dict(self.choose(menu, names, usage))
        queries: list[ArgQuery] = []
        for i, chat in enumerate(chats):
            tool = tools[names.index(picks[i].best)]
            queries += arg_queries(i, chat, tool)
        values: dict[tuple[int, str], Any] = {}
        by_options: dict[tuple, list[ArgQuery]] = {}
        for q in queries:
            by_options.setdefault(tuple(q.options) if q.options else (), []).append(q)
        for opts, qs in by_options.items():
            if opts:
                texts = [option_text(o) for o in opts]
                for j, c in self.choose([q.chat for q in qs], texts, usage):
                    values[qs[j].chat_index, qs[j].name] = opts[texts.index(c.best)]
            else:
                greedy = Sampling(temperature=0, max_new_tokens=self.settings.tool_arg_tokens, stop=("\n",))
                for j, c in self.generate([q.chat for q in qs], [greedy] * len(qs), usage):
                    values[qs[j].chat_index, qs[j].name] = parse_arg(c.text, qs[j].schema)
        for i in range(len(chats)):
            args = {q.name: values[q.chat_index, q.name] for q in queries if q.chat_index == i}
            yield i, ToolCall(name=picks[i].best, arguments=args, probs=picks[i].probs)


@contextmanager
def outside_zero3() -> Iterator[None]:
    """Load a frozen model whole, even inside a ZeRO-3 training process. A reward model or a judge is
    never trained: partitioned by zero.Init it cannot merge its adapter (shape-0 tensors), and a
    device_map is refused under ZeRO-3. transformers keeps the active DeepSpeed config in a module
    global (integrations.deepspeed, capped version in pyproject.toml); it is hidden for the load."""
    try:
        from transformers.integrations import deepspeed as hf_ds
    except ImportError:
        yield
        return
    ref = hf_ds._hf_deepspeed_config_weak_ref
    hf_ds._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = ref


def _runs(ids: Sequence[Sequence[int]]) -> list[list[int]]:
    """Indices in token order, in runs that share a head beyond the head all of them share (one case's
    questions, one reply's rubric fields)."""
    shared = common_prefix(ids)
    runs: list[list[int]] = []
    for i in sorted(range(len(ids)), key=lambda i: ids[i]):
        if runs and common_prefix([ids[runs[-1][-1]][shared:], ids[i][shared:]]) >= MIN_SHARED:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _sharing(ids: Sequence[Sequence[int]], n: int, share: float = 0.6) -> list[list[int]]:
    """Indices in token order, in groups of at most n whose common head is at least `share` of each prompt
    (one reply's rubric fields, one transcript's rating dimensions): the head runs once per group."""
    groups: list[list[int]] = []
    head = 0
    for i in sorted(range(len(ids)), key=lambda i: ids[i]):
        if groups and len(groups[-1]) < n:
            shared = min(head, common_prefix([ids[groups[-1][0]], ids[i]]))
            if shared >= share * len(ids[i]):
                groups[-1].append(i)
                head = shared
                continue
        groups.append([i])
        head = len(ids[i])
    return groups


class _Stop(Exception):
    """Raised by _layer_reader's hook once the read-out layer has run."""


def _token_before(text: str, content: str, mark: str, offsets) -> int:
    """Index of the last token of `text` (a rendered prompt) that starts before `mark`'s last occurrence in
    `content` (its last message)."""
    at = content.rfind(mark)
    if at <= 0:
        raise LLMError(f"read-out mark {mark!r} is not in the prompt's last message after its start; the "
                       "contrast head was fit on prompts of another layout (refit the heads: rule judges)")
    where = text.rfind(content) + at
    return max(i for i, (start, _) in enumerate(offsets) if start < where)


def _choice(options: Sequence[str], logprobs: Sequence[float]) -> Choice:
    top = max(logprobs)
    weights = [math.exp(x - top) for x in logprobs]
    total = sum(weights)
    return Choice(probs={o: w / total for o, w in zip(options, weights)},
                  logprobs=dict(zip(options, logprobs)),
                  coverage=min(1.0, math.exp(top) * total))


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cuts = [text.find(s) for s in stop if s in text]
    return text[:min(cuts)] if cuts else text
