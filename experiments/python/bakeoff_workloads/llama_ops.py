"""The Llama-style decoder's two elementwise pieces, as the native trainer computes them
(experiments/trainer/model_math.h): RMS normalisation in fp32, and rotary position
embedding by halves. Shared by the benchmark's reference trainer and torch-reference, so
both train the native trainer's model.
"""

import torch


def rms_norm(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin
