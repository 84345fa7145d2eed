"""Alignment of a tiny GPT-2: exact function preservation, planted recovery of heads/FFN/residual
permutations and of per-head GL elements, agreement with the catalogue's HeadPermutationAction."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("transformers")

from paramsym.actions import catalogue as cat  # noqa: E402
from paramsym.actions.attention import QueryKeyAction  # noqa: E402
from paramsym.actions.permutation import HeadPermutationAction  # noqa: E402
from paramsym.alignment.align import align, apply_attention, apply_permutation  # noqa: E402
from paramsym.alignment.arch import hf_architecture  # noqa: E402
from paramsym.alignment.matching import distance, match_attention, match_permutations  # noqa: E402
from paramsym.models.datasets import modular_addition  # noqa: E402
from paramsym.params import ParameterBlock  # noqa: E402

P = 7


def _model():
    from transformers import GPT2Config, GPT2LMHeadModel

    conf = GPT2Config(vocab_size=P + 1, n_positions=3, n_embd=16, n_layer=2, n_head=2, n_inner=24, resid_pdrop=0.0,
                      embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=P, eos_token_id=P, attn_implementation="eager")
    return GPT2LMHeadModel(conf).eval().double()


def _random_params(model, seed):
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for n, p in model.named_parameters():
        out[n] = torch.randn(p.shape, generator=gen, dtype=torch.float64) * (0.3 if p.ndim > 1 else 0.1)
        if ".ln_" in n or "ln_f" in n:
            out[n] = out[n] + (1.0 if n.endswith("weight") else 0.0)
    return out


@pytest.fixture(scope="module")
def setup():
    model = _model()
    arch = hf_architecture(model, n_classes=P)
    return model, arch, _random_params(model, 0), _random_params(model, 1)


def _logits(model, params, ids):
    from torch.func import functional_call

    return functional_call(model, dict(params), (ids,)).logits


def test_groups_come_from_the_adapter(setup):
    """The adapter's groups against the model's config (counts and sizes read from GPT2Config, not
    from the adapter), and each group is a real symmetry of the HF model: a random permutation of its
    units moves the parameters and leaves the logits at float64 rounding, while the same permutation
    with one of the group's tensors left out (a broken group) changes them."""
    model, arch, a, _ = setup
    conf = model.config
    sizes = sorted((g.kind, g.size) for g in arch.groups)
    assert sizes == sorted([("head_permutation", conf.n_head)] * conf.n_layer
                           + [("hidden_permutation", conf.n_inner)] * conf.n_layer
                           + [("residual_permutation", conf.n_embd)])
    assert len(arch.attention) == conf.n_layer and all(la.num_heads == conf.n_head for la in arch.attention)
    assert not arch.rescalable  # GELU: no rescaling
    ids = torch.randint(0, P + 1, (6, 3), generator=torch.Generator().manual_seed(3))
    ref = _logits(model, a, ids)
    gen = torch.Generator().manual_seed(4)
    for g in arch.groups:
        for m in g.members:  # each unit owns distinct, valid entries of its tensors
            pos = m.positions.reshape(-1)
            assert m.positions.shape[0] == g.size and pos.unique().numel() == pos.numel() < a[m.name].numel() + 1
        perm = torch.randperm(g.size, generator=gen)
        perm = torch.roll(perm, 1) if torch.equal(perm, torch.arange(g.size)) else perm  # not the identity
        moved = apply_permutation(a, g, perm)
        assert distance(moved, a) > 1e-2, g.name
        err = float((_logits(model, moved, ids) - ref).abs().max() / ref.abs().max())
        assert err <= 1e-12, (g.name, err)
        broken = dataclasses.replace(g, members=g.members[:-1], pair=None)  # one tensor left unpermuted
        assert float((_logits(model, apply_permutation(a, broken, perm), ids) - ref).abs().max()) > 1e-3, g.name


def test_full_alignment_preserves_the_function_float64(setup):
    _, arch, a, b = setup
    data = modular_addition(P, 0, 0.5)
    res = align(arch, a, b, data, points=3)
    assert res.symmetries == ["permutation", "attention"]
    for stage in ("permutation", "full"):
        assert res.function_error[stage] <= 1e-10
        assert distance(res.stages[stage], b) > 1e-2  # B really moved
    assert res.distance["full"] <= res.distance["permutation"] <= res.distance["before"]


def test_planted_permutations_of_heads_units_and_residual_are_recovered(setup):
    _, arch, a, _ = setup
    gen = torch.Generator().manual_seed(5)
    b = dict(a)
    for g in arch.groups:
        b = apply_permutation(b, g, torch.randperm(g.size, generator=gen))
    assert distance(a, b) > 1.0
    perms, _ = match_permutations(a, b, arch.groups, generator=torch.Generator().manual_seed(0))
    for g in arch.groups:
        b = apply_permutation(b, g, perms[g.name])
    assert max(float((b[n] - a[n]).abs().max()) for n in a) == 0.0


def test_planted_attention_gl_is_recovered(setup):
    _, arch, a, _ = setup
    gen = torch.Generator().manual_seed(6)
    b = dict(a)
    for layout in arch.attention:
        d = layout.head_dim * layout.num_heads
        gqk = torch.linalg.matrix_exp(0.3 * torch.block_diag(*[torch.randn(8, 8, generator=gen, dtype=torch.float64)
                                                                 for _ in range(layout.num_heads)]))
        gvo = torch.linalg.matrix_exp(0.3 * torch.block_diag(*[torch.randn(8, 8, generator=gen, dtype=torch.float64)
                                                                 for _ in range(layout.num_heads)]))
        assert gqk.shape == (d, d)
        b = apply_attention(b, layout, gqk, gvo)
    assert distance(a, b) > 1e-1
    for layout in arch.attention:
        gqk, gvo = match_attention(a, b, layout)
        b = apply_attention(b, layout, gqk, gvo)
    assert max(float((b[n] - a[n]).abs().max()) for n in a) <= 1e-9


def test_generic_head_permutation_equals_head_permutation_action(setup):
    _, arch, a, _ = setup
    g = next(g for g in arch.groups if g.name == "transformer.h.0.attn.heads")
    D, H, d = 16, 2, 8
    names = ["transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight"]
    block = ParameterBlock.from_params(a, names)
    act = HeadPermutationAction(block, H, {names[0]: (3 * D, d), names[1]: (3, d), names[2]: (1, d * D)})
    perm = torch.tensor([1, 0])
    ref = block.scatter(act.act(cat.permutation_matrix(perm.tolist()), block.gather(a)), a)
    ours = apply_permutation(a, g, perm)
    assert all(torch.equal(ref[n], ours[n]) for n in a)


def test_query_key_action_moves_only_queries_and_keys(setup):
    _, arch, a, _ = setup
    layout = arch.attention[0]
    block = QueryKeyAction.block_for(a, layout)
    assert set(block.names) == {"transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias"}


def test_cli_on_save_pretrained_directories(tmp_path, capsys):
    import json

    from paramsym.cli import main

    paths = []
    for seed in (0, 1):
        model = _model().float()
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(_random_params(model, seed)[n].float())
        model.save_pretrained(tmp_path / f"m{seed}")
        paths.append(str(tmp_path / f"m{seed}"))
    assert main(["align", *paths, "--json", "--points", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["symmetries"] == ["permutation", "attention"]
    assert summary["model"]["data"] == f"modadd:{P}"
    assert summary["function_error"] <= 1e-6
    assert main(["align", *paths, "--symmetries", "rescaling"]) == 2
    assert "SymmetryNotApplicableError" in capsys.readouterr().err
