"""A Hugging Face Trainer with PEFT LoRA, switched by `--compile` (argparse), as people
write them: a tiny Llama built from a config (random weights, nothing downloaded) on
random tokens. docs/your-script.md adds the two marked lines; no other test runs this
script (your_script_guide_slow_test does, following the guide)."""
import argparse
import os

import peft
import torch
import transformers

from bakeoff_report.hf import BakeoffCallback                   # added (1 of 2)

parser = argparse.ArgumentParser()
parser.add_argument("--compile", default="false")
parser.add_argument("--output-dir", default=os.environ.get("BAKEOFF_OUTPUT_DIR", "out"))
args, _ = parser.parse_known_args()

torch.manual_seed(0)
torch.set_num_threads(len(os.sched_getaffinity(0)))
config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
model = peft.get_peft_model(transformers.LlamaForCausalLM(config),
                            peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            task_type="CAUSAL_LM"))


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        ids = torch.randint(0, 128, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


callback = BakeoffCallback()                                    # added (2 of 2): counts tokens, loss, compile
steps = callback.run.config["warmup_steps"] + callback.run.config["steps"]
training = transformers.TrainingArguments(
    output_dir=args.output_dir, max_steps=steps, per_device_train_batch_size=4, learning_rate=1e-3,
    logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
    dataloader_num_workers=0, torch_compile=args.compile == "true")
transformers.Trainer(model=model, args=training, train_dataset=RandomTokens(), callbacks=[callback]).train()
