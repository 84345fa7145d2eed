"""Aligning and merging two models modulo their exact parameter symmetries (issue 11).

* :mod:`.arch` — what can be aligned: unit groups (hidden units, FFN units, heads), attention
  layers and the function of an MLP chain or a Hugging Face model;
* :mod:`.matching` — weight matching: permutations by linear assignment (Git Re-Basin), positive
  rescaling (a per-unit quartic), per-head GL(d_k)/GL(d_v) (Sylvester least squares);
* :mod:`.path` — the linear path, its loss barrier, relative output error;
* :mod:`.align` — the stages before / permutation / full, applied through the catalogue actions;
* :mod:`.checkpoints` — two Hugging Face checkpoints aligned through the census's exported groups;
* :mod:`.io` — loading two models from files, choosing data, writing result/report/plot/merged.

The function :func:`paramsym.alignment.align.align` is not re-exported here (its name is that of
its module): ``from paramsym.alignment.align import align``.

The names below resolve on first use (:func:`paramsym.lazy.lazy_exports`), so importing a
torch-free module of the package (:mod:`.refine_config`, read by the ``align`` run kind's
configuration when the command line is built) does not import torch.
"""

from ..lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["SYMMETRIES", "AlignmentResult", "check_points", "resolve_symmetries"], "align"),
    **dict.fromkeys(["Architecture", "UnitGroup", "check_same_architecture", "hf_architecture", "mlp_architecture"],
                    "arch"),
    **dict.fromkeys(["StreamRotation", "align_checkpoints", "align_to", "spec_groups"], "checkpoints"),
    **dict.fromkeys(["data_for", "load_pair", "load_side", "render_report", "write_outputs"], "io"),
    **dict.fromkeys(["balance", "distance", "match_attention", "match_head_gl", "match_permutations",
                     "match_rescaling", "match_rotation", "permute", "rescale", "rotate_axes",
                     "solve_quartic_scales"], "matching"),
    **dict.fromkeys(["PathCurve", "barrier", "evaluate", "interpolate", "path_curve", "relative_output_error"], "path"),
    "RefineConfig": "refine_config",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
