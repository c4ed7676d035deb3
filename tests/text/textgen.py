"""Seeded generated text for the text suite's reference tests: fragments of many
scripts, emoji sequences, combining marks, digits, code, whitespace runs,
contractions, control characters and special tokens, mixed into strings."""

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_0|>",
            "<|reserved_special_token_10|>"]
# an added token that is not special: matched after normalization, kept on decode
NORMALIZED_ADDED = "café au lait"

# --------------------------------------------------------------- strings

RANGES = [  # (first, last) code points of scripts and symbol blocks
    (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF),
    (0x530, 0x58F), (0x5D0, 0x5EA), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE5B),
    (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F),
    (0x20A0, 0x20BF), (0x2190, 0x22FF), (0x2500, 0x257F), (0x3000, 0x303F),
    (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0xFF00, 0xFFEF),
    (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x1D400, 0x1D7FF), (0xE000, 0xE0FF),
    (0x10000, 0x1007F), (0xFFF0, 0xFFFD),
]
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u0651", "\u093c", "\u0e31", "\u20dd"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "❤️", "🧑🏿‍💻", "1️⃣", "🫠"]
WORDS = ["the", "The", "THE", "hello", "world", "don't", "I'LL", "we're", "it's", "You'VE",
         "ſ", "K", "naïve", "résumé", "Straße", "İstanbul", "ΣΊΣΥΦΟΣ", "москва", "東京",
         "서울", "नमस्ते", "مرحبا", "שלום", "ไทย", "ქართული", "Ǆemal", "ﬁle", "Å", "Å"]
CODE = ["def f(x):\n    return x + 1\n", "int main(void) { return 0; }",
        "for (i = 0; i < n; i++) {\r\n\tsum += a[i];\r\n}", "<div class=\"x\">&amp;</div>",
        "SELECT * FROM t WHERE id = 42;", "x = [1, 2, 3]  # comment", "$ ls -la ~/.cache\n",
        "{\"key\": [true, null, 3.14e-10]}", "a->b->c ||= d ?? e;", "```python\nprint('hi')\n```"]
DIGITS = ["0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "٣٤٥",
          "१२३", "１２３", "Ⅻ", "½", "²", "007", "0x1F", "1e-9"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028",
          "\u0085", "\u000b\u000c", "\u200b", "\u2009", " " * 17, "\n" * 5, "\t \t", " \u00a0 "]
CONTROL = ["\x00", "\x01", "\x1b[0m", "\x7f", "\x1c\x1d\x1e\x1f", "\ufeff", "\ufffd", "\U0010ffff"]


def rand_char(r):
    lo, hi = r.choice(RANGES)
    while True:
        c = chr(r.randint(lo, hi))
        if not 0xD800 <= ord(c) <= 0xDFFF:
            return c


def fragment(r):
    k = r.random()
    if k < 0.25:
        return r.choice(WORDS)
    if k < 0.40:
        return "".join(rand_char(r) for _ in range(r.randint(1, 8)))
    if k < 0.50:
        return r.choice(SPACES)
    if k < 0.58:
        return r.choice(DIGITS)
    if k < 0.65:
        return r.choice(EMOJI)
    if k < 0.72:
        base = r.choice("aeiouAEOnNcsz" + "αωяиᄀ")
        return base + "".join(r.choice(COMBINING) for _ in range(r.randint(1, 3)))
    if k < 0.78:
        return r.choice(CODE)
    if k < 0.83:
        return r.choice(SPECIALS + [NORMALIZED_ADDED, "<|im_start", "|>", "<|", "<|<|im_end|>|>"])
    if k < 0.86:
        return r.choice(CONTROL)
    if k < 0.93:
        return r.choice(["'s", "'t", "'re", "'VE", "'M", "'ll", "'D", "'", "''", "’s"])
    return r.choice(".,;:!?()[]{}<>\"'`~@#$%^&*-_=+|\\/…—–«»¿¡")


def make_string(r):
    k = r.random()
    if k < 0.03:
        return ""
    if k < 0.06:  # long runs
        return r.choice([" ", "\n", "a", "1", "é", "😀", "\t", "! "]) * r.randint(50, 400)
    n = r.randint(1, 24)
    sep = r.random() < 0.5
    return ("" if not sep else " ").join(fragment(r) for _ in range(n))
