"""Seed 000/001/002's KV-cache sizes, from the one KV formula (roofline.sizing.kv)."""

from roofline.cards.store import CardStore
from roofline.sizing.kv import kv_bytes, kv_bytes_per_token

GiB, MiB, KiB = 2**30, 2**20, 2**10


def main() -> None:
    store = CardStore()
    llama = store.model("llama-3.3-70b")
    for ctx in (4096, 32768, 131072, 2**20):
        print(f"Llama-3.3-70B bf16 KV at {ctx:>9,} tokens: {kv_bytes(llama, ctx) / GiB:7.2f} GiB "
              f"({kv_bytes(llama, ctx) / 1e9:6.1f} GB)")
    l13 = store.model("llama-2-13b")
    print(f"Llama-2-13B: {kv_bytes_per_token(l13) / MiB:.2f} MiB per token, {kv_bytes(l13, 4096) / GiB:.2f} GiB at 4K")
    ds = store.model("deepseek-v3")
    print(f"DeepSeek-V3 MLA: {kv_bytes_per_token(ds) / KiB:.1f} KiB per token (61 x 576 x 2 B)")
    oss = store.model("gpt-oss-20b")
    print(f"gpt-oss-20b at 128K: {kv_bytes(oss, 131072) / GiB:.2f} GiB (12 of 24 layers hold only a 128-token window)")
    nano = store.model("nemotron-3-nano")
    print(f"Nemotron-3-Nano at 128K: {kv_bytes(nano, 131072) / GiB:.2f} GiB (6 attention layers + constant Mamba state)")


if __name__ == "__main__":
    main()
