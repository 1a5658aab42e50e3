"""A tiny random Qwen2 model, its tokenizer and a chat JSONL dataset, built locally for ``swift sft``.

Nothing is downloaded: the tokenizer is a byte-level BPE trained with the ``tokenizers`` library
on a few sentences; the model is ``Qwen2ForCausalLM`` with random weights (about 100k
parameters). ``SWIFT_FLAGS`` are the arguments a real offline CPU run of ms-swift 4.x needs for
it (see ``shared/research/feasibility.md`` section 5).
"""

from __future__ import annotations

import json
from pathlib import Path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Quota keeps a shared GPU machine fair between teams.",
    "Fine-tuning a small model takes a few steps on a CPU.",
    "Hello, how can I help you today?",
    "A namespace has a balance; a balance has resources.",
    "Every job runs as a process with its own log.",
]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def swift_flags(model: Path, dataset: Path, output_dir: Path, max_steps: int = 3) -> list[str]:
    """The ``swift sft`` arguments of a quick offline CPU run on the tiny model."""
    return [
        "--model",
        str(model),
        "--model_type",
        "qwen2",
        "--template",
        "qwen",
        "--tuner_type",
        "lora",
        "--dataset",
        str(dataset),
        "--max_steps",
        str(max_steps),
        "--output_dir",
        str(output_dir),
        "--gradient_accumulation_steps",
        "1",
        "--dataloader_num_workers",
        "0",
        "--report_to",
        "none",
        "--max_length",
        "128",
        "--torch_dtype",
        "float32",
        "--check_model",
        "false",
        "--logging_steps",
        "1",
        "--save_steps",
        str(max_steps),
    ]


#: an ms-swift plugin (``--external_plugins``) whose callback holds training after a step until a
#: file exists: a run that must be stopped mid-way waits for its stop instead of racing it
_HOLD_PLUGIN = """\
import os
import time

from swift.callbacks import TrainerCallback, callbacks_map


class HoldUntilReleased(TrainerCallback):
    # on_step_end comes before the step's checkpoint is saved: the hold is after the step after it
    def on_step_end(self, args, state, control, **kwargs):
        while state.global_step > {step} and not os.path.exists({release!r}):
            time.sleep(0.1)


callbacks_map["jq_hold"] = HoldUntilReleased
"""


def hold_after_checkpoint(step: int, release: Path, plugin: Path) -> list[str]:
    """``swift sft`` flags that hold the run once its checkpoint at ``step`` is whole, until
    ``release`` exists (a run resumed after it is released goes on). ``plugin`` is written."""
    plugin.write_text(_HOLD_PLUGIN.format(step=step, release=str(release)))
    return ["--external_plugins", str(plugin), "--callbacks", "jq_hold"]


def build_tokenizer(directory: Path, sentences: list[str] = SENTENCES, vocab_size: int = 400):
    """A byte-level BPE trained on ``sentences``, with the chat template's special tokens, saved to
    ``directory``; returned (a ``PreTrainedTokenizerFast``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(sentences * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None, unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    return fast


def build_tiny_model(directory: Path) -> Path:
    """Write tokenizer and model files to ``directory``; return it."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    fast = build_tokenizer(directory)

    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(directory)
    return directory


def build_dataset(path: Path, rows: int = 32) -> Path:
    """A chat JSONL file (system, user, assistant) of ``rows`` lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            question = SENTENCES[i % len(SENTENCES)]
            answer = SENTENCES[(i + 1) % len(SENTENCES)]
            f.write(
                json.dumps(
                    {
                        "messages": [
                            {"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": question},
                            {"role": "assistant", "content": answer},
                        ]
                    }
                )
                + "\n"
            )
    return path


if __name__ == "__main__":  # python tests/e2e/tiny_swift.py DIR: build both, print the flags
    import shlex
    import sys

    root = Path(sys.argv[1])
    model = build_tiny_model(root / "model")
    data = build_dataset(root / "data.jsonl")
    print(shlex.join(swift_flags(model, data, root / "out")))
