"""train_gpt: trains tinygpt on random tokens (fixed seed) for a few steps and
writes its losses, speed and peak memory as JSON; sized to a target footprint.

    python3 train_gpt.py --target-bytes 4294967296 --out r.json   # on cuda
    python3 train_gpt.py --device cpu --tiny --out r.json         # smoke test

Exit status: 0 done, 3 torch.cuda.OutOfMemoryError (caught and printed),
2 usage, 1 anything else.  gpu-check.sh runs it with and without vx and
compares the losses bit for bit.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

import tinygpt

SEQ = 256


def plan(target_bytes, tiny):
    """Width, layers, sequence and batch whose training footprint (fp32
    weights, grads, AdamW moments, saved activations, logits) is about
    target_bytes.  Pure arithmetic, so every run with the same target trains
    the same model."""
    if tiny:
        return {"width": 64, "layers": 2, "seq": 32, "batch": 4}
    width = 1024 if target_bytes >= (1 << 30) else 512
    heads = width // tinygpt.HEAD_DIM
    block = 12 * width * width + 13 * width
    layer_budget = 0.35 * target_bytes / 16 - 2 * tinygpt.VOCAB * width
    layers = int(max(1, min(48, layer_budget // block)))
    states = 16 * tinygpt.param_count(width, layers, SEQ)
    # Saved activations per sample: ~20 floats per position per layer
    # (LayerNorm inputs and outputs, q/k/v and their copies, MLP 4x twice) plus
    # the attention matrix; logits, their log-softmax and gradient.
    per_sample = layers * (80 * SEQ * width + 8 * heads * SEQ * SEQ) + 12 * SEQ * tinygpt.VOCAB
    batch = int(max(1, (target_bytes - states) // per_sample))
    return {"width": width, "layers": layers, "seq": SEQ, "batch": batch}


def batch_for(step, cfg, seed, device):
    """Random tokens for one step: the same on every run and every device."""
    g = torch.Generator(device="cpu").manual_seed(seed * 100003 + step)
    tokens = torch.randint(0, tinygpt.VOCAB, (cfg["batch"], cfg["seq"] + 1), generator=g)
    return tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(cfg, args, device, result):
    torch.manual_seed(args.seed)
    with device:
        model = tinygpt.GPT(cfg["width"], cfg["layers"], cfg["seq"])
    result["params"] = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    losses, t0 = [], None
    for step in range(args.warmup + args.iters):
        if step == args.warmup:
            sync(device)
            t0 = time.perf_counter()
        result["step"] = step
        x, y = batch_for(step, cfg, args.seed, device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, tinygpt.VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        del logits, loss
    sync(device)
    elapsed = time.perf_counter() - t0
    result["losses"] = [float(v) for v in torch.stack(losses).cpu()]
    result["losses_hex"] = [v.hex() for v in result["losses"]]
    result["seconds"] = elapsed
    result["its"] = args.iters / elapsed if elapsed > 0 else None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--target-bytes", type=int, default=4 << 30,
                   help="training footprint to size the model for")
    p.add_argument("--tiny", action="store_true", help="a few-MB model (CPU smoke test)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20, help="measured iterations")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--memory-limit-bytes", type=int, default=0,
                   help="cap PyTorch at this many bytes (set_per_process_memory_fraction)")
    p.add_argument("--out", help="write the result JSON here")
    args = p.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    return args


def describe(device, args, result):
    result.update(torch=torch.__version__, device=str(device), deterministic=True)
    if device.type != "cuda":
        return
    props = torch.cuda.get_device_properties(device)
    result.update(gpu=props.name, total_memory=props.total_memory)
    if args.memory_limit_bytes:
        fraction = min(1.0, args.memory_limit_bytes / props.total_memory)
        torch.cuda.set_per_process_memory_fraction(fraction, device)
        result["memory_fraction"] = fraction


def finish(result, device, out):
    if device.type == "cuda":
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated(device)
        result["max_memory_reserved"] = torch.cuda.max_memory_reserved(device)
    if out:
        with open(out, "w") as f:
            json.dump(result, f)
    shown = {k: v for k, v in result.items() if k not in ("losses", "losses_hex")}
    print("train_gpt:", json.dumps(shown))


def main(argv):
    args = parse_args(argv)
    tinygpt.set_deterministic()
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    cfg = plan(args.target_bytes, args.tiny)
    result = {"status": "running", "config": cfg, "target_bytes": args.target_bytes,
              "warmup": args.warmup, "iters": args.iters, "seed": args.seed}
    print("train_gpt: config", json.dumps(cfg), flush=True)
    describe(device, args, result)
    code = 0
    try:
        train(cfg, args, device, result)
        result["status"] = "ok"
    except torch.cuda.OutOfMemoryError as e:
        print(f"train_gpt: torch.cuda.OutOfMemoryError at step {result.get('step')}: {e}",
              flush=True)
        result.update(status="oom", error=str(e).splitlines()[0])
        code = 3
    finish(result, device, args.out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
