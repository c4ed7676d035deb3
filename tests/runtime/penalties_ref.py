"""Expected rows for test_sampler's penalties test: vLLM's apply_penalties
(vllm/model_executor/layers/utils.py, 0.33) re-derived in numpy float32.

    repetition: ids in the prompt or the outputs: logit * (1/r) if > 0, else * r
    frequency:  logit -= f * (count of the id in the outputs)
    presence:   logit -= p * (id occurs in the outputs)

Prints penalties_ref.h (C) on stdout:
    /usr/bin/python3 tests/runtime/penalties_ref.py > tests/runtime/penalties_ref.h
(numpy needed: the torch venv has it.)
"""
import numpy as np

V = 16
LOGITS = np.array([2.5, -1.0, 0.0, 3.25, -0.5, 1.75, 4.0, -2.0,
                   0.75, 3.9, -3.5, 1.0, 2.0, -0.25, 3.5, 0.5], dtype=np.float32)
PROMPT = [3, 3, 7, 9, 0, 13]
OUTPUT = [6, 6, 6, 14, 1, 9, 6, 5]
CASES = [  # repetition, frequency, presence
    (1.3, 0.0, 0.0),
    (0.8, 0.0, 0.0),
    (1.0, 0.7, 0.0),
    (1.0, 0.0, -0.5),
    (1.0, 0.0, 1.5),
    (1.2, 0.4, 0.9),
    (2.0, -0.3, 2.0),
]


def penalise(logits, prompt, output, rep, freq, pres):
    x = logits.copy()
    vocab = x.shape[0]
    prompt_mask = np.bincount(prompt, minlength=vocab) > 0
    counts = np.bincount(output, minlength=vocab)
    out_mask = counts > 0
    r = np.float32(rep)
    pen = np.where(prompt_mask | out_mask, r, np.float32(1.0))
    scaling = np.where(x > 0, np.float32(1.0) / pen, pen).astype(np.float32)
    x = (x * scaling).astype(np.float32)
    x = (x - np.float32(freq) * counts.astype(np.float32)).astype(np.float32)
    x = (x - np.float32(pres) * out_mask.astype(np.float32)).astype(np.float32)
    return x


def c_floats(a):
    return ", ".join(float(v).hex() + "f" for v in a)


def main():
    print("/* penalties_ref.h - made by penalties_ref.py (vLLM's penalties in numpy"
          " float32); do not edit. */")
    print("enum { PEN_V = %d, PEN_NP = %d, PEN_NO = %d, PEN_NCASES = %d };"
          % (V, len(PROMPT), len(OUTPUT), len(CASES)))
    print("static const float pen_logits[PEN_V] = {%s};" % c_floats(LOGITS))
    print("static const int32_t pen_history[PEN_NP + PEN_NO] = {%s};"
          % ", ".join(str(t) for t in PROMPT + OUTPUT))
    print("static const float pen_params[PEN_NCASES][3] = {")
    for c in CASES:
        print("    {%s}," % c_floats(np.array(c, dtype=np.float32)))
    print("};")
    print("static const float pen_expected[PEN_NCASES][PEN_V] = {")
    for rep, freq, pres in CASES:
        row = penalise(LOGITS, PROMPT, OUTPUT, rep, freq, pres)
        print("    {%s}," % c_floats(row))
    print("};")


if __name__ == "__main__":
    main()
