"""Times torch's scaled_dot_product_attention (flash backend) on the shapes of
bench/attn_gpu_bench.cu, in the same run on the GPU machine, and prints the ratio
of radixkv's rate to torch's.

  python3 bench/torch_sdpa.py [OURS.jsonl] > torch_sdpa.jsonl

Prefill: 32 query / 8 KV heads (KV repeated per query head, as flash needs), head
dim 128, bf16. torch's flash kernel applies its causal mask top-left, so it is
exact only for P = 0; with a prefix it runs unmasked and its rate counts the
full S x (P + S) work (an upper bound on what the same tiles reach). Decode: one
query over L keys, rate in TB/s of the real (un-repeated) K/V bytes.
One JSON object per line on stdout; the ratio table goes to stderr.
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import median_ms

HQ, HKV, D = 32, 8, 128
DEV = "cuda"


def prefill(P, S):
    L = P + S
    q = torch.randn(1, HQ, S, D, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(1, HKV, L, D, device=DEV, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    k = k.repeat_interleave(HQ // HKV, 1)
    v = v.repeat_interleave(HQ // HKV, 1)
    causal = P == 0
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    pairs = S * (S + 1) // 2 if causal else S * L
    return {"bench": "torch_sdpa_flash", "kind": "prefill", "P": P, "S": S,
            "mask": "causal" if causal else "none", "ms": round(ms, 4),
            "TFLOPs": round(4 * HQ * D * pairs / ms / 1e9, 1)}


def decode(B, L):
    q = torch.randn(B, HQ, 1, D, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(B, HKV, L, D, device=DEV, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    kx = k.repeat_interleave(HQ // HKV, 1)
    vx = v.repeat_interleave(HQ // HKV, 1)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        ms = median_ms(lambda: F.scaled_dot_product_attention(q, kx, vx))
    return {"bench": "torch_sdpa_flash", "kind": "decode", "B": B, "L": L, "ms": round(ms, 4),
            "TBps": round(2 * B * HKV * L * D * 2 / ms / 1e9, 3)}


def main():
    ours = []
    if len(sys.argv) > 1:
        try:
            with open(sys.argv[1]) as f:
                ours = [json.loads(line) for line in f if line.startswith("{")]
        except (OSError, ValueError) as e:
            print(f"torch_sdpa.py: no radixkv figures to compare ({e})", file=sys.stderr)
    print(json.dumps({"bench": "torch_sdpa_device", "name": torch.cuda.get_device_name(),
                      "torch": torch.__version__}), flush=True)
    rows = []
    for P in [0, 4096, 16384, 32768]:
        for S in [512, 2048]:
            rows.append(prefill(P, S))
            print(json.dumps(rows[-1]), flush=True)
            torch.cuda.empty_cache()
    for B, L in [(1, 32768), (16, 8192), (64, 4096), (128, 2048)]:
        rows.append(decode(B, L))
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    # Ratios: radixkv (default tile, bf16, B = 1 for prefill) / torch flash.
    print(f"{'case':<26}{'radixkv':>10}{'torch':>10}{'ratio':>8}", file=sys.stderr)
    for r in rows:
        if r["kind"] == "prefill":
            m = [o for o in ours if o.get("bench") == "attn_prefill_cuda" and o["dtype"] == "bf16"
                 and o["B"] == 1 and o["P"] == r["P"] and o["S"] == r["S"]
                 and o.get("tile_variant", -1) == -1]
            key, name = "TFLOPs", f"prefill P={r['P']} S={r['S']}"
        else:
            m = [o for o in ours if o.get("bench") == "attn_decode_cuda" and o["dtype"] == "bf16"
                 and o["B"] == r["B"] and o["L"] == r["L"] and o["page"] == 16]
            key, name = "TBps", f"decode B={r['B']} L={r['L']}"
        if m:
            ratio = m[0][key] / r[key]
            print(json.dumps({"bench": "ratio_radixkv_over_torch_flash", "case": name,
                              "radixkv": m[0][key], "torch": r[key], "unit": key,
                              "ratio": round(ratio, 3)}), flush=True)
            print(f"{name:<26}{m[0][key]:>10}{r[key]:>10}{ratio:>8.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
