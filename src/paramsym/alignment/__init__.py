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
"""

from .align import SYMMETRIES, AlignmentResult, check_points, resolve_symmetries
from .arch import (
    Architecture,
    UnitGroup,
    check_same_architecture,
    hf_architecture,
    mlp_architecture,
)
from .checkpoints import StreamRotation, align_checkpoints, align_to, spec_groups
from .io import data_for, load_pair, load_side, render_report, write_outputs
from .matching import (
    balance,
    distance,
    match_attention,
    match_head_gl,
    match_permutations,
    match_rescaling,
    match_rotation,
    permute,
    rescale,
    rotate_axes,
    solve_quartic_scales,
)
from .path import PathCurve, barrier, evaluate, interpolate, path_curve, relative_output_error

__all__ = [
    "SYMMETRIES", "AlignmentResult", "Architecture", "PathCurve", "StreamRotation", "UnitGroup", "align_checkpoints",
    "align_to", "match_head_gl", "match_rotation", "rotate_axes",
    "balance", "barrier", "check_points", "check_same_architecture", "data_for", "distance", "evaluate",
    "hf_architecture", "interpolate", "load_pair", "load_side", "match_attention", "match_permutations",
    "match_rescaling", "mlp_architecture", "path_curve", "permute", "relative_output_error", "render_report", "rescale",
    "resolve_symmetries", "solve_quartic_scales", "spec_groups", "write_outputs",
]
