"""Why alignment does not lower the modular-addition transformer's barrier: the measured evidence.

:func:`modadd_diagnostics` returns, for the two ``modadd-transformer`` preset models,

* the dominant Fourier frequencies of each token embedding (DFT over the ``p`` number tokens,
  power summed over the residual coordinates) — equal sets mean the same algorithm;
* the relative residual ``‖E_B' − E_A‖ / ‖E_A‖`` of the centred token embeddings after the
  identity, after our permutation alignment, and after the best orthogonal map (Procrustes) —
  a small orthogonal residual with a large permutation residual means the two residual streams
  are related by a rotation, which is not an exact symmetry of GPT-2;
* the barriers when the residual-stream permutation is left out.

Run: ``OMP_NUM_THREADS=1 PYTHONPATH=src python -m paramsym.reproduce.peers.align_diagnostics [--cache-dir DIR]``
(``DIR``: where ``paramsym align --preset`` cached the models; default ``~/.cache/paramsym``).
"""

from __future__ import annotations

import json

import torch

from ...alignment.align import align, align_parameters
from ...alignment.arch import Architecture
from ...kinds.align_presets import load_preset

__all__ = ["modadd_diagnostics"]


def modadd_diagnostics(cache_dir: str | None = None, points: int = 13, modadd=None) -> dict:
    """The numbers of the module docstring (float64); ``modadd``: another training configuration
    (:class:`~paramsym.kinds.align_presets.ModAddConfig`)."""
    arch, a, b, data, info = load_preset("modadd-transformer", cache_dir=cache_dir, modadd=modadd)
    p = info["config"]["p"]
    out: dict = {}
    for name, ps in (("A", a), ("B", b)):
        power = torch.fft.rfft(ps["transformer.wte.weight"][:p].double(), dim=0).abs().pow(2).sum(1)[1:]
        order = torch.argsort(power, descending=True)
        out[f"top_frequencies_{name}"] = (order[:4] + 1).tolist()
        out[f"top4_power_share_{name}"] = float(power[order[:4]].sum() / power.sum())
    stages, _, _ = align_parameters(arch, a, b, ["permutation"])

    def centred(t):
        e = t["transformer.wte.weight"][:p].double()
        return e - e.mean(0)

    ea, eb, ep = centred(a), centred(b), centred(stages["permutation"])
    u, _, vt = torch.linalg.svd(eb.T @ ea)
    rel = lambda x: float((x - ea).norm() / ea.norm())  # noqa: E731
    out["embedding_residual"] = {"identity": rel(eb), "permutation": rel(ep), "orthogonal": rel(eb @ (u @ vt))}
    no_res = Architecture(arch.kind, arch.names, [g for g in arch.groups if g.kind != "residual_permutation"],
                          arch.attention, arch.forward, arch.activation, arch.info)
    s = align(no_res, a, b, data, points=points, generator=torch.Generator().manual_seed(0)).summary()
    out["without_residual_permutation"] = {k: s[k] for k in (
        "barrier_before", "barrier_before_train", "barrier_permutation", "barrier_permutation_train",
        "barrier_full", "barrier_full_train")} | {"distance": s["distance"]}
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m paramsym.reproduce.peers.align_diagnostics [--cache-dir DIR]``: the diagnostics as JSON.

    The cache directory is an argument (the library reads no environment)."""
    import argparse

    parser = argparse.ArgumentParser(description="why alignment does not lower the modadd barrier (module docstring)")
    parser.add_argument("--cache-dir", default=None, help="the cache of `paramsym align --preset` (default "
                        "~/.cache/paramsym; `paramsym align` reads it from $PARAMSYM_CACHE)")
    print(json.dumps(modadd_diagnostics(parser.parse_args(argv).cache_dir), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
