"""Compensation on real transformers: the closed-form compensating action (Corollary 4.6) on one
FFN unit of a pretrained model, its edits installed into the full model, and whole-model drift
measured against matched random and uncompensated controls ([Discovery] §6–7).

Public API (stable; the learned path builds on it): :func:`prepare` (cached FFN inputs,
compensators by pivoted QR, the boundary target), :func:`closed_form_edit`, :func:`evaluate`
(drift of any edited θ against the controls), :func:`run_closed_form` (everything, with a motion
sweep) and its report (:func:`report_markdown`, :func:`write_figures`).
"""

from .protocol import (
           CompensationResult,
           CompensationSetup,
           Edit,
           closed_form_edit,
           evaluate,
           prepare,
           run_closed_form,
)
from .report import report_markdown, write_figures

__all__ = ["CompensationSetup", "CompensationResult", "Edit", "prepare", "closed_form_edit", "evaluate",
           "run_closed_form", "report_markdown", "write_figures"]
