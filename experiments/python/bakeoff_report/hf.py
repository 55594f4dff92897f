"""A transformers `TrainerCallback` that reports a `transformers.Trainer` run to Bakeoff:

    from bakeoff_report.hf import BakeoffCallback
    trainer = transformers.Trainer(..., callbacks=[BakeoffCallback()])

Each optimizer step is one timed `step` event (CUDA-synchronised; in a lockstep trial it
takes its turn through `run.step()`, docs/lockstep.md), the first `warmup_steps` of the
trial config are warm-up, and the end of training writes the summary with what took
effect (DeepSpeed's ZeRO stage and offload when the Trainer ran DeepSpeed,
torch.compile's evidence and its cache state when it compiled: compile_outcome()).

Tokens and loss come from the step itself. When training begins the callback finds the
Trainer that calls it and wraps that Trainer's `training_step` (on the instance; its
class is untouched), which runs once per micro-batch between `on_step_begin` and
`on_step_end`. Each call adds the micro-batch's tokens (its attention mask's sum, else
`input_ids.numel()`; `count_tokens(inputs)` replaces that) and the loss it returns, so
a step's figures are those of the micro-batches that went into its optimizer step
(gradient accumulation included). At the step's end one all-reduce over the default
process group (when torch.distributed is initialised with more than one rank) makes them
global: the tokens summed over ranks and the loss averaged over them, the value the
Trainer logs for that step. `tokens_per_step` (the global tokens of one optimizer step)
replaces the count. Where no Trainer is found (a loop that calls the callbacks itself;
`attach(trainer)` names it), steps carry `tokens_per_step` only and no loss, and the
rank's log says so. Importing this module imports transformers.
"""

import sys

import transformers

import bakeoff_report


def count_input_tokens(inputs):
    """The tokens of one micro-batch on this rank: its attention mask's sum (padding
    excluded), else `input_ids.numel()`; None when the batch has neither. A tensor or an
    int: a device tensor is not read here, so counting never waits for the device."""
    if hasattr(inputs, "get"):
        mask = inputs.get("attention_mask")
        if mask is not None and hasattr(mask, "sum"):
            return mask.sum()
        ids = inputs.get("input_ids")
        if ids is not None and hasattr(ids, "numel"):
            return ids.numel()
    return None


class BakeoffCallback(transformers.TrainerCallback):
    """`run`: the Run to report through (default: bakeoff_report.init()).
    `tokens_per_step`: the global tokens of one optimizer step, when they are known;
    else they are counted from the batches. `count_tokens(inputs)`: this rank's tokens
    in one micro-batch (default count_input_tokens)."""

    def __init__(self, run=None, tokens_per_step=None, count_tokens=count_input_tokens):
        self.run = run or bakeoff_report.init()
        self.tokens_per_step = tokens_per_step
        self.count_tokens = count_tokens
        self._step = None
        self._record = None
        self._started = False
        self._attached = None
        self._tokens = None   # this step's tokens on this rank (int or tensor), None: none counted
        self._loss = None     # this step's loss on this rank (sum over its micro-batches)

    # ---- finding the step's own figures ----
    def attach(self, trainer):
        """Wraps `trainer.training_step` so each micro-batch adds its tokens and loss to
        the current step. Called when training begins with the Trainer calling the
        callback; call it yourself for a Trainer the callback cannot find."""
        if self._attached is trainer:
            return self
        inner = trainer.training_step
        if getattr(inner, "_bakeoff_callback", None) is self:
            self._attached = trainer
            return self

        def training_step(*args, **kwargs):
            inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
            if self.tokens_per_step is None and self.count_tokens is not None and inputs is not None:
                counted = self.count_tokens(inputs)
                if counted is not None:
                    self._tokens = counted if self._tokens is None else self._tokens + counted
            loss = inner(*args, **kwargs)
            if loss is not None and hasattr(loss, "detach"):
                loss = loss.detach()
                self._loss = loss if self._loss is None else self._loss + loss
            return loss

        training_step._bakeoff_callback = self
        trainer.training_step = training_step
        self._attached = trainer
        return self

    @staticmethod
    def _calling_trainer():
        """The transformers.Trainer whose training loop is calling us (a few frames up)."""
        frame = sys._getframe(2)
        for _ in range(12):
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, transformers.Trainer):
                return candidate
            frame = frame.f_back
        return None

    # ---- the callbacks ----
    def on_train_begin(self, args, state, control, **kwargs):
        if self._attached is None:
            trainer = self._calling_trainer()
            if trainer is not None:
                self.attach(trainer)
            else:
                print("bakeoff_report.hf: no transformers.Trainer found calling BakeoffCallback; steps carry "
                      "tokens_per_step only and no loss (BakeoffCallback.attach(trainer) names it)",
                      file=sys.stderr, flush=True)
        if not self._started:
            self._started = True
            self.run.ready(executor="hf-trainer", trainer_args={"per_device_train_batch_size":
                                                                 args.per_device_train_batch_size,
                                                                 "gradient_accumulation_steps":
                                                                 args.gradient_accumulation_steps,
                                                                 "bf16": args.bf16})

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        self._tokens = None
        self._loss = None
        self._step = self.run.step(tokens=self.tokens_per_step)  # waits for its turn, untimed
        self._record = self._step.__enter__()
        try:
            # The rate this step's optimizer step uses (the scheduler steps after it).
            self._record.lr = float(optimizer.param_groups[0]["lr"])
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            pass

    def on_step_end(self, args, state, control, **kwargs):
        if self._step is None:
            return
        tokens, loss = self._global_figures()
        if tokens is not None:
            self._record.tokens = tokens
        if loss is not None:
            self._record.loss = loss
        step, self._step = self._step, None
        step.__exit__(None, None, None)

    def _global_figures(self):
        """(global tokens, global mean loss) of the step, each None when not known."""
        tokens, loss = self._tokens, self._loss
        self._tokens = self._loss = None
        torch = sys.modules.get("torch")
        dist = getattr(torch, "distributed", None) if torch is not None else None
        world = 1
        if dist is not None and dist.is_available() and dist.is_initialized():
            world = dist.get_world_size()
        if world > 1 and (tokens is not None or loss is not None):
            # One collective for both; on the loss's device (NCCL needs a CUDA tensor).
            device = loss.device if loss is not None else "cpu"
            both = torch.stack([torch.as_tensor(v if v is not None else 0, dtype=torch.float64, device=device)
                                for v in (tokens, loss)])
            dist.all_reduce(both)
            total, loss_sum = both.tolist()
            return (int(round(total)) if tokens is not None else None,
                    loss_sum / world if loss is not None else None)
        if tokens is not None:
            # One rank (or no process group): this rank's count times the world size.
            tokens = int(tokens.item() if hasattr(tokens, "item") else tokens) * max(1, self.run.world_size)
        if loss is not None:
            loss = float(loss.float().item()) if hasattr(loss, "float") else float(loss)
        return tokens, loss

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self._step is not None:  # training stopped inside a step: no event, its turn given back
            step, self._step = self._step, None
            step.__exit__(RuntimeError, RuntimeError("training ended within a step"), None)
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
        # compile_s, graphs and breaks, CUDA graphs, and `compile_cache_state` (cold/warm/mixed).
        evidence, outcome = bakeoff_report.compile_outcome(mode, self.run)
        applied.update(outcome)
        self.run.summary(applied=applied, compile=evidence)
