"""tinygpt: a small GPT-style decoder in plain PyTorch, shared by train_gpt.py
and infer_kv.py; weights come from a fixed seed, nothing is downloaded.

Attention is written out (matmul, mask, softmax, matmul) rather than through
scaled_dot_product_attention so that every kernel is an ordinary cuBLAS or
elementwise one whose result does not depend on which fused backend exists.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 8192
HEAD_DIM = 64


def set_deterministic():
    """Deterministic kernels where PyTorch has them (warns where it has not).

    CUBLAS_WORKSPACE_CONFIG must be set before cuBLAS starts; gpu-check.sh
    sets it in the environment, this is the fallback for direct runs."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then a 4x MLP."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def _split(self, x):
        """(B, T, 3C) -> three (B, heads, T, head_dim) tensors."""
        b, t, c3 = x.shape
        c = c3 // 3
        q, k, v = x.split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        return [z.reshape(shape).transpose(1, 2) for z in (q, k, v)]

    def _mlp(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self._split(self.qkv(self.ln1(x)))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self._mlp(x + self.proj(y))

    def step(self, x, cache):
        """One decoding position: x is (B, 1, C); cache holds this layer's K/V."""
        b, _, c = x.shape
        q, k, v = self._split(self.qkv(self.ln1(x)))
        cache.append(k, v)
        scale = 1.0 / math.sqrt(q.shape[-1])
        keys, values = cache.views()
        scores = torch.cat([q @ kc.transpose(-2, -1) for kc in keys], dim=-1) * scale
        p = F.softmax(scores, dim=-1)
        y, off = None, 0
        for vc in values:
            n = vc.shape[2]
            part = p[..., off:off + n] @ vc
            y = part if y is None else y + part
            off += n
        y = y.transpose(1, 2).reshape(b, 1, c)
        return self._mlp(x + self.proj(y))


class KVCache:
    """One layer's keys and values in preallocated chunks of `chunk` positions;
    a new chunk is allocated when the last one is full, so the cache (and the
    process's device memory) grows step by step during decoding."""

    def __init__(self, chunk):
        self.chunk = chunk
        self.k, self.v = [], []
        self.fill = 0  # positions used in the last chunk

    def append(self, k, v):
        if not self.k or self.fill == self.chunk:
            shape = (k.shape[0], k.shape[1], self.chunk, k.shape[3])
            self.k.append(torch.empty(shape, dtype=k.dtype, device=k.device))
            self.v.append(torch.empty(shape, dtype=v.dtype, device=v.device))
            self.fill = 0
        self.k[-1][:, :, self.fill:self.fill + 1].copy_(k)
        self.v[-1][:, :, self.fill:self.fill + 1].copy_(v)
        self.fill += 1

    def views(self):
        """The filled part of every chunk, keys then values."""
        last = self.fill
        keys = self.k[:-1] + [self.k[-1][:, :, :last]]
        values = self.v[:-1] + [self.v[-1][:, :, :last]]
        return keys, values


class GPT(nn.Module):
    def __init__(self, width, layers, max_pos, vocab=VOCAB):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(max_pos, width)
        self.blocks = nn.ModuleList(Block(width, width // HEAD_DIM) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))

    def step(self, idx, position, caches):
        """Logits for one new token per sequence; idx is (B, 1)."""
        pos = torch.full((1,), position, dtype=torch.long, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk, cache in zip(self.blocks, caches):
            x = blk.step(x, cache)
        return self.head(self.ln_f(x))


def param_count(width, layers, max_pos, vocab=VOCAB):
    """Parameters of GPT(width, layers, max_pos, vocab), exactly."""
    block = 12 * width * width + 13 * width  # 4 Linear weights+biases, 2 LayerNorms
    return layers * block + (vocab + max_pos) * width + 2 * width + vocab * width


def gib(n):
    return n / float(1 << 30)
