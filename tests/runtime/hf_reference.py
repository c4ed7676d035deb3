#!/usr/bin/env python3
"""Independent reference: radixkv's cpu backend against Hugging Face transformers.

For a small Qwen2 (q/k/v biases, tied head) and a small Llama (untied head),
transformers builds the model from a config with seeded random weights (head_dim
64), saves config.json + model.safetensors, and computes the last-token logits of
a few prompts. radixkv loads the same files (tests/runtime/model_logits) and
computes the same logits, once on whole prompts and once with part of each prompt
already in KV pages (the cached-prefix path). They must agree:

    |radixkv - HF| <= 1e-4 * max(1, |HF|)    (absolute below 1, relative above)

Runs under the interpreter named by RKV_TORCH_PYTHON (scripts/torch_venv.sh makes
one); exits 77 (skip) when it is unset or lacks torch/transformers.
Usage: hf_reference.py PATH/TO/model_logits
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

TOL = 1e-4
SEED = 20240607


def randomize(model, torch):
    """Weights with unit-scale activations (HF's default std 0.02 would make the
    logits nearly flat and the comparison weak). Seeded by the caller."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "embed_tokens" in name or name.startswith("lm_head"):
                p.copy_(torch.randn_like(p) * (2.0 / p.shape[1] ** 0.5))
            else:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)


def build(arch, outdir, torch, transformers):
    common = dict(vocab_size=160, hidden_size=256, intermediate_size=320,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=64, max_position_embeddings=512, hidden_act="silu")
    if arch == "qwen2":
        cfg = transformers.Qwen2Config(**common, rope_theta=1000000.0, rms_norm_eps=1e-6,
                                       tie_word_embeddings=True, use_sliding_window=False)
    else:
        cfg = transformers.LlamaConfig(**common, rope_theta=10000.0, rms_norm_eps=1e-5,
                                       tie_word_embeddings=False, attention_bias=False,
                                       mlp_bias=False)
    torch.manual_seed(SEED + (arch == "llama"))
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    model = model.float().eval()
    randomize(model, torch)
    if cfg.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.save_pretrained(outdir, safe_serialization=True)
    return model, cfg


def main():
    reexec_in_venv("RKV_TORCH_PYTHON", __file__, "scripts/torch_venv.sh makes it")
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"torch/transformers missing ({e}): skipping", file=sys.stderr)
        sys.exit(77)
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    exe = sys.argv[1]
    torch.set_num_threads(1)
    worst = 0.0
    failures = []
    for arch in ("qwen2", "llama"):
        with tempfile.TemporaryDirectory(prefix=f"rkv_hf_{arch}_") as d:
            model, cfg = build(arch, d, torch, transformers)
            g = torch.Generator().manual_seed(SEED + 7)
            lengths = [1, 5, 17, 40, 70]
            prompts = [torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist()
                       for n in lengths]
            with torch.no_grad():
                ref = [model(torch.tensor([p])).logits[0, -1].double().tolist() for p in prompts]
            # whole prompts, then prefixes in pages: page-aligned (16, 32), not
            # aligned (3, 21), and all but the last token (a pure decode step).
            # label: (prefixes, batch-invariant mode)
            runs = {
                "whole": ([0, 0, 0, 0, 0], False),
                "cached prefix": ([0, 3, 16, 21, 69], False),
                "cached prefix 2": ([0, 4, 1, 32, 48], False),
                "decode": ([n - 1 for n in lengths], False),  # one row each: decode kernel
                "whole inv": ([0, 0, 0, 0, 0], True),
                "cached inv": ([0, 3, 16, 21, 69], True),
            }
            outputs = {}
            for label, (prefixes, invariant) in runs.items():
                req = [{"tokens": p, "prefix": k} for p, k in zip(prompts, prefixes)]
                rf = os.path.join(d, "requests.json")
                with open(rf, "w") as f:
                    json.dump(req, f)
                env = dict(os.environ, RKV_CPU_BATCH_INVARIANT="1" if invariant else "0")
                res = subprocess.run([exe, d, rf], capture_output=True, text=True, env=env)
                if res.returncode != 0:
                    print(res.stderr, file=sys.stderr)
                    sys.exit(f"{arch}: model_logits failed ({res.returncode})")
                got = [json.loads(line)["logits"] for line in res.stdout.splitlines()]
                assert len(got) == len(prompts), (arch, label, len(got))
                outputs[label] = got
                for i, (a, b) in enumerate(zip(got, ref)):
                    assert len(a) == len(b) == cfg.vocab_size
                    err = max(abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b))
                    spread = max(b) - min(b)
                    worst = max(worst, err)
                    line = (f"{arch:5s} {label:15s} len {lengths[i]:3d} prefix "
                            f"{prefixes[i]:3d}: max err {err:.2e} (logit spread {spread:.2f})")
                    print(line)
                    if err > TOL:
                        failures.append(line)
                    if spread < 1.0:
                        failures.append(line + " -- logits too flat to be a test")
            # Batch-invariant mode: a cached prefix changes no bit (%.9g prints
            # every float exactly).
            if outputs["whole inv"] != outputs["cached inv"]:
                failures.append(f"{arch}: batch-invariant logits differ between whole "
                                "prompts and cached prefixes")
            else:
                print(f"{arch} batch-invariant: whole and cached prefix bitwise equal")
    print(f"worst {worst:.2e}, tolerance {TOL:g} (abs below 1, relative above)")
    if failures:
        print("FAILED:\n" + "\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
