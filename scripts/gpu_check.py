"""The package on a CUDA GPU: the same numbers as on the CPU, no host synchronisation in a forward pass.

    python scripts/gpu_check.py          # needs a CUDA GPU; exits 1 on the first failed check

Each check prints one line. The models are small and random: this checks the code paths (devices, dtypes,
the KV cache, the fused kernel, the doors' checks), not a training result.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import torch

import transformer_course as tc

CUDA = torch.device("cuda")


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        raise SystemExit(1)


def same(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-4) -> tuple[bool, str]:
    diff = float((a.float().cpu() - b.float().cpu()).abs().max())
    return diff <= tol, f"max |difference| {diff:.2e}"


def models() -> dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    src, tgt = torch.randint(1, 50, (4, 12)), torch.randint(1, 50, (4, 9))
    ids = torch.randint(0, 50, (4, 16))
    modern = tc.ModernDecoder(tc.ModernConfig(50, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, max_len=64))
    return {
        "Transformer": (tc.Transformer(50, 50, 64, 4, 2, 128, dropout=0.0), (src, tgt)),
        "GPT": (tc.GPT(50, 64, 4, 2, 128, 64, dropout=0.0), (ids,)),
        "BERT": (tc.BERT(50, 64, 4, 2, 128, 64, dropout=0.0), (ids,)),
        "ModernDecoder": (modern, (ids,)),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to check")
        return 1
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for name, (model, inputs) in models().items():
        model.eval()
        with torch.no_grad():
            expected = model(*inputs)
            gpu = model.to(CUDA)
            gpu_inputs = tuple(x.to(CUDA) for x in inputs)
            check(f"{name} forward on CUDA equals the CPU", *same(gpu(*gpu_inputs), expected))
            # A forward pass must not make the host wait for the GPU (the doors queue the id check instead).
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                gpu(*gpu_inputs)
                synced = ""
            except RuntimeError as error:
                synced = str(error).splitlines()[0]
            finally:
                torch.cuda.set_sync_debug_mode("default")
            check(f"{name} forward runs without a host synchronisation", not synced, synced)
            if name in ("Transformer", "GPT"):
                tc.use_fused_attention(gpu)
                check(f"{name} fused kernel on CUDA equals the teaching path", *same(gpu(*gpu_inputs), expected))
                tc.use_fused_attention(gpu, False)

    translator, (src, _) = models()["Transformer"]
    translator = translator.to(CUDA).eval()
    src = src.to(CUDA)
    cached = tc.greedy_decode(translator, src, 20, 1, 2)
    check(
        "greedy decoding on CUDA: cached == uncached",
        torch.equal(cached, tc.greedy_decode(translator, src, 20, 1, 2, False)),
    )
    beam = tc.beam_search(translator, src[:1], 4, 20, 1, 2)
    check(
        "beam search on CUDA: cached == uncached",
        torch.equal(beam, tc.beam_search(translator, src[:1], 4, 20, 1, 2, use_cache=False)),
    )
    gpt, (ids,) = models()["GPT"]
    gpt = gpt.to(CUDA).eval()
    g = torch.Generator(CUDA).manual_seed(0)
    sampled = tc.generate(gpt, ids[:, :4].to(CUDA), 20, temperature=0.8, top_k=10, generator=g)
    g = torch.Generator(CUDA).manual_seed(0)
    again = tc.generate(gpt, ids[:, :4].to(CUDA), 20, temperature=0.8, top_k=10, generator=g, use_cache=False)
    check("GPT sampling on CUDA: cached == uncached with one seed", torch.equal(sampled, again))

    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = gpt(ids.to(CUDA))
    check("GPT under bfloat16 autocast: finite logits", bool(torch.isfinite(logits).all()))

    torch.manual_seed(0)
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS, shared_vocab=True)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), 32, 4, 2, 64, dropout=0.0).to(CUDA)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = tc.training.cross_entropy_loss(model.pad_id)
    history = tc.fit(model, itertools.repeat(corpus.batch().to(CUDA)), 60, optimizer, loss_fn, progress=False)
    first, last = history.losses[0], history.losses[-1]
    check("training on CUDA lowers the loss", last < first / 2, f"{first:.2f} -> {last:.2f}")

    # An id outside the vocabulary stops the next synchronising call with the door's message. A failed device
    # assertion leaves the CUDA context unusable, so this runs in a process of its own.
    code = textwrap.dedent("""
        import torch, transformer_course as tc
        model = tc.GPT(50, 32, 2, 1, 64, 16).cuda().eval()
        try:
            model(torch.tensor([[1, 2, 70]], device="cuda")).sum().item()
        except RuntimeError as error:
            print("refused:", "ids: expected ids in [0, 49]" in str(error) or "device-side assert" in str(error))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    check("an id outside the vocabulary on CUDA is refused", "refused: True" in out.stdout, out.stdout.strip()[-200:])
    print("all checks passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
