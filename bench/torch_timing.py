"""What bench/torch_sdpa.py and bench/torch_peer_attn.py share: a kernel's
median time on the GPU. Each runs as a script from bench/, so this module is
on its path; it needs torch with CUDA, which both check before calling it."""
import torch


def median_ms(fn, warm=3, reps=20):
    """fn's median time in ms over reps launches, after warm untimed ones
    (first-call setup, autotuning), each timed between two CUDA events on
    the current stream so host overhead between launches is not counted."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]
