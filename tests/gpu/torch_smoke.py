"""torch_smoke: train_gpt.py and infer_kv.py on the CPU at --tiny size, each
twice: they must finish and repeat their losses and token ids exactly.
Exit 77 (skip) where PyTorch is not installed."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(script, out, *extra):
    cmd = [sys.executable, os.path.join(HERE, script), "--device", "cpu", "--tiny", "--out", out]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(cmd + list(extra), env=env, capture_output=True, text=True, timeout=240)
    if proc.returncode != 0:
        sys.exit("torch_smoke: %s exited %d:\n%s%s" % (script, proc.returncode, proc.stdout,
                                                       proc.stderr))
    with open(out) as f:
        return json.load(f)


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch_smoke: PyTorch is not installed here: skipped")
        return 77
    with tempfile.TemporaryDirectory() as d:
        a = run("train_gpt.py", os.path.join(d, "a.json"), "--warmup", "1", "--iters", "3")
        b = run("train_gpt.py", os.path.join(d, "b.json"), "--warmup", "1", "--iters", "3")
        assert a["status"] == "ok" and len(a["losses"]) == 4, a
        assert a["losses_hex"] == b["losses_hex"], (a["losses"], b["losses"])
        assert all(7.0 < x < 11.0 for x in a["losses"]), a["losses"]  # ~ln(8192) = 9.01
        c = run("infer_kv.py", os.path.join(d, "c.json"), "--steps", "20")
        e = run("infer_kv.py", os.path.join(d, "e.json"), "--steps", "20")
        assert c["status"] == "ok" and len(c["tokens"]) == 3 and len(c["tokens"][0]) == 20, c
        assert c["tokens"] == e["tokens"]
        assert c["kv_bytes"] > 0 and c["tokens_per_s"] > 0
    print("torch_smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
