"""A transformers `TrainerCallback` that reports a `transformers.Trainer` run to Bakeoff:

    from bakeoff_report.hf import BakeoffCallback
    trainer = transformers.Trainer(..., callbacks=[BakeoffCallback()])

Each optimizer step is one timed `step` event (CUDA-synchronised), the first
`warmup_steps` of the trial config are warm-up, and the end of training writes the
summary with what took effect (DeepSpeed's ZeRO stage and offload when the Trainer ran
DeepSpeed, torch.compile's evidence when it compiled). Importing this module imports
transformers.
"""

import transformers

import bakeoff_report


class BakeoffCallback(transformers.TrainerCallback):
    def __init__(self, run=None, tokens_per_step=None):
        self.run = run or bakeoff_report.init()
        self.tokens_per_step = tokens_per_step
        self._step = None
        self._started = False

    def on_train_begin(self, args, state, control, **kwargs):
        if not self._started:
            self._started = True
            self.run.ready(executor="hf-trainer", trainer_args={"per_device_train_batch_size":
                                                                 args.per_device_train_batch_size,
                                                                 "gradient_accumulation_steps":
                                                                 args.gradient_accumulation_steps,
                                                                 "bf16": args.bf16})

    def on_step_begin(self, args, state, control, **kwargs):
        self._step = self.run.step(tokens=self.tokens_per_step)
        self._record = self._step.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step is None:
            return
        if state.log_history and "loss" in state.log_history[-1]:
            self._record.loss = state.log_history[-1]["loss"]
        self._step.__exit__(None, None, None)
        self._step = None

    def on_train_end(self, args, state, control, model=None, **kwargs):
        applied = {"executor": "hf-trainer", "precision": "bf16" if args.bf16 else "fp32"}
        if args.deepspeed:
            plugin = getattr(getattr(kwargs.get("accelerator"), "state", None), "deepspeed_plugin", None)
            config = getattr(plugin, "deepspeed_config", None) or {}
            zero = config.get("zero_optimization", {})
            applied["zero_stage"] = zero.get("stage", 0)
            applied["offload"] = "optimizer" if zero.get("offload_optimizer", {}).get("device") == "cpu" else "none"
        mode = (args.torch_compile_mode or "default") if args.torch_compile else "eager"
        if args.torch_compile:
            applied["compile_mode"] = mode
        evidence, outcome = bakeoff_report.compile_outcome(mode, self.run)
        applied.update(outcome)
        self.run.summary(applied=applied, compile=evidence)
