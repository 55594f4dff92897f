#!/usr/bin/env python3
"""hf-peft: the stack users run. A transformers Llama built from a config (random
weights: nothing is downloaded), PEFT LoRA on the chosen projections, DeepSpeed ZeRO
0-3 (optimizer and parameter offload on CUDA), bf16, and torch.compile through
DeepSpeed's engine.

Run by a worker as the `hf-peft` template of experiments/executors.yaml, one process per
rank with torchrun's environment; by hand:

    scripts/python -m torch.distributed.run --nproc-per-node 2 \
        experiments/python/hf_peft.py --config trial.json

It accepts the native trainer's field names where they mean the same (model presets give
the Llama's dimensions; lora_targets q, k, v, o, gate, up, down name q_proj, ...), so one
sweep can compare it with the native trainer and torch-reference. On a CPU, Gloo carries
DeepSpeed's collectives through its CPU accelerator; offload ends `unsupported` there
(docs/executors.md lists what is checked on a CPU and what only on a GPU).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bakeoff_report  # noqa: E402
from bakeoff_workloads import common  # noqa: E402

run = bakeoff_report.init()

TARGET_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
                  "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


def main():
    config = common.start(run)
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    threads, threads_reason = common.decide_threads(config)
    torch.set_num_threads(threads)

    import deepspeed  # noqa: PLC0415
    import peft  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    transformers.utils.logging.set_verbosity_error()
    for name in ("RANK", "LOCAL_RANK"):
        os.environ.setdefault(name, "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    # Our group first (its store on MASTER_ADDR only); DeepSpeed then takes it as is.
    common.init_distributed(config, single_rank_group=True)
    deepspeed.init_distributed(dist_backend="nccl" if config["device"] == "cuda" else "gloo")
    common.open_dataset(config)
    rank, world = run.rank, run.world_size

    dims = config["dims"]
    llama = transformers.LlamaConfig(
        hidden_size=dims["dim"], num_hidden_layers=dims["layers"], num_attention_heads=dims["heads"],
        num_key_value_heads=dims["kv_heads"], intermediate_size=dims["ffn_dim"], vocab_size=dims["vocab"],
        max_position_embeddings=max(2048, config["seq_len"] + 1), tie_word_embeddings=False,
        attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(int(config["seed"]))
    model = transformers.LlamaForCausalLM(llama)
    unknown = [t for t in config["lora_targets"] if t not in TARGET_MODULES]
    if unknown:
        run.fail("failed", f"lora_targets: {unknown} are not Llama projections", exit_code=2)
    lora = peft.LoraConfig(r=int(config["lora_rank"]), lora_alpha=float(config["lora_alpha"]),
                           lora_dropout=float(config["lora_dropout"]),
                           target_modules=[TARGET_MODULES[t] for t in config["lora_targets"]],
                           bias="none", task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    if config.get("grad_checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_lora = sum(p.numel() for p in trainable)
    n_total = sum(p.numel() for p in model.parameters())
    lora_modules = sum(1 for m in model.modules() if isinstance(m, peft.tuners.lora.LoraLayer))

    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=trainable,
                                           config=common.deepspeed_config(config))
    mode = config["compile_mode"]
    if mode != "eager":
        engine.compile(compile_kwargs={"mode": None if mode == "default" else mode,
                                       "dynamic": bool(config["dynamic_shapes"])})
    device = engine.device
    run.ready(executor="hf-peft", model={**dims, "params": n_total, "lora_params": n_lora,
                                         "lora_modules": lora_modules},
              comm_backend=("nccl" if config["device"] == "cuda" else "gloo") if world > 1 else "none")

    for step in range(config["warmup_steps"] + config["steps"]):
        with run.step() as record:
            losses = []
            tokens = 0
            for micro in range(config["grad_accum"]):
                batch = common.micro_batch(config, step * config["grad_accum"] + micro, rank, world).to(device)
                tokens += (batch.shape[1] - 1) * batch.shape[0] * world
                logits = engine(input_ids=batch[:, :-1]).logits
                loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
                engine.backward(loss)
                engine.step()
                losses.append(loss.detach().float())
            record.loss = common.global_mean(torch.stack(losses).mean(), world)
            record.tokens = tokens
            record.lr = float(config["lr"])
            norm = engine.get_global_grad_norm()
            if norm is not None:
                record.grad_norm = float(norm)

    applied = {"executor": "hf-peft", "compile_mode": mode, "zero_stage": engine.zero_optimization_stage(),
               "offload": config["offload"], "precision": "bf16" if engine.bfloat16_enabled() else "fp32",
               "threads": threads, "world_size": world, "micro_batch": config["micro_batch"],
               "grad_checkpointing": bool(config.get("grad_checkpointing")), "lora_modules": lora_modules,
               "attention": llama._attn_implementation,
               "decisions": {"threads": {"value": threads, "reason": threads_reason}}}
    compile_info, outcome = bakeoff_report.compile_outcome(mode, run)
    applied.update(outcome)
    flops = common.flops_per_token(dims, config["seq_len"], config["lora_rank"], config["lora_targets"])
    run.summary(applied=applied, compile=compile_info, trainable_bytes=n_lora * 4, flops_per_token=flops)
    return 0


if __name__ == "__main__":
    with run.guard():
        code = main()
    sys.exit(code)
