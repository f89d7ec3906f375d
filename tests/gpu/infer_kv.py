"""infer_kv: greedy autoregressive decoding with tinygpt and a KV cache that
grows in preallocated chunks, sized so the cache ends near a target size.

    python3 infer_kv.py --target-bytes 4294967296 --out r.json   # on cuda
    python3 infer_kv.py --device cpu --tiny --out r.json         # smoke test

Writes the generated token ids, tokens/s and peak memory as JSON.  Exit
status: 0 done, 3 torch.cuda.OutOfMemoryError (caught and printed), 2 usage,
1 anything else.  gpu-check.sh compares the token ids of runs with and without
vx: they must be identical.
"""
import argparse
import hashlib
import json
import sys
import time

import torch

import tinygpt

PROMPT = 8
CHUNK = 64


def plan(target_bytes, steps, tiny):
    """Model width/layers and batch so that the fp32 K and V of every layer,
    for PROMPT + steps positions rounded up to whole chunks, total about
    target_bytes."""
    if tiny:
        return {"width": 64, "layers": 2, "batch": 3, "steps": min(steps, 40), "chunk": 8}
    width = 1024 if target_bytes >= (1 << 30) else 512
    layers = 8
    positions = -(-(PROMPT + steps) // CHUNK) * CHUNK
    per_seq = 2 * layers * positions * width * 4
    batch = int(max(1, target_bytes // per_seq))
    return {"width": width, "layers": layers, "batch": batch, "steps": steps, "chunk": CHUNK}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def decode(cfg, args, device, result):
    torch.manual_seed(args.seed)
    with device:
        model = tinygpt.GPT(cfg["width"], cfg["layers"], PROMPT + cfg["steps"])
    model.eval()
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    prompt = torch.randint(0, tinygpt.VOCAB, (cfg["batch"], PROMPT), generator=g).to(device)
    caches = [tinygpt.KVCache(cfg["chunk"]) for _ in range(cfg["layers"])]
    out = []
    with torch.inference_mode():
        for pos in range(PROMPT):  # prefill one position at a time; also the warm-up
            logits = model.step(prompt[:, pos:pos + 1], pos, caches)
        tok = logits[:, -1].argmax(dim=-1, keepdim=True)
        out.append(tok)
        sync(device)
        t0 = time.perf_counter()
        for s in range(1, cfg["steps"]):
            result["step"] = s
            logits = model.step(tok, PROMPT + s - 1, caches)
            tok = logits[:, -1].argmax(dim=-1, keepdim=True)
            out.append(tok)
        sync(device)
        elapsed = time.perf_counter() - t0
    tokens = torch.cat(out, dim=1).cpu()
    result["tokens"] = tokens.tolist()
    result["tokens_sha256"] = hashlib.sha256(json.dumps(result["tokens"]).encode()).hexdigest()
    result["kv_bytes"] = sum(t.numel() * t.element_size() for c in caches for t in c.k + c.v)
    result["seconds"] = elapsed
    generated = cfg["batch"] * (cfg["steps"] - 1)
    result["tokens_per_s"] = generated / elapsed if elapsed > 0 else None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--target-bytes", type=int, default=4 << 30,
                   help="size of the KV cache at the last step")
    p.add_argument("--steps", type=int, default=504, help="tokens generated per sequence")
    p.add_argument("--tiny", action="store_true", help="a few-MB model (CPU smoke test)")
    p.add_argument("--seed", type=int, default=4321)
    p.add_argument("--memory-limit-bytes", type=int, default=0,
                   help="cap PyTorch at this many bytes (set_per_process_memory_fraction)")
    p.add_argument("--out", help="write the result JSON here")
    args = p.parse_args(argv)
    if args.steps < 2:
        p.error("--steps must be >= 2")
    return args


def describe(device, args, result):
    result.update(torch=torch.__version__, device=str(device))
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
    if out:
        with open(out, "w") as f:
            json.dump(result, f)
    shown = {k: v for k, v in result.items() if k != "tokens"}
    print("infer_kv:", json.dumps(shown))


def main(argv):
    args = parse_args(argv)
    tinygpt.set_deterministic()
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    cfg = plan(args.target_bytes, args.steps, args.tiny)
    result = {"status": "running", "config": cfg, "target_bytes": args.target_bytes,
              "seed": args.seed}
    print("infer_kv: config", json.dumps(cfg), flush=True)
    describe(device, args, result)
    code = 0
    try:
        decode(cfg, args, device, result)
        result["status"] = "ok"
    except torch.cuda.OutOfMemoryError as e:
        print(f"infer_kv: torch.cuda.OutOfMemoryError at step {result.get('step')}: {e}",
              flush=True)
        result.update(status="oom", error=str(e).splitlines()[0])
        code = 3
    finish(result, device, args.out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
