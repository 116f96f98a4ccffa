"""Chat formats: llmcc against transformers' apply_chat_template (Jinja) and generate.

The chat templates are written here in the styles real folders ship: ChatML with a default system
message (SmolLM2's, Qwen2.5's), ChatML with <think> reasoning (Qwen3's), Llama 3 with the dated
system block (3.1-3.3) and without (3.0). The tokenizers are byte-level BPEs trained on a little
text with each format's special tokens, saved with transformers' save_pretrained (which writes the
template to chat_template.jinja), one of them with the template inside tokenizer_config.json as
older folders have it. `llmcc tokenize --chat` must give the ids transformers gives for every
conversation, and `llmcc generate --chat` the reply transformers' greedy generate gives, ending at
the format's end of turn.

Run by scripts/test_python.sh with LLMCC_BINARY set to the build's llmcc.
"""
import json
import os
import subprocess

import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

LLMCC = os.environ.get("LLMCC_BINARY", "")

pytestmark = pytest.mark.skipif(not os.access(LLMCC, os.X_OK),
                                reason="LLMCC_BINARY does not name the llmcc binary (scripts/test_python.sh sets it)")

CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

CHATML_DEFAULT_SYSTEM = (
    "{%- for m in messages -%}{%- if loop.first and m['role'] != 'system' -%}"
    "{{ '<|im_start|>system\\nYou are a small helpful model.<|im_end|>\\n' }}{%- endif -%}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}")

