"""The peer engines' kernels on radixkv's attention shapes, for the h100@peer
style profile (bench/gpu_profile.sh runs it; bench/gpu_raw.py reads its lines).

  PYTHON_WITH_TORCH bench/torch_peer_attn.py > torch_peer.jsonl

Prefill, 32 query / 8 KV heads, head dim 128, bf16, a cached prefix P and a
suffix S: cuDNN SDPA without a mask ("cudnn-full(no mask)": torch cannot give
cuDNN a bottom-right causal mask when the lengths differ, so it runs every
tile; the rate counts the causal work 4 Hq d (S P + S (S + 1) / 2), as the sim
counts only the tiles the mask needs), FA2 likewise, FlexAttention with the real
mask where torch has it. Decode: SDPA with enable_gqa=True (no K/V expansion),
rate in TB/s of the real K/V bytes. Device: copy rate and a bf16 GEMM.
One JSON object per line; medians of 20 timed launches after 3 warm-up ones.
"""
import json
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from torch_timing import median_ms
except ImportError as e:
    sys.exit(f"torch_peer_attn.py: needs torch ({e})")

HQ, HKV, D = 32, 8, 128
DEV = "cuda"


def emit(**kw):
    print(json.dumps(kw), flush=True)


# One function per measurement: its tensors are freed when it returns, before
# the next one allocates (the GPU holds one case's operands at a time).
def device_rates():
    n = 1 << 28
    x = torch.empty(n, dtype=torch.bfloat16, device=DEV)
    y = torch.empty_like(x)
    copy_ms = median_ms(lambda: y.copy_(x))
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=DEV)
    gemm_ms = median_ms(lambda: a @ a)
    emit(bench="torch_peer", kind="device", name=torch.cuda.get_device_name(),
         torch=torch.__version__, copy_TBps=round(2 * 2 * n / (copy_ms * 1e-3) / 1e12, 4),
         gemm_TFLOPs=round(2 * 8192 ** 3 / (gemm_ms * 1e-3) / 1e12, 2))


def prefill(P, S):
    q = torch.randn(1, HQ, S, D, dtype=torch.bfloat16, device=DEV)
    k = torch.randn(1, HQ, P + S, D, dtype=torch.bfloat16, device=DEV)
    v = torch.randn_like(k)
    work = 4 * HQ * D * (S * P + S * (S + 1) / 2)
    for case, backend in (("cudnn-full(no mask)", SDPBackend.CUDNN_ATTENTION),
                          ("flash-full(no mask)", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v))
        except RuntimeError as e:
            print(f"torch_peer_attn.py: {case} P={P} S={S}: {e}", file=sys.stderr)
            continue
        emit(bench="torch_peer", kind="prefill", case=case, B=1, P=P, S=S, Hq=HQ,
             Hkv=HKV, D=D, ms=round(ms, 4), TFLOPs=round(work / (ms * 1e-3) / 1e12, 1))


def decode(B, L):
    q = torch.randn(B, HQ, 1, D, dtype=torch.bfloat16, device=DEV)
    k = torch.randn(B, HKV, L, D, dtype=torch.bfloat16, device=DEV)
    v = torch.randn_like(k)
    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    emit(bench="torch_peer", kind="decode", case="sdpa-gqa-native", B=B, L=L, Hq=HQ, Hkv=HKV,
         D=D, ms=round(ms, 4), TBps=round(2 * B * L * HKV * D * 2 / (ms * 1e-3) / 1e12, 3))


def main():
    if not torch.cuda.is_available():
        sys.exit("torch_peer_attn.py: no CUDA device")
    device_rates()
    for P in (4096, 16384, 32768):
        for S in (512, 2048):
            prefill(P, S)
    for B, L in ((16, 8192), (64, 4096), (128, 2048)):
        decode(B, L)


if __name__ == "__main__":
    main()
