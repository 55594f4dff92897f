"""A plain PyTorch training loop switched by an environment variable, TORCH_COMPILE=1,
as people write them. docs/your-script.md adds the marked lines; no other test runs
this script (your_script_guide_slow_test does, following the guide)."""
import os

import torch

import bakeoff_report                                           # added

compiled = os.environ.get("TORCH_COMPILE", "0") == "1"          # the sweep maps its axis here

torch.manual_seed(0)
torch.set_num_threads(len(os.sched_getaffinity(0)))
vocab, dim, batch, seq = 128, 32, 4, 16
model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, 2 * dim), torch.nn.ReLU(),
                            torch.nn.Linear(2 * dim, vocab))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
forward = torch.compile(model) if compiled else model

run = bakeoff_report.init()                                    # added
with run.guard():                                              # added: a crash becomes the trial's reason
    for i in range(run.config["warmup_steps"] + run.config["steps"]):
        tokens = torch.randint(0, vocab, (batch, seq + 1))
        with run.step(tokens=batch * seq) as step:             # added
            loss = torch.nn.functional.cross_entropy(forward(tokens[:, :-1]).reshape(-1, vocab),
                                                     tokens[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step.loss = loss
    mode = "default" if compiled else "eager"                  # added
    evidence, applied = bakeoff_report.compile_outcome(mode, run)
    run.summary(applied={"compile_mode": mode, **applied}, compile=evidence)