# A reply after the last user message is written with its reasoning between <think> tags.
CHATML_THINKING = (
    "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- set ns = namespace(last_user=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{{- '<|im_start|>user\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'assistant' %}{%- set reasoning_content = m.reasoning_content | default('') %}"
    "{%- if loop.index0 > ns.last_user %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>assistant\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

LLAMA3_DATED = (
    "{{- bos_token }}{%- if not date_string is defined %}{%- if strftime_now is defined %}"
    "{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
    "{%- endif %}{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: ' + date_string + '\\n\\n' }}{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- for m in messages %}"
    "{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}")

LLAMA3 = (
    "{% for m in messages %}{% set text = '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
    "m['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{{ bos_token + text }}{% else %}{{ text }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}")

# name: (template, specials, bos, eos, the template inside tokenizer_config.json)
FORMATS = {
    "chatml-default-system": (CHATML_DEFAULT_SYSTEM, CHATML_SPECIALS, None, "<|im_end|>", False),
    "chatml-thinking": (CHATML_THINKING, CHATML_SPECIALS, None, "<|im_end|>", True),
    "llama3-dated": (LLAMA3_DATED, LLAMA3_SPECIALS, "<|begin_of_text|>", "<|eot_id|>", False),
    "llama3": (LLAMA3, LLAMA3_SPECIALS, "<|begin_of_text|>", "<|end_of_text|>", False),
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello, who are you?"}],
    [{"role": "system", "content": "  Answer in French.\n"}, {"role": "user", "content": "Bonjour ! 👋"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": " 4 "}, {"role": "user", "content": "x3?"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "\u3000東京\n\n"},
     {"role": "assistant", "content": "Tokyo."}],
    [{"role": "user", "content": "tabs\tand\r\nnewlines "}, {"role": "assistant", "content": "ok"}],
]

TEXT = ("the quick brown fox jumps over the lazy dog. who are you? answer in french, bonjour! "
        "system user assistant tokyo ") * 40


def make_tokenizer(folder, specials, bos, eos, template, in_config, vocab_size=None):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=vocab_size or 400, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    if vocab_size is not None:
        tok.add_tokens([f"<|unused_{i}|>" for i in range(vocab_size - tok.get_vocab_size())])
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos,
                                              chat_template=template)
    hf.save_pretrained(folder)
    jinja = os.path.join(folder, "chat_template.jinja")
    config_path = os.path.join(folder, "tokenizer_config.json")
    with open(config_path) as f:
        config = json.load(f)
    if in_config:  # as folders saved before chat_template.jinja existed
        if os.path.exists(jinja):
            os.remove(jinja)
        config["chat_template"] = template
        with open(config_path, "w") as f:
            json.dump(config, f)
    else:
        assert os.path.exists(jinja) or "chat_template" in config
    return hf


def llmcc(*args, check=True, text=True):
    result = subprocess.run([LLMCC, *args], capture_output=True, text=text)
    if check:
        assert result.returncode == 0, f"llmcc {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def byte_level_bytes(hf, ids):
    """The bytes byte-level BPE tokens spell (a random model's reply need not be UTF-8)."""
    chars = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    to_byte, extra = {chr(b): b for b in chars}, 0
    for b in range(256):
        if b not in chars:
            to_byte[chr(256 + extra)] = b
            extra += 1
    return bytes(to_byte[c] for token in hf.convert_ids_to_tokens(ids) for c in token)


def expected_ids(hf, conversation):
    prompt = conversation[-1]["role"] != "assistant"
    text = hf.apply_chat_template(conversation, add_generation_prompt=prompt, tokenize=False)
    return text, hf(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_tokenize_chat_gives_transformers_ids(name, tmp_path):
    template, specials, bos, eos, in_config = FORMATS[name]
    folder = str(tmp_path / "tok")
    hf = make_tokenizer(folder, specials, bos, eos, template, in_config)
    # Qwen3-style templates write a reply after the last user message with <think> reasoning,
    # which llmcc refuses (checked below); every other conversation must come out the same.
    thinking = "</think>" in template
    kept = [c for c in CONVERSATIONS if not (thinking and c[-1]["role"] == "assistant")]
    path = str(tmp_path / "chats.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in kept:
            f.write(json.dumps({"messages": c}) + "\n")
    lines = llmcc("tokenize", "--tokenizer", "hf:" + folder, "--chat", path).stdout.split("\n")[:-1]
    assert len(lines) == len(kept)
    for conversation, line in zip(kept, lines):
        text, ids = expected_ids(hf, conversation)
        ours = [int(t) for t in line.split()]
        assert ours == ids, f"{name}: {conversation}\ntransformers {text!r}\nllmcc {hf.decode(ours)!r}"
    if thinking:
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps({"messages": CONVERSATIONS[-1]}) + "\n")
        r = llmcc("tokenize", "--tokenizer", "hf:" + folder, "--chat", path, check=False)
        assert r.returncode != 0 and "message 2 is a reply after the last user message" in r.stderr, r.stderr


def test_a_template_llmcc_does_not_know_is_refused_by_name(tmp_path):
    folder = str(tmp_path / "tok")
    make_tokenizer(folder, CHATML_SPECIALS, None, "<|im_end|>",
                   "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}", True)
    path = str(tmp_path / "chats.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"messages": CONVERSATIONS[0]}) + "\n")
    r = llmcc("tokenize", "--tokenizer", "hf:" + folder, "--chat", path, check=False)
    assert r.returncode != 0 and "tokenizer_config.json: the chat template is not one llmcc recognises" in r.stderr, \
        r.stderr


@pytest.mark.parametrize("name", ["chatml-default-system", "llama3-dated"])
def test_generate_chat_replies_as_transformers_and_stops_at_the_end_of_turn(name, tmp_path):
    template, specials, bos, eos, in_config = FORMATS[name]
    folder = str(tmp_path / "model")
    vocab = 320
    hf = make_tokenizer(folder, specials, bos, eos, template, in_config, vocab_size=vocab)
    end = hf.convert_tokens_to_ids(eos)
    torch.manual_seed(20261129)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=False, bos_token_id=hf.bos_token_id, eos_token_id=end)).eval()
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who are you?"}]
    _, prompt = expected_ids(hf, conversation)

    def transformers_reply():
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=end,
                                 pad_token_id=end)
        return out[0, len(prompt):].tolist()

    def llmcc_reply_from(path):
        r = llmcc("generate", "--ckpt", path, "--chat", "--system", "Be brief.", "--prompt", "Who are you?",
                  "--temperature", "0", "--max-tokens", "12", "--threads", "1", text=False)
        return r.stdout, r.stderr.decode()

    def llmcc_reply():
        return llmcc_reply_from(folder)

    # As initialised: twelve tokens (or fewer, if the end of turn comes first).
    model.save_pretrained(folder)
    theirs = transformers_reply()
    text, log = llmcc_reply()
    assert text == byte_level_bytes(hf, [t for t in theirs if t != end]) + b"\n", log
    # Made to end its turn: the end-of-turn row of the head becomes twice the row of the third
    # token transformers chose, so the reply ends there or before.
    with torch.no_grad():
        model.lm_head.weight[end] = 2 * model.lm_head.weight[theirs[2]]
    model.save_pretrained(folder)
    theirs = transformers_reply()
    assert theirs[-1] == end and len(theirs) <= 3, theirs
    text, log = llmcc_reply()
    assert text == byte_level_bytes(hf, theirs[:-1]) + b"\n", log
    assert "stopped at the end of the reply" in log and "the end of turn" in log, log

    # An export carries the chat template along: the exported folder chats the same.
    exported = str(tmp_path / "exported")
    llmcc("export", "--ckpt", folder, "--format", "safetensors", "--out", exported)
    assert os.path.exists(os.path.join(exported, "chat_template.jinja"))
    again, _ = llmcc_reply_from(exported)
    assert again == text
