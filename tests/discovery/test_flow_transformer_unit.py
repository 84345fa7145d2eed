"""Both action kinds train on a transformer FFN unit (a tiny BERT from a config object), and the
flow kind composes to the solver floor there (issue 17, item 3 / "Must show").

The block is the FFN-unit problem (one unit's incoming weights and bias, its compensators'
outgoing columns; the minilm recipe's scales: β = 0.01, field-scaled output). Seconds on a CPU.
"""

from __future__ import annotations

import pytest
import torch

from paramsym.config import apply_overrides
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.train import Trainer

transformers = pytest.importorskip("transformers")


def _tiny_problem():
    from paramsym.discovery.transformer import ffn_unit_problem

    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.BertModel(cfg).eval()
    return ffn_unit_problem(model, torch.arange(3, 9)[None], layer=1, name="tiny-ffn-unit")


def test_both_kinds_train_on_an_ffn_unit_and_the_flow_composes_in_float64() -> None:
    torch.set_num_threads(1)
    problem = _tiny_problem()
    comp = {}
    for kind in ("direct", "flow"):
        cfg = apply_overrides(DiscoverConfig.for_preset("minilm-ffn-unit"),
                              [f"action.kind={kind}", "action.width=16", "train.batch=4", "train.steps=3"])
        tr = Trainer(problem, cfg, problem.scales(cfg.objective.beta, torch.Generator().manual_seed(0), n=32))
        before = [p.detach().clone() for p in tr.action.net.parameters()]
        for step in range(3):
            terms = tr.step(step)
            assert all(torch.isfinite(torch.tensor(v)) for v in terms.values())
        assert any(not torch.equal(b, p) for b, p in zip(before, tr.action.net.parameters()))  # it trained
        a = tr.action.double().eval()
        gen = torch.Generator().manual_seed(5)
        th = problem.sample(32, gen, torch.float64)
        s1, s2 = a.group.sample(32, 0.5, 1, generator=gen), a.group.sample(32, 0.5, 1, generator=gen)
        g1, g2 = a.group.matrices(s1).double(), a.group.matrices(s2).double()
        with torch.no_grad():
            one = a.act_many(g1, th)
            two = a.act_many(g2, one)
            direct = a.act_many(g2 @ g1, th)
        motion = (one - th).norm(dim=-1) + (two - one).norm(dim=-1)
        assert float(((one - th).norm(dim=-1) / th.norm(dim=-1)).median()) > 1e-6  # the block moves
        comp[kind] = float(((two - direct).norm(dim=-1) / motion).max())
    assert comp["flow"] <= 1e-6, comp
