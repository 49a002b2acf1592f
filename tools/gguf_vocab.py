"""Vocabulary pieces shared by the tools that write small GGUF models (make_tiny_models.py,
make_random_gguf.py) and by crosscheck.py, which spells a token's bytes as the engine prints them."""


def byte_alphabet() -> list[str]:
    """GPT-2 bytes_to_unicode(): the spelling of each byte value 0..255."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = {}, 0
    for b in range(256):
        if b in bs:
            cs[b] = chr(b)
        else:
            cs[b] = chr(256 + n)
            n += 1
    return [cs[b] for b in range(256)]
