#!/usr/bin/env python3
"""torch_trace.py: VXTRACE launch traces of real PyTorch models, made on CPU.

Models are built from torch.nn with random weights on the `meta` device (no
data, no downloads, full-size shapes). A TorchDispatchMode sees every aten op
and which tensor storages it reads and writes (the op schema's alias and
mutability annotations; out= arguments and fresh outputs are written). The
storages are laid out as PyTorch's CUDA caching allocator would lay them out
(c10/cuda/CUDACachingAllocator.cpp, default settings), and each op that would
launch a kernel becomes a LAUNCH record naming the 2 MiB chunks of the
segments its tensors' bytes lie in. The format is policy/TRACE.md.

    torch_trace.py MODEL OUT.vxt [--iters N] [--tokens N] ...
    models: gpt2-medium bert-base resnet50 moe llama-decode mixtral-decode

The allocator model and the trace writer need no torch (tests/traces/
test_layout.py drives them on a synthetic op list).
"""
import argparse
import bisect
import struct
import sys

# ---- CUDA caching allocator (default configuration) ----

MIN_BLOCK = 512  # kMinBlockSize: every request is rounded up to a multiple
SMALL_SIZE = 1 << 20  # kSmallSize: requests up to this come from the small pool
SMALL_BUFFER = 2 << 20  # kSmallBuffer: small-pool segment size
LARGE_BUFFER = 20 << 20  # kLargeBuffer: segment for large requests under kMinLargeAlloc
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge: bigger requests get their own segment rounded to this
SEG_BASE = 0x7F0000000000  # first segment's device address (any 2 MiB-aligned value)


