"""A tiny random-weight causal LM + tokenizer with a ChatML chat template, built offline in tests.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a few sentences, the model a
2-layer Llama with random weights. Generation is nonsense but shapes, batching, padding, seeds,
LoRA and saving behave exactly as with the real model.
"""
from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CORPUS = [
    "I failed my exam again and I feel like a total failure.",
    "That sounds really hard. Do you want to talk about what happened?",
    "My friend stopped answering my messages and I do not know why.",
    "You are a warm, attentive friend. Reply in two or three sentences.",
    "better tie worse human machine 0 1 2 3 4 5 yes no",
]


def build_tiny_lm(out_dir: str | Path, seed: int = 0, vocab_size: int = 300, hidden_size: int = 32) -> Path:
    """hidden_size 64 for 4-bit NF4 stand-ins: bitsandbytes' CPU 4-bit kernel needs layers >= 64 wide."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|im_end|>", unk_token="<|endoftext|>", padding_side="left")
    hf_tok.chat_template = CHATML

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(hf_tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = hf_tok.pad_token_id
    model.save_pretrained(out_dir)
    hf_tok.save_pretrained(out_dir)
    return out_dir
