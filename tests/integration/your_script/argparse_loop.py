"""A plain PyTorch training loop switched by a flag, as people write them: `--compile`
read with argparse. docs/your-script.md adds the four marked lines; no other test runs
this script (your_script_guide_slow_test does, following the guide)."""
import argparse
import os

import torch

import bakeoff_report                                           # added (1 of 4)

parser = argparse.ArgumentParser()
parser.add_argument("--compile", default="false")              # the sweep passes --compile=true
parser.add_argument("--lr", type=float, default=1e-3)
args, _ = parser.parse_known_args()

torch.manual_seed(0)
torch.set_num_threads(len(os.sched_getaffinity(0)))
vocab, dim, batch, seq = 128, 32, 4, 16
model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, dim), torch.nn.GELU(),
                            torch.nn.Linear(dim, vocab))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
forward = torch.compile(model) if args.compile == "true" else model

run = bakeoff_report.init()                                    # added (2 of 4)
for i in range(run.config["warmup_steps"] + run.config["steps"]):
    tokens = torch.randint(0, vocab, (batch, seq + 1))
    with run.step(tokens=batch * seq) as step:                 # added (3 of 4): the step, timed
        logits = forward(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step.loss = loss
mode = "default" if args.compile == "true" else "eager"       # added (4 of 4): what took effect
evidence, applied = bakeoff_report.compile_outcome(mode, run)
run.summary(applied={"compile_mode": mode, **applied}, compile=evidence)