def round_size(n):
    return MIN_BLOCK if n < MIN_BLOCK else (n + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def allocation_size(n):
    if n <= SMALL_SIZE:
        return SMALL_BUFFER
    if n < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return (n + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class Block:
    __slots__ = ("seg", "off", "size", "used", "nbytes", "prev", "next")

    def __init__(self, seg, off, size):
        self.seg, self.off, self.size = seg, off, size
        self.used, self.nbytes, self.prev, self.next = False, 0, None, None

    def key(self):  # the free-block set's order: size, then address
        return (self.size, self.seg.addr + self.off)


class Segment:
    __slots__ = ("sid", "addr", "size", "small")

    def __init__(self, sid, addr, size, small):
        self.sid, self.addr, self.size, self.small = sid, addr, size, small


class CachingAllocator:
    """Best-fit from a small and a large pool of free blocks; blocks split on
    allocation and merge with free neighbours on free; segments are never
    released (the allocator only does so on an out-of-memory retry or
    empty_cache(), neither of which happens here). `on_segment(seg)` is called
    for each new segment (cudaMalloc)."""

    def __init__(self, on_segment=None):
        self.pools = {True: [], False: []}  # small? -> sorted [(size, addr, block)]
        self.segments = []
        self.next_addr = SEG_BASE
        self.reserved = self.allocated = self.peak_allocated = 0
        self.on_segment = on_segment

    def _pool_add(self, b):
        bisect.insort(self.pools[b.seg.small], (b.size, b.seg.addr + b.off, id(b), b))

    def _pool_del(self, b):
        p = self.pools[b.seg.small]
        i = bisect.bisect_left(p, (b.size, b.seg.addr + b.off, id(b)))
        assert p[i][3] is b
        del p[i]

    def _new_segment(self, size, small):
        seg = Segment(len(self.segments) + 1, self.next_addr, size, small)
        self.next_addr += (size + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE
        self.segments.append(seg)
        self.reserved += size
        if self.on_segment:
            self.on_segment(seg)
        return Block(seg, 0, size)

    def malloc(self, nbytes):
        """Returns the Block holding `nbytes` (> 0)."""
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        p = self.pools[small]
        i = bisect.bisect_left(p, (size,))
        if i < len(p):
            b = p[i][3]
            del p[i]
        else:
            b = self._new_segment(allocation_size(size), small)
        rest = b.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            r = Block(b.seg, b.off + size, rest)
            r.prev, r.next = b, b.next
            if b.next:
                b.next.prev = r
            b.next, b.size = r, size
            self._pool_add(r)
        b.used, b.nbytes = True, nbytes
        self.allocated += b.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return b

    def free(self, b):
        assert b.used
        b.used = False
        self.allocated -= b.size
        for n in (b.prev, b.next):
            if n is not None and not n.used:
                self._pool_del(n)
                if n is b.prev:
                    b.off, b.prev = n.off, n.prev
                    if n.prev:
                        n.prev.next = b
                else:
                    b.next = n.next
                    if n.next:
                        n.next.prev = b
                b.size += n.size
        self._pool_add(b)


# ---- VXTRACE writer (policy/TRACE.md, version 1) ----

CHUNK = 2 << 20
READ, WRITE, RW = 1, 2, 3
MAX_RANGES = 4096


def fnv1a(s):
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class TraceWriter:
    """Buffers records; `finish(capacity)` returns the whole trace."""

    def __init__(self):
        self.recs = bytearray()
        self.time = 0
        self.nalloc = self.nlaunch = 0

    def alloc(self, seg):
        self.time += 100
        self.recs += struct.pack("<B3xI", 1, 40)
        self.recs += struct.pack("<QQQQII", self.time, seg.sid, seg.addr, seg.size, 0, 0)
        self.nalloc += 1

    def launch(self, kernel, dur_ns, ranges, stream=1):
        """ranges: [(alloc_id, first_chunk, count, mode)]; split past MAX_RANGES."""
        for i in range(0, max(len(ranges), 1), MAX_RANGES):
            part = ranges[i : i + MAX_RANGES]
            self.recs += struct.pack("<B3xI", 3, 40 + 24 * len(part))
            self.recs += struct.pack("<QQQQII", self.time, kernel, stream, dur_ns, 0, len(part))
            for a, f, c, m in part:
                self.recs += struct.pack("<QIII4x", a, f, c, m)
            self.time += dur_ns
            self.nlaunch += 1

    def finish(self, capacity):
        head = struct.pack("<8sHHIQQQ", b"VXTRACE\0", 1, 40, 1, CHUNK, 0, capacity)
        return head + bytes(self.recs)


def chunk_ranges(regions):
    """regions: [(block, start, end, kind)] with byte offsets inside the block's
    segment and kind READ, RW or WRITE (WRITE: the op overwrites every byte of
    [start, end) without reading it). Returns merged LAUNCH ranges. A chunk
    is write-only when each allocated byte in it is overwritten by this op;
    otherwise a write to it also needs the rest of the chunk (read-write)."""
    modes = {}  # (seg, chunk) -> mode bits
    pure = {}  # seg -> [(start, end)] overwritten intervals
    blocks = {}  # (seg, chunk) -> a block overlapping the chunk
    for b, s, e, kind in regions:
        if e <= s:
            continue
        seg = b.seg
        for c in range(s // CHUNK, (e - 1) // CHUNK + 1):
            modes[seg, c] = modes.get((seg, c), 0) | (READ if kind in (READ, RW) else 0) | (
                WRITE if kind in (RW, WRITE) else 0
            )
            blocks.setdefault((seg, c), b)
        if kind == WRITE:
            pure.setdefault(seg, []).append((s, e))
    for (seg, c), m in modes.items():
        if m == WRITE and not _covered(blocks[seg, c], c * CHUNK, (c + 1) * CHUNK, pure[seg]):
            modes[seg, c] = RW
    out = []
    for seg, c in sorted(modes, key=lambda k: (k[0].sid, k[1])):
        m = modes[seg, c]
        if out and out[-1][0] == seg.sid and out[-1][1] + out[-1][2] == c and out[-1][3] == m:
            out[-1][2] += 1
        else:
            out.append([seg.sid, c, 1, m])
    return [tuple(r) for r in out]


def _covered(b, c0, c1, intervals):
    """True when every allocated byte of [c0, c1) (walking b's neighbours) lies
    in the union of `intervals`."""
    while b.prev is not None and b.prev.off + b.prev.size > c0:
        b = b.prev
    while b is not None and b.off < c1:
        if b.used:
            s, e = max(b.off, c0), min(b.off + b.nbytes, c1)
            for i0, i1 in sorted(intervals):
                if i0 <= s < i1:
                    s = i1
            if s < e:
                return False
        b = b.next
    return True


# ---- kernel duration model ----

DEV_FLOPS = 400e12  # dense matmul throughput, flop/s (tools/synth_int.h SB_FLOPS)
DEV_BPS = 3e12  # device memory bandwidth, bytes/s (tools/synth_int.h SB_DEV_BPS)
LAUNCH_NS = 2000  # per-kernel floor (tools/synth_build.c sb_dur)


def dur_ns(flops, nbytes):
    return int(max(flops / DEV_FLOPS, nbytes / DEV_BPS) * 1e9) + LAUNCH_NS


# ---- the dispatch-mode tracer (needs torch) ----

FOREACH_CHUNK = 65536  # multi_tensor_apply's kChunkSize (elements)
FOREACH_BLOCKS = 320  # its depth_to_max_blocks: chunks per kernel

# Ops that allocate or relabel memory but launch no kernel.
NO_KERNEL = {
    "empty",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "empty_like",
    "lift_fresh",
    "detach",
    "alias",
    "_local_scalar_dense",
    "_record_function_enter_new",
    "_record_function_exit",
    "set_",
    "resize_",
}
# In-place ops that overwrite their (dense) self without reading it.
PURE_WRITE = {
    "fill_",
    "zero_",
    "copy_",
    "normal_",
    "uniform_",
    "random_",
    "bernoulli_",
    "exponential_",
    "log_normal_",
    "cauchy_",
    "geometric_",
}


def make_tracer():
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import flop_registry

    class Tracer(TorchDispatchMode):
        """Traces device (meta) tensors only: CPU tensors (optimizer step
        counters, scalars) stay on the host in a real run too."""

        def __init__(self):
            super().__init__()
            self.w = TraceWriter()
            self.alloc = CachingAllocator(self.w.alloc)
            self.blocks = {}  # storage _cdata -> Block
            self.dying = []
            self.ops = {}  # op name -> launches

        def _dead(self, key):
            self.dying.append(key)

        def _reap(self):
            while self.dying:
                b = self.blocks.pop(self.dying.pop(), None)
                if b is not None:
                    self.alloc.free(b)

        def _block(self, t):
            """The block of t's storage, allocating it at first sight."""
            s = t.untyped_storage()
            n = s.nbytes()
            if n == 0:
                return None, False
            b = self.blocks.get(s._cdata)
            if b is not None and b.nbytes == n:
                return b, False
            if b is not None:  # resized: the allocator gives it a new block
                self.alloc.free(b)
            b = self.alloc.malloc(n)
            if s._cdata not in self.blocks:
                weakref.finalize(s, self._dead, s._cdata)
            self.blocks[s._cdata] = b
            return b, True

        @staticmethod
        def _span(t):
            """Bytes of t's storage the view reaches: (start, end, dense)."""
            if t.numel() == 0:
                return 0, 0, False
            isz = t.element_size()
            ext = 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
            s = t.storage_offset() * isz
            return s, s + ext * isz, ext == t.numel()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self._reap()
            out = func(*args, **kwargs)
            self._reap()
            name = func._schema.name.split("::")[-1]
            # Arguments by schema: written ones are in-place (or out=) targets.
            sch = func._schema.arguments
            vals = list(args) + [kwargs.get(a.name) for a in sch[len(args) :]]
            touched = []  # (tensor, kind, argument name)
            for a, v in zip(sch, vals):
                ts = [x for x in tree_flatten(v)[0] if isinstance(x, torch.Tensor)]
                wr = a.alias_info is not None and a.alias_info.is_write
                for t in ts:
                    if t.device.type != "meta":
                        continue
                    if not wr:
                        kind = READ
                    elif a.kwarg_only or name in PURE_WRITE and a.name == "self":
                        kind = WRITE
                    else:
                        kind = RW
                    touched.append((t, kind, a.name))
            fresh = []
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.device.type == "meta":
                    b, new = self._block(t)
                    if new:
                        fresh.append((t, WRITE, "out"))
            if name in NO_KERNEL:
                return out
            regions, nbytes, dtypes = [], 0, []
            for t, kind, _ in touched + fresh:
                b, _ = self._block(t)
                if b is None:
                    continue
                s, e, dense = self._span(t)
                if kind == WRITE and not dense:
                    kind = RW
                regions.append((b, b.off + s, b.off + min(e, b.nbytes), kind))
                nbytes += e - s
                dtypes.append(str(t.dtype).split(".")[-1])
            if not any(k != READ for _, _, _, k in regions):
                return out  # a view or a query: no kernel writes anything
            if name.startswith("_foreach_"):
                self._foreach(func, touched + fresh)
                return out
            flops = 0
            f = flop_registry.get(func._overloadpacket)
            if f is not None:
                try:
                    flops = f(*args, out_val=out, **kwargs)
                except Exception:
                    flops = 0
            kname = str(func) + ":" + ",".join(sorted(set(dtypes)))
            self.w.launch(fnv1a(kname), dur_ns(flops, nbytes), chunk_ranges(regions))
            self.ops[name] = self.ops.get(name, 0) + 1
            return out

        def _foreach(self, func, touched):
            """A _foreach_ op launches as CUDA's multi_tensor_apply does: the
            lists walked in 64 Ki-element chunks, one kernel per at most 320
            chunks or max_tensors[depth] tensors, each kernel touching only
            the slices of the tensors it covers (and every plain tensor
            argument, such as a scalar tensor, whole)."""
            groups = {}
            for t, kind, g in touched:
                groups.setdefault(g, []).append((t, kind))
            n0 = max(len(v) for v in groups.values())
            lists = [v for v in groups.values() if len(v) == n0]
            whole = [tk for v in groups.values() if len(v) != n0 for tk in v]
            max_t = (110, 64, 48, 36, 30)[min(len(lists), 5) - 1]
            kname = fnv1a(str(func) + ":" + str(lists[0][0][0].dtype).split(".")[-1])
            cur, blocks, tens = [], 0, 0  # cur: [tensor index, e0, e1]
            for i in range(n0):
                numel = lists[0][i][0].numel()
                tens += 1
                nch = max((numel + FOREACH_CHUNK - 1) // FOREACH_CHUNK, 1)
                for c in range(nch):
                    e0, e1 = c * FOREACH_CHUNK, min((c + 1) * FOREACH_CHUNK, numel)
                    if cur and cur[-1][0] == i:
                        cur[-1][2] = e1
                    else:
                        cur.append([i, e0, e1])
                    blocks += 1
                    done = c == nch - 1  # a tensor counts against max_t once it ends
                    if blocks == FOREACH_BLOCKS or (tens == max_t and done) or (i == n0 - 1 and done):
                        self._foreach_launch(kname, lists, whole, cur)
                        cur, blocks = [], 0
                        tens = 0 if done else 1  # a split tensor carries on

        def _foreach_launch(self, kname, lists, whole, cur):
            regions, nbytes = [], 0
            sl = [(tks[i], e0, e1) for tks in lists for i, e0, e1 in cur]
            for (t, kind), e0, e1 in sl + [(tk, 0, tk[0].numel()) for tk in whole]:
                b, _ = self._block(t)
                if b is None:
                    continue
                s, e, dense = self._span(t)
                if dense:  # the slice [e0, e1) of a dense tensor
                    s, e = s + e0 * t.element_size(), s + e1 * t.element_size()
                elif kind == WRITE:
                    kind = RW
                regions.append((b, b.off + s, b.off + min(e, b.nbytes), kind))
                nbytes += e - s
            if regions:
                self.w.launch(kname, dur_ns(0, nbytes), chunk_ranges(regions))
                self.ops["_foreach"] = self.ops.get("_foreach", 0) + 1

        def finish(self):
            self._reap()
            cap = self.alloc.reserved // 2 // CHUNK * CHUNK
            return self.w.finish(max(cap, CHUNK))

    return Tracer


# ---- models (torch.nn, random weights, meta device) ----


def models():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    aten = torch.ops.aten

    def attention(q, k, v, causal, p):
        """What scaled_dot_product_attention runs on an H200: the fused
        memory-efficient kernel for fp32, flash for half precision."""
        if q.dtype == torch.float32:
            return aten._scaled_dot_product_efficient_attention(q, k, v, None, True, p, causal)[0]
        return aten._scaled_dot_product_flash_attention(q, k, v, p, causal)[0]

    def dropout(x, p, training):
        """F.dropout as CUDA runs it: one fused native_dropout kernel (on meta
        tensors F.dropout would decompose into three)."""
        return aten.native_dropout(x, p, True)[0] if training and p > 0 else x

    class Block(nn.Module):  # GPT-2 / BERT transformer block
        def __init__(self, d, heads, ffn, pre_ln, causal, drop, moe=None):
            super().__init__()
            self.h, self.pre, self.causal, self.drop = heads, pre_ln, causal, drop
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = moe or nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))

        def attn(self, x):
            B, T, d = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            y = attention(q, k, v, self.causal, self.drop if self.training else 0.0)
            return dropout(self.proj(y.transpose(1, 2).reshape(B, T, d)), self.drop, self.training)

        def forward(self, x):
            if self.pre:
                x = x + self.attn(self.ln1(x))
                return x + dropout(self.mlp(self.ln2(x)), self.drop, self.training)
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + dropout(self.mlp(x), self.drop, self.training))

    class LM(nn.Module):  # GPT-2 (pre-LN, causal) or BERT (post-LN, MLM head)
        def __init__(self, vocab, ctx, d, layers, heads, bert, moe=None):
            super().__init__()
            self.bert = bert
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(
                Block(d, heads, 4 * d, not bert, not bert, 0.1, moe(i) if moe else None)
                for i in range(layers)
            )
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, d) if bert else None

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            x = dropout(x, 0.1, self.training)
            for b in self.blocks:
                x = b(x)
            x = self.ln(F.gelu(self.head(x)) if self.bert else x)
            return x @ self.tok.weight.t()  # tied output embedding

    class MoE(nn.Module):
        """Top-k experts; the routing is data-dependent, so on meta tensors it
        is drawn from a skewed host distribution that changes every call and
        the token indices come from a device kernel (as nonzero/sort would)."""

        def __init__(self, d, ffn, experts, topk, gen, glu=False):
            super().__init__()
            self.k, self.gen, self.glu = topk, gen, glu
            self.gate = nn.Linear(d, experts, bias=False)
            w1 = 2 * ffn if glu else ffn  # SwiGLU experts: gate and up projections in one
            self.w1 = nn.ParameterList(nn.Parameter(torch.empty(w1, d)) for _ in range(experts))
            self.w2 = nn.ParameterList(nn.Parameter(torch.empty(d, ffn)) for _ in range(experts))
            for w in list(self.w1) + list(self.w2):
                nn.init.normal_(w, std=0.02)

        def forward(self, x):
            shape = x.shape
            x = x.reshape(-1, shape[-1])
            n, E = x.shape[0], len(self.w1)
            probs = F.softmax(self.gate(x), dim=-1)
            w, _ = torch.topk(probs, self.k, dim=-1)
            pop = torch.rand(E, generator=self.gen, device="cpu") ** 2 + 0.05
            # each token picks k distinct experts
            pick = torch.multinomial(pop.expand(n, E), self.k, replacement=False, generator=self.gen)
            counts = torch.bincount(pick.flatten(), minlength=E)
            out = torch.zeros_like(x)
            for e in range(E):
                c = min(int(counts[e]), n)
                if c == 0:
                    continue
                idx = torch.randint(0, n, (c,), device=x.device)
                h = x.index_select(0, idx) @ self.w1[e].t()
                if self.glu:
                    g, u = h.chunk(2, dim=-1)
                    h = F.silu(g) * u
                else:
                    h = F.gelu(h)
                h = h @ self.w2[e].t()
                out = out.index_add(0, idx, h * w[:c, :1])
            return out.view(shape)

    def bottleneck(cin, mid, cout, stride):
        class Bottleneck(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1, self.b1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
                self.c2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
                self.b2 = nn.BatchNorm2d(mid)
                self.c3, self.b3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
                self.down = None
                if stride != 1 or cin != cout:
                    self.down = nn.Sequential(
                        nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                    )

            def forward(self, x):
                y = F.relu(self.b1(self.c1(x)))
                y = F.relu(self.b2(self.c2(y)))
                y = self.b3(self.c3(y))
                return F.relu(y + (self.down(x) if self.down else x))

        return Bottleneck()

    class ResNet50(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
            layers, cin = [], 64
            for mid, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    layers.append(bottleneck(cin, mid, mid * 4, stride if i == 0 else 1))
                    cin = mid * 4
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(2048, classes)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    class Llama(nn.Module):
        """Llama-2-like decoder (RMSNorm, rotary, SwiGLU), fp16, KV cache grown
        with torch.cat each token as simple generation loops do; with
        kv_heads < heads (grouped-query attention, K and V repeated for the
        kernel as Hugging Face's repeat_kv does) and moe (a factory of MoE
        FFNs) it is Mixtral-like."""

        def __init__(self, vocab, d, layers, heads, ffn, kv_heads=None, moe=None):
            super().__init__()
            self.h, self.kvh = heads, kv_heads or heads
            self.emb = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList()
            for _ in range(layers):
                L = nn.Module()
                L.n1, L.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
                L.wqkv = nn.Linear(d, d + 2 * d * self.kvh // heads, bias=False)
                L.wo = nn.Linear(d, d, bias=False)
                if moe:
                    L.moe = moe()
                else:
                    L.w13 = nn.Linear(d, 2 * ffn, bias=False)
                    L.w2 = nn.Linear(ffn, d, bias=False)
                self.layers.append(L)
            self.norm, self.out = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)

        @staticmethod
        def rope(x, cos, sin):
            x1, x2 = x.chunk(2, dim=-1)
            return x * cos + torch.cat((-x2, x1), dim=-1) * sin

        def forward(self, idx, cache, pos):
            B, T = idx.shape
            x = self.emb(idx)
            hd = x.shape[-1] // self.h
            t = torch.arange(pos, pos + T, device=idx.device, dtype=torch.float32)
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=idx.device, dtype=torch.float32) / hd))
            ang = torch.outer(t, inv).repeat(1, 2)
            cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
            for i, L in enumerate(self.layers):
                qkv = L.wqkv(L.n1(x)).view(B, T, self.h + 2 * self.kvh, hd).transpose(1, 2)
                q, k, v = qkv.split((self.h, self.kvh, self.kvh), dim=1)
                q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
                if cache[i] is not None:
                    k = torch.cat((cache[i][0], k), dim=2)
                    v = torch.cat((cache[i][1], v), dim=2)
                cache[i] = (k, v)
                if self.kvh != self.h:
                    k = k.repeat_interleave(self.h // self.kvh, dim=1)
                    v = v.repeat_interleave(self.h // self.kvh, dim=1)
                y = attention(q, k, v, T > 1, 0.0)
                x = x + L.wo(y.transpose(1, 2).reshape(B, T, -1))
                if hasattr(L, "moe"):
                    x = x + L.moe(L.n2(x))
                    continue
                g, u = L.w13(L.n2(x)).chunk(2, dim=-1)
                x = x + L.w2(F.silu(g) * u)
            return self.out(self.norm(x[:, -1:]))

    return LM, MoE, ResNet50, Llama


def run_model(name, a):
    import torch
    import torch.nn.functional as F

    LM, MoE, ResNet50, Llama = models()
    Tracer = make_tracer()
    tr = Tracer()
    dev = "meta"
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    with tr, torch.device(dev):
        if name in ("gpt2-medium", "bert-base", "moe"):
            if name == "gpt2-medium":
                vocab, ctx, d, layers, heads, bert, moe = 50257, 1024, 1024, 24, 16, False, None
            elif name == "bert-base":
                vocab, ctx, d, layers, heads, bert, moe = 30522, 512, 768, 12, 12, True, None
            else:
                vocab, ctx, d, layers, heads, bert = 32000, 1024, 1024, a.layers or 6, 16, False
                moe = lambda i: MoE(d, 4 * d, 8, 2, gen)  # noqa: E731
            if a.layers and name != "moe":
                layers = a.layers
            model = LM(vocab, ctx, d, layers, heads, bert, moe)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
            for _ in range(a.iters):
                idx = torch.randint(0, vocab, (a.batch, a.seq))
                tgt = torch.randint(0, vocab, (a.batch, a.seq))
                loss = F.cross_entropy(model(idx).view(-1, vocab), tgt.view(-1))
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del idx, tgt, loss
        elif name == "resnet50":
            model = ResNet50()
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, foreach=True)
            for _ in range(a.iters):
                x = torch.randn(a.batch, 3, 224, 224)
                y = torch.randint(0, 1000, (a.batch,))
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del x, y, loss
        elif name in ("llama-decode", "mixtral-decode"):
            torch.set_default_dtype(torch.float16)  # built in fp16: no fp32 copy first
            if name == "llama-decode":
                model = Llama(32000, 4096, a.layers or 32, 32, 11008)
            else:
                moe = lambda: MoE(4096, 14336, 8, 2, gen, glu=True)  # noqa: E731
                model = Llama(32000, 4096, a.layers or 16, 32, 0, kv_heads=8, moe=moe)
            model.eval()
            torch.set_default_dtype(torch.float32)
            with torch.no_grad():
                cache = [None] * len(model.layers)
                idx = torch.randint(0, 32000, (a.batch, a.seq))
                logits = model(idx, cache, 0)
                for i in range(a.tokens):
                    idx = torch.argmax(logits, dim=-1)
                    logits = model(idx, cache, a.seq + i)
        else:
            raise SystemExit(f"torch_trace: unknown model {name!r}")
        del model
    return tr


DEFAULTS = {  # model -> (batch, seq, iters, layers, tokens)
    "gpt2-medium": (4, 1024, 4, 0, 0),
    "bert-base": (16, 512, 5, 0, 0),
    "resnet50": (64, 224, 5, 0, 0),
    "moe": (8, 1024, 5, 6, 0),
    "llama-decode": (8, 512, 0, 0, 16),
    "mixtral-decode": (4, 256, 0, 16, 14),
}


def main(argv):
    p = argparse.ArgumentParser(description="VXTRACE of a PyTorch model on the meta device")
    p.add_argument("model", choices=sorted(DEFAULTS))
    p.add_argument("out")
    p.add_argument("--batch", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--tokens", type=int)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    for k, v in zip(("batch", "seq", "iters", "layers", "tokens"), DEFAULTS[a.model]):
        if getattr(a, k) is None:
            setattr(a, k, v)
    tr = run_model(a.model, a)
    data = tr.finish()
    with open(a.out, "wb") as f:
        f.write(data)
    al = tr.alloc
    print(
        f"{a.model}: {tr.w.nlaunch} launches, {len(al.segments)} segments, "
        f"reserved {al.reserved / 2**30:.2f} GiB, peak allocated {al.peak_allocated / 2**30:.2f} GiB, "
        f"capacity {(al.reserved // 2) / 2**30:.2f} GiB, {len(data) / 2**20:.2f} MiB -> {a.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
