"""An unmodified Hugging Face ``Trainer.train`` on a tiny randomly initialised GPT-2 (nothing downloaded).

With evaluation every few steps and gradient accumulation; the usual TrainingArguments flags.
Prints the trainer's own ``global_step=N`` at the end.
"""

import sys
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, count: int, length: int, vocab: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab, (count, length), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> int:
    defaults = {
        "output_dir": tempfile.mkdtemp(prefix="hf-trainer-"),
        "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 16,
        "gradient_accumulation_steps": 2,
        "max_steps": 24,
        "eval_strategy": "steps",
        "eval_steps": 8,
        "logging_steps": 8,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
        "seed": 0,
    }
    argv = sys.argv[1:]
    callbacks = []
    if "--autotune-callback" in argv:  # profile with autotune's callback into the run directory that follows
        at = argv.index("--autotune-callback")
        from autotune.integrations import AutotuneTrainerCallback

        callbacks.append(AutotuneTrainerCallback(run_dir=argv[at + 1], quiet=True))
        del argv[at : at + 2]
    parser = HfArgumentParser(TrainingArguments)
    (args,) = parser.parse_args_into_dataclasses(args=[f"--{k}={v}" for k, v in defaults.items()] + argv)
    # no attention dropout: on a CPU it takes SDPA's math path, which a plan does not plan (a GPU fuses it)
    config = GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=2, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=RandomTokens(1024, 32, 256, seed=1),
        eval_dataset=RandomTokens(64, 32, 256, seed=2),
        callbacks=callbacks,
    )
    trainer.train()
    print(f"global_step={trainer.state.global_step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
